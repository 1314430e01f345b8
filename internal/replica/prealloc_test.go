package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/poll"
)

// TestProducedPartitionGetsARunway: in fsync mode a partition that takes
// writes gets zeros preallocated past its data off the produce path, its
// acknowledged records stay readable, and the runway is given back when
// the manager closes (the segment file ends at its last batch).
func TestProducedPartitionGetsARunway(t *testing.T) {
	dir := t.TempDir()
	m := NewManager(ManagerConfig{
		Dir: dir, NodeID: 1, Fsync: true, PreallocateBytes: 1 << 20,
		Resolve: func(*metadata.Topic) TopicConfig {
			return TopicConfig{Log: blog.DefaultConfig(), MaxMessageBytes: 1 << 20, MinInsyncReplicas: 1,
				TimestampBeforeMs: -1, TimestampAfterMs: -1, CleanupPolicy: "delete"}
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	id := [16]byte{7}
	mp := metadata.Partition{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}
	if err := m.Apply(&metadata.Image{
		Index:    1,
		Brokers:  map[int32]metadata.Broker{1: {ID: 1}},
		Topics:   map[string]*metadata.Topic{"t": {Name: "t", ID: id, Partitions: []metadata.Partition{mp}}},
		TopicIDs: map[[16]byte]string{id: "t"},
	}); err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
	}()
	p := m.Get("t", 0)
	var last AppendResult
	for i := range 20 {
		res, err := p.Append(makeBatch(-1, 0, int32(i), 5, "r"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WaitDurable(res.Durable, res.Gen, time.Now().Add(5*time.Second), false); err != nil {
			t.Fatal(err)
		}
		last = res
	}
	poll.Until(t, 10*time.Second, func() error {
		if r := p.log.Runway(); r < 1<<19 {
			return fmt.Errorf("runway %d bytes, want about 1 MiB", r)
		}
		return nil
	})
	// Appends land on the runway and are read back whole.
	res, err := p.Append(makeBatch(-1, 0, 20, 5, "r"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitDurable(res.Durable, res.Gen, time.Now().Add(5*time.Second), false); err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != last.Durable {
		t.Fatalf("base offset %d after %d", res.BaseOffset, last.Durable)
	}
	size := p.log.Size()
	seg := p.log.Segments()[0]
	m.Close()
	closed = true
	fi, err := os.Stat(filepath.Join(p.log.Dir(), fmt.Sprintf("%020d.log", seg.BaseOffset)))
	if err != nil {
		t.Fatal(err)
	}
	got := fi.Size()
	if got != size {
		t.Fatalf("closed segment file is %d bytes, want its %d bytes of batches (runway trimmed)", got, size)
	}
}
