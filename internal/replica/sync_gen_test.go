package replica

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
)

// TestDemotedDuringFsyncStillSyncs: a leader demoted while the fsync of
// its last write is in flight (the demotion bumps the staging generation,
// so that fsync does not advance it) must still get that write synced.
// A follower fetches again only once what it holds is durable, so a
// write left unsynced with nothing queued to sync it stopped the
// partition's replica fetcher for good: the follower never fetched from
// its new leader and stayed out of the ISR (seen in TestTxnChaosFailover,
// seed 1796183371282024862: node 1 out of every ISR of node 3's
// partitions for more than 30 s, its fetcher waiting in waitSynced).
func TestDemotedDuringFsyncStillSyncs(t *testing.T) {
	m := NewManager(ManagerConfig{
		Dir: t.TempDir(), NodeID: 1, Fsync: true,
		Resolve: func(*metadata.Topic) TopicConfig {
			return TopicConfig{Log: blog.DefaultConfig(), MaxMessageBytes: 1 << 20, MinInsyncReplicas: 1,
				TimestampBeforeMs: -1, TimestampAfterMs: -1, CleanupPolicy: "delete"}
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	id := [16]byte{9}
	image := func(index uint64, leader, epoch int32) *metadata.Image {
		mp := metadata.Partition{Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
		return &metadata.Image{
			Index:    index,
			Brokers:  map[int32]metadata.Broker{1: {ID: 1}, 2: {ID: 2}}, // no addresses: no fetcher starts
			Topics:   map[string]*metadata.Topic{"t": {Name: "t", ID: id, Partitions: []metadata.Partition{mp}}},
			TopicIDs: map[[16]byte]string{id: "t"},
		}
	}
	if err := m.Apply(image(1, 1, 0)); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	demoted := make(chan struct{})
	m.syncHook = func(p *Partition) {
		once.Do(func() {
			// Broker 2 takes over between the generation read and the
			// fsync of the write below.
			if err := m.Apply(image(2, 2, 1)); err != nil {
				t.Error(err)
			}
			close(demoted)
		})
	}
	m.Start(context.Background())
	defer m.Close()

	p := m.Get("t", 0)
	if _, err := p.Append(makeBatch(-1, 0, 0, 3, "r"), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case <-demoted:
	case <-ctx.Done():
		t.Fatal("the write was never fsynced")
	}
	if err := waitSynced(ctx, []followed{{p: p}}); err != nil {
		t.Fatalf("the demoted replica's write never became durable (synced %d, log end %d): its fetcher would wait forever: %v",
			p.synced.Load(), p.log.LogEndOffset(), err)
	}
	if p.IsLeader() {
		t.Fatal("still leader after the demotion")
	}
}
