package handler

// FindCoordinator, versions 0-6, with batched keys (v4+). Group keys map
// to the leader of partition abs(hash(group)) % offsets.topic.num.partitions
// of __consumer_offsets, which is created on first use as Kafka does.
// Transaction (1) and share (2) coordinators are not served yet:
// COORDINATOR_NOT_AVAILABLE.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/group"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(10, 0, 6, (*Broker).findCoordinator) }

// offsetsTopic is the internal topic of group metadata and offsets.
const offsetsTopic = "__consumer_offsets"

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
		node, err := b.coordinatorFor(ctx, r.CoordinatorType, key)
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
	if typ != 0 {
		return metadata.Broker{}, fmt.Errorf("%w: only group coordinators are served yet (transactions and share groups are planned)", kerr.CoordinatorNotAvailable)
	}
	if key == "" {
		return metadata.Broker{}, fmt.Errorf("%w: empty group id", kerr.InvalidGroupID)
	}
	t, err := b.offsetsTopic(ctx)
	if err != nil {
		return metadata.Broker{}, err
	}
	p := t.Partition(group.PartitionFor(key, int32(len(t.Partitions))))
	if p == nil || p.Leader == metadata.NoLeader {
		return metadata.Broker{}, kerr.CoordinatorNotAvailable
	}
	node, ok := b.image().Broker(p.Leader)
	if !ok {
		return metadata.Broker{}, kerr.CoordinatorNotAvailable
	}
	return node, nil
}

// offsetsTopic returns __consumer_offsets, creating it on first use.
func (b *Broker) offsetsTopic(ctx context.Context) (*metadata.Topic, error) {
	im := b.image()
	if t := im.Topic(offsetsTopic); t != nil {
		return t, nil
	}
	rf := int32(atoi(b.Broker.Get("offsets.topic.replication.factor")))
	if n := int32(liveBrokers(im)); rf > n {
		rf = max(n, 1)
	}
	n := int32(atoi(b.Broker.Get("offsets.topic.num.partitions")))
	replicas, err := assignReplicas(im, offsetsTopic, n, rf)
	if err != nil {
		return nil, err
	}
	rec := metadata.Record{CreateTopic: &metadata.CreateTopic{
		Name: offsetsTopic, ID: metadata.NewTopicID(), Partitions: n, Replicas: replicas, Internal: true,
		Configs: map[string]string{
			"cleanup.policy":   "compact",
			"segment.bytes":    b.Broker.Get("offsets.topic.segment.bytes"),
			"compression.type": "producer",
		},
	}}
	if err := b.propose(ctx, rec); err != nil && !errors.Is(err, metadata.ErrTopicExists) {
		return nil, fmt.Errorf("%w: creating %s: %v", kerr.CoordinatorNotAvailable, offsetsTopic, err)
	}
	b.log.Info("created internal topic", "topic", offsetsTopic, "partitions", n, "replication_factor", rf)
	t := b.image().Topic(offsetsTopic)
	if t == nil {
		return nil, kerr.CoordinatorNotAvailable
	}
	return t, nil
}
