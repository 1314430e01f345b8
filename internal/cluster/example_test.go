package cluster_test

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/metadata"
)

// heartbeats is a Liveness: the time each broker was last heard from. The
// metadata quorum fills it from Raft progress (any message from the
// broker's node); a test fills it by hand.
type heartbeats struct {
	mu   sync.Mutex
	seen map[int32]time.Time
}

func (h *heartbeats) LastSeen(id int32) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.seen[id]
	return t, ok
}

// The Supervisor of node 0: it runs on every node and acts only while the
// node is the active controller. Settings use Kafka's names.
func ExampleSupervisor() {
	var ctrl *metadata.Controller // opened and started by the node
	var hb heartbeats
	sup, err := cluster.New(ctrl, cluster.WithLocal(&hb, 0, time.Now), cluster.Config{
		SessionTimeout:               9 * time.Second,   // broker.session.timeout.ms
		LeaderImbalanceCheckInterval: 300 * time.Second, // leader.imbalance.check.interval.seconds
		Logger:                       slog.Default(),
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sup.Run(ctx)

	// A broker asks to shut down (its request reached the active
	// controller): returns once its leaderships moved and it is fenced.
	stuck, err := sup.ControlledShutdown(ctx, 2)
	_, _ = stuck, err
}

// Placing a new topic's partitions (CreateTopics without an assignment).
func ExampleAssign() {
	var im *metadata.Image // the current image
	replicas, err := cluster.Assign(im, cluster.AssignRequest{
		Topic: "orders", Partitions: 6, ReplicationFactor: 3,
		Seed: time.Now().UnixNano(), // Kafka starts at a random broker
	})
	_, _ = replicas, err // err wraps cluster.ErrInvalidReplicationFactor when rf > live brokers
}
