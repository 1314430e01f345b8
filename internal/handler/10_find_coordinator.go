package handler

// FindCoordinator, versions 0-6, with batched keys (v4+). Group keys (0)
// map to the leader of partition abs(hash(group)) % offsets.topic.num.partitions
// of __consumer_offsets, share keys (2, "group:topicId:partition") to the
// leader of partition abs(hash(key)) % share.coordinator.state.topic.num.partitions
// of __share_group_state, transactional ids (1) to the leader of
// partition abs(hash(id)) % transaction.state.log.num.partitions of
// __transaction_state; the topics are created on first use as Kafka does.
//
// Before it names itself, a node waits (up to coordinatorLoadWait) until
// its coordinator has loaded the partition: a topic just created, or a
// leadership just gained, is visible here before the node has begun to
// load the partition, and the client's next request (a JoinGroup, say)
// would be refused with COORDINATOR_LOAD_IN_PROGRESS, which some clients
// (kafka-go) meet with a 5 s back-off. A load that takes longer is
// answered as Kafka answers, the coordinators refusing requests with
// COORDINATOR_LOAD_IN_PROGRESS until it ends.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(10, 0, 6, (*Broker).findCoordinator) }

func (b *Broker) findCoordinator(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID = key, -1
		node, err := metadata.Broker{}, b.coordinatorDenied(req, r.CoordinatorType, key)
		if err == nil {
			node, err = b.coordinatorFor(ctx, r.CoordinatorType, key)
		}
		if err == nil {
			err = coordinatorOn(&node, listenerOf(req))
		}
		if err != nil {
			c.ErrorCode, c.ErrorMessage = code(err), errMsg(err)
		} else {
			c.NodeID, c.Host, c.Port = node.ID, node.Host, node.Port
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if r.Version < 4 && len(resp.Coordinators) == 1 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return now(resp), nil
}

func (b *Broker) coordinatorFor(ctx context.Context, typ int8, key string) (metadata.Broker, error) {
	var spec cluster.InternalTopic
	switch typ {
	case 0:
		if key == "" {
			return metadata.Broker{}, fmt.Errorf("%w: empty group id", kerr.InvalidGroupID)
		}
		spec = cluster.OffsetsTopic
	case 2:
		if strings.Count(key, ":") < 2 {
			return metadata.Broker{}, fmt.Errorf("%w: share coordinator key %q is not group:topicId:partition", kerr.InvalidRequest, key)
		}
		spec = cluster.ShareStateTopic
	case 1:
		if key == "" {
			return metadata.Broker{}, fmt.Errorf("%w: empty transactional id", kerr.InvalidRequest)
		}
		spec = cluster.TxnStateTopic
	default:
		return metadata.Broker{}, fmt.Errorf("%w: coordinator type %d", kerr.InvalidRequest, typ)
	}
	t, err := b.Topics.EnsureInternal(ctx, spec)
	if err != nil {
		return metadata.Broker{}, err
	}
	p := t.Partition(metadata.PartitionForKey(key, int32(len(t.Partitions))))
	if p == nil || p.Leader == metadata.NoLeader {
		return metadata.Broker{}, kerr.CoordinatorNotAvailable
	}
	node, ok := b.image().Broker(p.Leader)
	if !ok {
		return metadata.Broker{}, kerr.CoordinatorNotAvailable
	}
	if p.Leader == b.NodeID && b.AwaitLoaded != nil {
		wctx, cancel := context.WithTimeout(ctx, coordinatorLoadWait)
		b.AwaitLoaded(wctx, spec.Name, p.Index)
		cancel()
	}
	return node, nil
}

// coordinatorLoadWait bounds how long FindCoordinator waits for this
// node's coordinator to load the partition it names.
const coordinatorLoadWait = 2 * time.Second

// coordinatorDenied checks a FindCoordinator key before anything is
// created: DESCRIBE on the group (type 0) or the transactional id (1),
// CLUSTER_ACTION for a share-state key (2, brokers only).
func (b *Broker) coordinatorDenied(req *server.Request, typ int8, key string) error {
	switch {
	case typ == 0 && !b.authorized(req, opDescribe, rGroup, key):
		return kerr.GroupAuthorizationFailed
	case typ == 1 && !b.authorized(req, opDescribe, rTxnID, key):
		return kerr.TransactionalIDAuthorizationFailed
	case typ == 2 && !b.authorizedCluster(req, opClusterAction):
		return kerr.ClusterAuthorizationFailed
	}
	return nil
}
