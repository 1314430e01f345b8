package cluster

// Topics a broker creates by itself: the internal topics, on first use,
// from whichever broker needs one first (FindCoordinator, a share-partition
// leader looking for its share coordinator); and the check, shared with
// the auto-creation of ordinary topics, that enough brokers are live for
// a default replication factor.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/metadata"
)

// InternalTopic describes an internal topic the broker creates on first
// use: its name and the broker settings of its partition count (none:
// one partition), replication factor and segment size (none: the topic
// default).
type InternalTopic struct {
	Name, Partitions, ReplicationFactor, SegmentBytes string
	// MinISR, if set, is the setting of the topic's min.insync.replicas,
	// capped at its replication factor.
	MinISR string
	// Configs, if set, are topic configs set over the defaults at
	// creation (the audit topic: cleanup.policy=delete, retention.ms).
	Configs map[string]string
}

// The internal topics.
var (
	OffsetsTopic = InternalTopic{metadata.OffsetsTopic, "offsets.topic.num.partitions",
		"offsets.topic.replication.factor", "offsets.topic.segment.bytes", "", nil}
	ShareStateTopic = InternalTopic{metadata.ShareStateTopic, "share.coordinator.state.topic.num.partitions",
		"share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.segment.bytes", "", nil}
	TxnStateTopic = InternalTopic{metadata.TxnStateTopic, "transaction.state.log.num.partitions",
		"transaction.state.log.replication.factor", "transaction.state.log.segment.bytes", "transaction.state.log.min.isr", nil}
)

// ErrBrokersDown: a topic created with a default replication factor
// needs more live brokers than there are, though the cluster has the
// nodes: they are starting (a cluster's brokers register one by one) or
// down. CreateTopics answers INVALID_REPLICATION_FACTOR, as Kafka does;
// auto-creation answers the retriable LEADER_NOT_AVAILABLE, and the
// internal topics COORDINATOR_NOT_AVAILABLE, so that clients wait for the
// brokers instead of the topic getting fewer replicas for good. (Its text,
// which clients see in error messages, is the one it had in the handler.)
var ErrBrokersDown = errors.New("handler: fewer live brokers than the default replication factor")

// Topics creates the internal topics and checks the live brokers for a
// topic's default replication factor. A node has one, shared by its
// handlers and its share-partition leaders.
type Topics struct {
	// Setting returns a static broker setting (config.Config.Get).
	Setting func(name string) string
	// Image returns the current metadata image.
	Image func() *metadata.Image
	// Propose commits records to the metadata log and applies the image
	// that has them to this node's replicas and coordinators before it
	// returns, so a created topic's partitions are open (and, led here,
	// loading) when EnsureInternal returns.
	Propose func(ctx context.Context, recs ...metadata.Record) error
	Logger  *slog.Logger

	// downLogged is when (Unix ns) a topic creation that waits for
	// brokers was last logged (BrokersUp).
	downLogged atomic.Int64
}

// EnsureInternal returns the internal topic t, creating it on first use:
// compacted (unless t.Configs says otherwise), its replication factor
// setting capped at the cluster's nodes (so one node works with the
// default of 3). While fewer brokers are live
// than that (a cluster starting, or a node down) it answers
// COORDINATOR_NOT_AVAILABLE, which clients retry, rather than create the
// topic with fewer replicas for good.
func (ts *Topics) EnsureInternal(ctx context.Context, t InternalTopic) (*metadata.Topic, error) {
	im := ts.Image()
	if mt := im.Topic(t.Name); mt != nil {
		return mt, nil
	}
	rf := min(int32(ts.setting(t.ReplicationFactor)), int32(im.Nodes()))
	if err := ts.BrokersUp(im, rf, t.ReplicationFactor); err != nil {
		return nil, fmt.Errorf("%w: creating %s: %w", kerr.CoordinatorNotAvailable, t.Name, err)
	}
	n := int32(1) // no setting: one partition (_schemas)
	if t.Partitions != "" {
		n = int32(ts.setting(t.Partitions))
	}
	replicas, err := Assign(im, AssignRequest{Topic: t.Name, Partitions: n, ReplicationFactor: rf, Seed: rand.Int64()})
	if err != nil {
		return nil, fmt.Errorf("%w: creating %s: %w", kerr.CoordinatorNotAvailable, t.Name, err)
	}
	rec := metadata.Record{CreateTopic: &metadata.CreateTopic{
		Name: t.Name, ID: metadata.NewTopicID(), Partitions: n, Replicas: replicas, Internal: true,
		Configs: map[string]string{
			"cleanup.policy":   "compact",
			"compression.type": "producer",
		},
	}}
	if t.SegmentBytes != "" {
		rec.CreateTopic.Configs["segment.bytes"] = ts.Setting(t.SegmentBytes)
	}
	for k, v := range t.Configs {
		rec.CreateTopic.Configs[k] = v
	}
	if t.MinISR != "" {
		rec.CreateTopic.Configs["min.insync.replicas"] = strconv.Itoa(int(min(int32(ts.setting(t.MinISR)), rf)))
	}
	if err := ts.Propose(ctx, rec); err != nil && !errors.Is(err, metadata.ErrTopicExists) {
		return nil, fmt.Errorf("%w: creating %s: %v", kerr.CoordinatorNotAvailable, t.Name, err)
	}
	ts.Logger.Info("created internal topic", "topic", t.Name, "partitions", n, "replication_factor", rf)
	mt := ts.Image().Topic(t.Name)
	if mt == nil {
		return nil, kerr.CoordinatorNotAvailable
	}
	return mt, nil
}

// setting is a numeric broker setting (0 if it is not a number).
func (ts *Topics) setting(name string) int64 {
	n, _ := strconv.ParseInt(ts.Setting(name), 10, 64)
	return n
}

// BrokersUp returns ErrBrokersDown when a replication factor of rf (from
// setting) fits the cluster's nodes but not its live brokers, and logs
// it (at most every 30 s, since clients retry).
func (ts *Topics) BrokersUp(im *metadata.Image, rf int32, setting string) error {
	live, nodes := liveCount(im), im.Nodes()
	if int(rf) <= live || int(rf) > nodes {
		return nil
	}
	err := fmt.Errorf("%w: replication factor %d (%s) needs %d live brokers; %d of the cluster's %d nodes are: "+
		"waiting for the others to start or come back", ErrBrokersDown, rf, setting, rf, live, nodes)
	if now := time.Now().UnixNano(); now-ts.downLogged.Load() > int64(30*time.Second) {
		ts.downLogged.Store(now)
		ts.Logger.Warn("a topic waits to be created", "err", err)
	}
	return err
}

// liveCount counts the registered, unfenced brokers.
func liveCount(im *metadata.Image) int {
	n := 0
	for _, b := range im.Brokers {
		if !b.Fenced {
			n++
		}
	}
	return n
}
