package handler

// DeleteShareGroupState (key 86), version 0, broker to broker: the broker
// that serves DeleteShareGroupOffsets, or DeleteGroups of a share group,
// removes share-partitions' state at their share coordinator (a record
// with start offset -1 and the next state epoch, which keeps fencing the
// old state's writers; internal/sharestate Delete); the next fetch of the
// group starts at share.auto.offset.reset. Deleting a share-partition
// with no state succeeds and writes nothing.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/share"
)

func init() { register(86, 0, 0, (*Broker).deleteShareGroupState) }

func (b *Broker) deleteShareGroupState(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DeleteShareGroupStateRequest)
	resp := r.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	denied := !b.authorizedCluster(req, opClusterAction)
	for _, t := range r.Topics {
		rt := kmsg.NewDeleteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			k := share.Key{Group: r.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			if denied {
				rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			} else if b.ShareStates == nil {
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			} else if err := b.ShareStates.Delete(k); err != nil {
				rp.ErrorCode, rp.ErrorMessage = code(err), errMsg(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp), nil
}
