package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// ACLs live in the metadata log: created through one node they are
// described by every node, deleted through another they are gone
// everywhere, and a restarted node has them. (The brokers' own
// connections are User:ANONYMOUS until they authenticate to each other,
// so it is the super user here: docs/security.md.)
func TestACLsReplicateToEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("three broker processes")
	}
	c := tc.StartCluster(t, 3, "--authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"--super.users", "User:ANONYMOUS")
	ctx := ctxT(t, 90*time.Second)
	adm1 := kadm.NewClient(c.Direct(t, 1))
	mustCreateACLs(t, adm1, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpWrite))
	all := kadm.NewACLs().Allow().AllowHosts().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny)
	count := func(id int32) (int, error) {
		res, err := kadm.NewClient(c.Direct(t, id)).DescribeACLs(ctx, all)
		if err != nil {
			return 0, err
		}
		if err := res[0].Err; err != nil {
			return 0, err
		}
		return len(res[0].Described), nil
	}
	waitFor := func(want int, ids ...int32) {
		t.Helper()
		poll.Until(t, 30*time.Second, func() error {
			for _, id := range ids {
				if n, err := count(id); err != nil || n != want {
					return fmt.Errorf("node %d describes %d ACLs (%v), want %d", id, n, err, want)
				}
			}
			return nil
		})
	}
	waitFor(2, 1, 2, 3)
	if _, err := kadm.NewClient(c.Direct(t, 3)).DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().
		Topics("orders").Operations(kadm.OpWrite)); err != nil {
		t.Fatal(err)
	}
	waitFor(1, 1, 2, 3)
	c.Stop(2)
	c.Start(2)
	waitFor(1, 2)
}
