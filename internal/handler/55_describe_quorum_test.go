package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// quorumReq asks DescribeQuorum for topic's partitions.
func quorumReq(version int16, topic string, parts ...int32) *kmsg.DescribeQuorumRequest {
	r := kmsg.NewPtrDescribeQuorumRequest()
	r.Version = version
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewDescribeQuorumRequestTopicPartition()
		rp.Partition = p
		t.Partitions = append(t.Partitions, rp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// describeQuorum asks until the node answers as the active controller
// (the quorum status is refreshed every Raft tick, so a node that has just
// started may answer NOT_LEADER_OR_FOLLOWER for a moment).
func describeQuorum(ctx context.Context, t *testing.T, cl *kgo.Client, version int16) *kmsg.DescribeQuorumResponse {
	t.Helper()
	var resp *kmsg.DescribeQuorumResponse
	poll.Until(t, 10*time.Second, func() error {
		var err error
		resp, err = quorumReq(version, "__cluster_metadata", 0).RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
		}
		return nil
	})
	return resp
}

// A single node is a one-voter quorum: it leads, has committed its own
// entries, and answers every version.
func TestDescribeQuorumSingleNode(t *testing.T) {
	n := tc.Start(t, tc.With("node.id", "4"))
	cl := tc.Client(t, n.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for v := int16(0); v <= 2; v++ {
		before := time.Now().UnixMilli()
		resp := describeQuorum(ctx, t, cl, v)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		tp := resp.Topics[0]
		p := tp.Partitions[0]
		if tp.Topic != "__cluster_metadata" || p.Partition != 0 || p.ErrorCode != 0 {
			t.Fatalf("v%d: topic %s partition %d code %d", v, tp.Topic, p.Partition, p.ErrorCode)
		}
		if p.LeaderID != 4 || p.LeaderEpoch < 1 || p.HighWatermark < 1 {
			t.Fatalf("v%d: leader %d epoch %d high watermark %d", v, p.LeaderID, p.LeaderEpoch, p.HighWatermark)
		}
		if len(p.CurrentVoters) != 1 || len(p.Observers) != 0 {
			t.Fatalf("v%d: voters %+v observers %+v", v, p.CurrentVoters, p.Observers)
		}
		vs := p.CurrentVoters[0]
		if vs.ReplicaID != 4 || vs.LogEndOffset < p.HighWatermark {
			t.Fatalf("v%d: voter %+v, high watermark %d", v, vs, p.HighWatermark)
		}
		if v >= 1 && (vs.LastFetchTimestamp < before || vs.LastCaughtUpTimestamp < before) {
			t.Fatalf("v%d: the leader's own timestamps %d %d, want now (>= %d)", v, vs.LastFetchTimestamp, vs.LastCaughtUpTimestamp, before)
		}
		if vs.ReplicaDirectoryID != [16]byte{} {
			t.Fatalf("v%d: directory id %x", v, vs.ReplicaDirectoryID)
		}
		// A node without controller.quorum.voters has no controller address.
		if len(resp.Nodes) != 0 {
			t.Fatalf("v%d: nodes %+v", v, resp.Nodes)
		}
	}
}

// Any partition but __cluster_metadata-0 is unknown, each one named.
func TestDescribeQuorumUnknownPartition(t *testing.T) {
	n := tc.Start(t)
	cl := tc.Client(t, n.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, req := range []*kmsg.DescribeQuorumRequest{
		quorumReq(2, "orders", 0),
		quorumReq(2, "__cluster_metadata", 1),
		quorumReq(2, "__cluster_metadata", 0, 1),
	} {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(req.Topics[0].Partitions) {
			t.Fatalf("%+v: answer %+v", req.Topics, resp.Topics)
		}
		for i, p := range resp.Topics[0].Partitions {
			if p.Partition != req.Topics[0].Partitions[i].Partition || p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.ErrorMessage == nil {
				t.Fatalf("%+v: partition %+v", req.Topics, p)
			}
		}
	}
}
