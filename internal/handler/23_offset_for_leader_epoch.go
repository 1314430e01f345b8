package handler

// OffsetForLeaderEpoch, versions 0-4: the end offset of the largest leader
// epoch at or below the one asked for, from the log's leader-epoch cache,
// with current-epoch fencing (v2+). Consumers use it to detect log
// truncation (KIP-320) and followers to truncate a divergent tail before
// they fetch. Only the leader answers; the replica id is not looked at.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(23, 0, 4, (*Broker).offsetForLeaderEpoch) }

func (b *Broker) offsetForLeaderEpoch(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	im := b.image()
	follower := r.Version >= 3 && r.ReplicaID >= 0
	clusterOK := follower && b.authorizedCluster(req, opClusterAction)
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		var t *metadata.Topic
		var terr error
		switch {
		case clusterOK:
			t, terr = lookupTopic(im, rt.Topic, [16]byte{}, false)
		case follower:
			terr = kerr.TopicAuthorizationFailed // a follower without CLUSTER_ACTION, as Kafka answers
		default:
			t, terr = b.lookupTopicFor(req, im, opDescribe, rt.Topic, [16]byte{}, false)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
			err := terr
			if err == nil {
				p, perr := b.partition(t, rp.Partition)
				if err = perr; err == nil {
					if err = p.CheckEpoch(rp.CurrentLeaderEpoch); err == nil {
						sp.LeaderEpoch, sp.EndOffset = p.Log().EndOffsetForEpoch(rp.LeaderEpoch)
						if sp.EndOffset > p.HighWatermark() && sp.LeaderEpoch == p.LeaderEpoch() {
							sp.EndOffset = p.LogEndOffset()
						}
					}
				}
			}
			if err != nil {
				sp.ErrorCode = code(err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp), nil
}
