package handler

// WriteShareGroupState (key 85), versions 0-1: a broker that leads a
// share-partition makes a change of its state durable at the share
// coordinator, which applies the update to the state it holds and
// answers once the resulting snapshot record of __share_group_state is
// committed. Writes from an older leader epoch than the latest reader or
// writer get FENCED_LEADER_EPOCH; writes against a state reset since
// (AlterShareGroupOffsets) get FENCED_STATE_EPOCH. Berth's per-batch
// fields ride in tagged fields (internal/sharestate).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharestate"
)

func init() { register(85, 0, 1, (*Broker).writeShareGroupState) }

func (b *Broker) writeShareGroupState(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.WriteShareGroupStateRequest)
	resp := r.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	denied := !b.authorizedCluster(req, opClusterAction)
	for _, t := range r.Topics {
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			k := share.Key{Group: r.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			if denied {
				rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			} else if b.ShareStates == nil {
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			} else if err := b.ShareStates.Write(k, sharestate.WriteRequestUpdate(p)); err != nil {
				rp.ErrorCode, rp.ErrorMessage = code(err), errMsg(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp), nil
}
