package handler

// InitializeShareGroupState (key 83), version 0, broker to broker: the
// broker that serves AlterShareGroupOffsets restarts a share-partition's
// state at the given start offset at its share coordinator. The state
// epoch is bumped (the request's StateEpoch is not used: the coordinator
// picks the next one), which fences the writes of a leader that loaded
// the old state; it reloads. Answered once the snapshot record is
// committed.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/share"
)

func init() { register(83, 0, 0, (*Broker).initializeShareGroupState) }

func (b *Broker) initializeShareGroupState(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.InitializeShareGroupStateRequest)
	resp := r.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	denied := !b.authorizedCluster(req, opClusterAction)
	for _, t := range r.Topics {
		rt := kmsg.NewInitializeShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			k := share.Key{Group: r.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			switch {
			case denied:
				rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			case b.ShareStates == nil:
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			case p.StartOffset < 0:
				rp.ErrorCode = kerr.InvalidRequest.Code
			default:
				if err := b.ShareStates.Initialize(k, p.StartOffset); err != nil {
					rp.ErrorCode, rp.ErrorMessage = code(err), errMsg(err)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp), nil
}
