package handler

// ReadShareGroupState (key 84), version 0: a broker that leads a
// share-partition reads its state from the share coordinator (the leader
// of the share-partition's __share_group_state partition). Berth's
// fields ride in tagged fields (internal/sharestate): each state batch's
// retry time, DLQ reason and error text, and the partition's last
// leader epoch. A share-partition with no state answers StartOffset -1.
// Brokers send it to each other; clients have no use for it.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/internal/sharestate"
)

func init() { register(84, 0, 0, (*Broker).readShareGroupState) }

func (b *Broker) readShareGroupState(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ReadShareGroupStateRequest)
	resp := r.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	denied := !b.authorizedCluster(req, opClusterAction)
	for _, t := range r.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			k := share.Key{Group: r.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			if denied {
				rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			} else if b.ShareStates == nil {
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			} else if s, ok, err := b.ShareStates.Read(k, p.LeaderEpoch); err != nil {
				rp.ErrorCode, rp.ErrorMessage = code(err), errMsg(err)
			} else {
				sharestate.SetReadResponse(&rp, s, ok)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp), nil
}
