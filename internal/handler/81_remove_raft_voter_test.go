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

// The error paths on a one-voter quorum (node 1).
func TestRemoveRaftVoterErrors(t *testing.T) {
	n := tc.Start(t)
	cl := tc.Client(t, n.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	describeQuorum(ctx, t, cl, 2) // the node leads
	other := "another-cluster"
	for _, c := range []struct {
		name    string
		id      int32
		cluster *string
		code    *kerr.Error
		msg     string
	}{
		{"not a member", 7, nil, kerr.VoterNotFound, "node 7 is not a member of the metadata quorum (voters [1], observers [])"},
		{"last voter", 1, nil, kerr.VoterNotFound, "node 1 is the last voter"},
		{"negative id", -3, nil, kerr.InvalidRequest, "node ids are 0 or more"},
		{"other cluster", 1, &other, kerr.InconsistentClusterID, `"another-cluster"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := kmsg.NewPtrRemoveRaftVoterRequest()
			req.VoterID, req.ClusterID = c.id, c.cluster
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != c.code.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, c.msg) {
				t.Fatalf("code %d message %v, want %s containing %q", resp.ErrorCode, ptrStr(resp.ErrorMessage), c.code.Message, c.msg)
			}
		})
	}
}
