package handler

// DescribeQuorum, versions 0-2 (KIP-595, KIP-836 timestamps in v1, KIP-853
// directory ids, error messages and node endpoints in v2): the metadata
// quorum as the active controller sees it, for kafka-metadata-quorum.sh
// and `berth cluster quorum`. The one partition is __cluster_metadata-0;
// any other topic or partition gets UNKNOWN_TOPIC_OR_PARTITION on each
// partition named, as Kafka's Raft client answers.
//
// Only the active controller knows how far each member has replicated, so
// as in Kafka every other node answers NOT_LEADER_OR_FOLLOWER on the
// partition (with the leader id and epoch it knows, and, v2+, a message
// naming the leader); clients ask again at the controller. kgo sends the
// request to the controller from its metadata.
//
// Field by field: LeaderEpoch is the Raft term; HighWatermark the commit
// index and LogEndOffset the last index a member holds (Raft log indexes,
// not Kafka's next-offset convention; -1 when the leader does not know
// yet). LastFetchTimestamp is when the leader last heard from the member
// (now for the leader, -1 when never since it took over);
// LastCaughtUpTimestamp is the same when the member holds every committed
// entry and -1 otherwise (Berth does not keep when a lagging member was
// last caught up). ReplicaDirectoryId is zero: Berth has no directory ids.
// Nodes (v2) lists every member's controller listener as "CONTROLLER".

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(55, 0, 2, (*Broker).describeQuorum) }

func (b *Broker) describeQuorum(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeQuorumRequest)
	resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if !b.authorizedCluster(req, opDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("DESCRIBE on the cluster is needed to describe the metadata quorum")
		return now(resp), nil
	}
	if !isMetadataPartition(r.Topics) {
		for _, rt := range r.Topics {
			t := kmsg.NewDescribeQuorumResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewDescribeQuorumResponseTopicPartition()
				p.Partition, p.ErrorCode, p.LeaderID = rp.Partition, kerr.UnknownTopicOrPartition.Code, -1
				p.ErrorMessage = errMsg(fmt.Errorf("the metadata quorum has one partition, %s-0", metadataTopic))
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return now(resp), nil
	}
	q := b.Controller.Quorum()
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.LeaderID, p.LeaderEpoch = q.Leader, int32(min(q.Term, 1<<31-1))
	if !q.IsLeader {
		p.ErrorCode = kerr.NotLeaderForPartition.Code
		p.ErrorMessage = errMsg(errors.New(notLeader(b.NodeID, q.Leader) + "; DescribeQuorum is answered by the active controller"))
	} else {
		p.HighWatermark = int64(q.Committed)
		nowMs := time.Now().UnixMilli()
		for _, m := range q.Members {
			rs := replicaState(m, q, nowMs)
			if m.Voter {
				p.CurrentVoters = append(p.CurrentVoters, rs)
			} else {
				p.Observers = append(p.Observers, rs)
			}
		}
		if r.Version >= 2 {
			resp.Nodes = quorumNodes(b.image().Controllers, q.Members)
		}
	}
	t := kmsg.NewDescribeQuorumResponseTopic()
	t.Topic = metadataTopic
	t.Partitions = []kmsg.DescribeQuorumResponseTopicPartition{p}
	resp.Topics = []kmsg.DescribeQuorumResponseTopic{t}
	return now(resp), nil
}

// isMetadataPartition reports whether a request names exactly
// __cluster_metadata-0.
func isMetadataPartition(topics []kmsg.DescribeQuorumRequestTopic) bool {
	return len(topics) == 1 && topics[0].Topic == metadataTopic &&
		len(topics[0].Partitions) == 1 && topics[0].Partitions[0].Partition == 0
}

// replicaState is one member as the leader sees it.
func replicaState(m metadata.QuorumMember, q metadata.QuorumStatus, nowMs int64) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	rs.ReplicaID, rs.LogEndOffset = m.NodeID, -1
	if m.Match > 0 {
		rs.LogEndOffset = int64(m.Match)
	}
	switch {
	case m.NodeID == q.Leader:
		rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = nowMs, nowMs
	case !m.LastHeard.IsZero():
		rs.LastFetchTimestamp = m.LastHeard.UnixMilli()
		if m.Match >= q.Committed {
			rs.LastCaughtUpTimestamp = rs.LastFetchTimestamp
		}
	}
	return rs
}

// quorumNodes lists the controller endpoint of every member whose address
// is known and parses as host:port.
func quorumNodes(ctrls map[int32]string, members []metadata.QuorumMember) []kmsg.DescribeQuorumResponseNode {
	var out []kmsg.DescribeQuorumResponseNode
	for _, m := range members {
		host, port, ok := splitHostPort(ctrls[m.NodeID])
		if !ok {
			continue
		}
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = m.NodeID
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = controllerListener, host, port
		n.Listeners = []kmsg.DescribeQuorumResponseNodeListener{l}
		out = append(out, n)
	}
	return out
}

// splitHostPort splits "host:port" with a port in 1-65535.
func splitHostPort(addr string) (string, uint16, bool) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "", 0, false
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return "", 0, false
	}
	return host, uint16(port), true
}
