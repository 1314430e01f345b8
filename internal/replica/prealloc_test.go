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

// TestRunwayRateFollowsTheLastSecond: the write rate that decides whether
// zeros pay follows the last second or so, so a partition that was written
// fast and then slowly gets its runway back within two seconds.
func TestRunwayRateFollowsTheLastSecond(t *testing.T) {
	var st runwayState
	t0 := time.Unix(1000, 0)
	st.sample(t0, 0)
	// 1 GiB in 2 s: far over the limit.
	for i := 1; i <= 20; i++ {
		st.sample(t0.Add(time.Duration(i)*100*time.Millisecond), int64(i)<<30/20)
	}
	if st.rate < runwayMaxRate {
		t.Fatalf("rate %.0f B/s after 512 MiB/s, want over %d", st.rate, runwayMaxRate)
	}
	// Then 10 MiB/s, sampled every 10 ms, for 2 s.
	at, size := t0.Add(2*time.Second), int64(1)<<30
	for range 200 {
		at, size = at.Add(10*time.Millisecond), size+100<<10
		st.sample(at, size)
	}
	if st.rate > runwayMaxRate/2 {
		t.Fatalf("rate %.0f B/s two seconds into 10 MiB/s, want it near 10 MiB/s", st.rate)
	}
}
