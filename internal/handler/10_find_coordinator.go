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
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/sharestate"
	"github.com/berthmq/berth/internal/txn"
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
	var spec internalTopic
	switch typ {
	case 0:
		if key == "" {
			return metadata.Broker{}, fmt.Errorf("%w: empty group id", kerr.InvalidGroupID)
		}
		spec = offsetsTopicSpec
	case 2:
		if strings.Count(key, ":") < 2 {
			return metadata.Broker{}, fmt.Errorf("%w: share coordinator key %q is not group:topicId:partition", kerr.InvalidRequest, key)
		}
		spec = shareStateTopicSpec
	case 1:
		if key == "" {
			return metadata.Broker{}, fmt.Errorf("%w: empty transactional id", kerr.InvalidRequest)
		}
		spec = txnStateTopicSpec
	default:
		return metadata.Broker{}, fmt.Errorf("%w: coordinator type %d", kerr.InvalidRequest, typ)
	}
	t, err := b.ensureInternalTopic(ctx, spec)
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
		b.AwaitLoaded(wctx, spec.name, p.Index)
		cancel()
	}
	return node, nil
}

// coordinatorLoadWait bounds how long FindCoordinator waits for this
// node's coordinator to load the partition it names.
const coordinatorLoadWait = 2 * time.Second

// internalTopic describes an internal topic the broker creates on first
// use: its name and the broker settings of its partition count,
// replication factor and segment size.
type internalTopic struct {
	name, partitions, replicationFactor, segmentBytes string
	// minISR, if set, is the setting of the topic's min.insync.replicas,
	// capped at its replication factor.
	minISR string
}

var (
	offsetsTopicSpec = internalTopic{offsetsTopic, "offsets.topic.num.partitions",
		"offsets.topic.replication.factor", "offsets.topic.segment.bytes", ""}
	shareStateTopicSpec = internalTopic{sharestate.Topic, "share.coordinator.state.topic.num.partitions",
		"share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.segment.bytes", ""}
	txnStateTopicSpec = internalTopic{txn.Topic, "transaction.state.log.num.partitions",
		"transaction.state.log.replication.factor", "transaction.state.log.segment.bytes", "transaction.state.log.min.isr"}
)

// ShareStateTopic returns __share_group_state, creating it on first use.
func (b *Broker) ShareStateTopic(ctx context.Context) (*metadata.Topic, error) {
	return b.ensureInternalTopic(ctx, shareStateTopicSpec)
}

// ensureInternalTopic returns the internal topic of spec, creating it on
// first use: compacted, its replication factor setting capped at the
// cluster's nodes (so one node works with the default of 3). While fewer
// brokers are live than that (a cluster starting, or a node down) it
// answers COORDINATOR_NOT_AVAILABLE, which clients retry, rather than
// create the topic with fewer replicas for good.
func (b *Broker) ensureInternalTopic(ctx context.Context, spec internalTopic) (*metadata.Topic, error) {
	im := b.image()
	if t := im.Topic(spec.name); t != nil {
		return t, nil
	}
	rf := min(int32(atoi(b.Broker.Get(spec.replicationFactor))), int32(im.Nodes()))
	if err := b.brokersUp(im, rf, spec.replicationFactor); err != nil {
		return nil, fmt.Errorf("%w: creating %s: %w", kerr.CoordinatorNotAvailable, spec.name, err)
	}
	n := int32(atoi(b.Broker.Get(spec.partitions)))
	replicas, err := assignReplicas(im, spec.name, n, rf)
	if err != nil {
		return nil, fmt.Errorf("%w: creating %s: %w", kerr.CoordinatorNotAvailable, spec.name, err)
	}
	rec := metadata.Record{CreateTopic: &metadata.CreateTopic{
		Name: spec.name, ID: metadata.NewTopicID(), Partitions: n, Replicas: replicas, Internal: true,
		Configs: map[string]string{
			"cleanup.policy":   "compact",
			"segment.bytes":    b.Broker.Get(spec.segmentBytes),
			"compression.type": "producer",
		},
	}}
	if spec.minISR != "" {
		rec.CreateTopic.Configs["min.insync.replicas"] = strconv.Itoa(int(min(int32(atoi(b.Broker.Get(spec.minISR))), rf)))
	}
	if err := b.propose(ctx, rec); err != nil && !errors.Is(err, metadata.ErrTopicExists) {
		return nil, fmt.Errorf("%w: creating %s: %v", kerr.CoordinatorNotAvailable, spec.name, err)
	}
	b.log.Info("created internal topic", "topic", spec.name, "partitions", n, "replication_factor", rf)
	t := b.image().Topic(spec.name)
	if t == nil {
		return nil, kerr.CoordinatorNotAvailable
	}
	return t, nil
}
