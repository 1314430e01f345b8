package handler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// addVoterReq builds an AddRaftVoter request; listeners are "NAME=host:port".
func addVoterReq(id int32, listeners ...string) *kmsg.AddRaftVoterRequest {
	r := kmsg.NewPtrAddRaftVoterRequest()
	r.Version, r.VoterID, r.TimeoutMillis = 1, id, 5000
	for _, l := range listeners {
		name, addr, _ := strings.Cut(l, "=")
		host, port, _ := strings.Cut(addr, ":")
		rl := kmsg.NewAddRaftVoterRequestListener()
		rl.Name, rl.Host = name, host
		var p uint16
		for _, c := range port {
			p = p*10 + uint16(c-'0')
		}
		rl.Port = p
		r.Listeners = append(r.Listeners, rl)
	}
	return r
}

// The error paths on a one-voter quorum (node 1): each with the code Kafka
// uses and a message that says what to do.
func TestAddRaftVoterErrors(t *testing.T) {
	n := tc.Start(t)
	cl := tc.Client(t, n.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	describeQuorum(ctx, t, cl, 2) // the node leads
	other := "another-cluster"
	wrongCluster := addVoterReq(2, "CONTROLLER=127.0.0.1:9999")
	wrongCluster.ClusterID = &other
	for _, c := range []struct {
		name string
		req  *kmsg.AddRaftVoterRequest
		code *kerr.Error
		msg  string
	}{
		{"already a voter", addVoterReq(1), kerr.DuplicateVoter, "node 1 is already a voter"},
		{"negative id", addVoterReq(-1), kerr.InvalidRequest, "node ids are 0 or more"},
		{"no listener", addVoterReq(2), kerr.InvalidRequest, "joins as an observer"},
		{"no controller listener", addVoterReq(2, "A=h:1", "B=h:2"), kerr.InvalidRequest, "named CONTROLLER"},
		{"no port", addVoterReq(2, "CONTROLLER=h:0"), kerr.InvalidRequest, "no host or port"},
		// One live voter of two would not be a majority.
		{"would lose the majority", addVoterReq(2, "CONTROLLER=127.0.0.1:9999"), kerr.InvalidRequest, "without a majority"},
		{"other cluster", wrongCluster, kerr.InconsistentClusterID, `"another-cluster"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := c.req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != c.code.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, c.msg) {
				t.Fatalf("code %d message %v, want %s containing %q", resp.ErrorCode, ptrStr(resp.ErrorMessage), c.code.Message, c.msg)
			}
		})
	}
	// Nothing changed.
	q := describeQuorum(ctx, t, cl, 2)
	if p := q.Topics[0].Partitions[0]; len(p.CurrentVoters) != 1 || len(p.Observers) != 0 {
		t.Fatalf("quorum changed: voters %+v observers %+v", p.CurrentVoters, p.Observers)
	}
}

func ptrStr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
