package replica

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/vfs"
)

// openPartitions opens topic t with n partitions led here, through ffs
// with filesystem syncs enabled, for rounds of at least two partitions;
// the test runs the rounds itself.
func openPartitions(t *testing.T, ffs *vfs.FaultFS, n int) (*Manager, []*Partition) {
	t.Helper()
	ffs.EnableFilesystemSync()
	m := NewManager(ManagerConfig{
		Dir: t.TempDir(), NodeID: 1, Fsync: true, SyncFilesystemPartitions: 2, PreallocateBytes: 1 << 20,
		Resolve: func(*metadata.Topic) TopicConfig {
			return TopicConfig{
				Log: blog.DefaultConfig(), MaxMessageBytes: 16 << 20,
				TimestampBeforeMs: -1, TimestampAfterMs: -1, MinInsyncReplicas: 1, CleanupPolicy: "delete",
			}
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		FS:     ffs,
	})
	t.Cleanup(func() { m.Close() })
	if m.fsys == nil {
		t.Fatal("no filesystem sync handle: this OS or FS cannot sync a filesystem at once")
	}
	id := [16]byte{7}
	parts := make([]metadata.Partition, n)
	for i := range parts {
		parts[i] = metadata.Partition{Index: int32(i), Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}
	}
	im := &metadata.Image{
		Brokers:  map[int32]metadata.Broker{1: {ID: 1, Host: "localhost", Port: 9092}},
		Topics:   map[string]*metadata.Topic{"t": {Name: "t", ID: id, Configs: map[string]string{}, Partitions: parts}},
		TopicIDs: map[[16]byte]string{id: "t"},
	}
	if err := m.Apply(im); err != nil {
		t.Fatal(err)
	}
	return m, m.Partitions("t")
}

// appendAll stages one batch on each partition and runs a write round and
// a sync round.
func appendAll(t *testing.T, m *Manager, ps []*Partition, tag string) []AppendResult {
	t.Helper()
	res := make([]AppendResult, len(ps))
	for i, p := range ps {
		r, err := p.Append(makeBatch(-1, 0, 0, 2, fmt.Sprintf("%s%d", tag, i)), nil)
		if err != nil {
			t.Fatalf("append to partition %d: %v", i, err)
		}
		res[i] = r
	}
	m.flushAndSync()
	return res
}

// A round of several partitions is made durable by one sync of the log
// directory's filesystem, not one fsync per partition: every high
// watermark moves, and the segments are not fsynced one by one, nor given
// a runway of zeros (which would slow the filesystem sync). A round of one
// partition fsyncs it and asks for its runway.
func TestFilesystemSyncRound(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	m, ps := openPartitions(t, ffs, 4)
	ffs.Record()
	for i, r := range appendAll(t, m, ps, "a") {
		if err := ps[i].WaitDurable(r.Durable, r.Gen, time.Now().Add(10*time.Second), true); err != nil {
			t.Fatalf("partition %d: %v", i, err)
		}
		if hw := ps[i].HighWatermark(); hw != 2 {
			t.Fatalf("partition %d: high watermark %d, want 2", i, hw)
		}
	}
	ops := ffs.Ops()
	syncfs, segSyncs := 0, 0
	for _, op := range ops {
		switch {
		case strings.HasPrefix(op, "syncfs "):
			syncfs++
		case strings.HasPrefix(op, "sync ") && strings.HasSuffix(op, ".log"):
			segSyncs++
		}
	}
	if syncfs != 1 || segSyncs != 0 || m.Metrics.FilesystemSyncs.Load() != 1 {
		t.Fatalf("a round of 4 partitions: %d filesystem syncs (metric %d) and %d segment fsyncs, want 1 and 0: %q",
			syncfs, m.Metrics.FilesystemSyncs.Load(), segSyncs, ops)
	}

	if n := runwaysHeld(m); n != 0 {
		t.Fatalf("%d partitions asked for a runway after a filesystem sync, want 0", n)
	}

	ffs.Record()
	appendAll(t, m, ps[:1], "b")
	if n := runwaysHeld(m); n != 1 {
		t.Fatalf("%d partitions asked for a runway after partition 0's own fsync, want 1", n)
	}
	if hw := ps[0].HighWatermark(); hw != 4 {
		t.Fatalf("one partition's round: high watermark %d, want 4", hw)
	}
	seg := filepath.Join("t-0", "00000000000000000000.log")
	if ops := ffs.Ops(); m.Metrics.FilesystemSyncs.Load() != 1 || !slices.ContainsFunc(ops, func(op string) bool {
		return strings.HasPrefix(op, "sync ") && strings.HasSuffix(op, seg)
	}) {
		t.Fatalf("a round of one partition should fsync its segment: %q", ops)
	}
}

// When the filesystem sync fails (it cannot say which file), every
// partition of the round fsyncs its own files: the one whose write-back
// failed refuses writes, the others' records are acknowledged.
func TestFilesystemSyncFailureFindsThePartition(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	m, ps := openPartitions(t, ffs, 4)
	ffs.Inject(vfs.Fault{Op: "sync", Match: func(name string) bool {
		return strings.Contains(name, string(filepath.Separator)+"t-2"+string(filepath.Separator))
	}})
	res := appendAll(t, m, ps, "a")
	for i, r := range res {
		err := ps[i].WaitDurable(r.Durable, r.Gen, time.Now().Add(10*time.Second), true)
		if i == 2 {
			if !errors.Is(err, ErrStorage) {
				t.Fatalf("partition 2, whose fsync fails: %v, want ErrStorage", err)
			}
			if hw := ps[i].HighWatermark(); hw != 0 {
				t.Fatalf("partition 2: high watermark %d after its failed fsync, want 0", hw)
			}
			continue
		}
		if err != nil {
			t.Fatalf("partition %d: %v (only partition 2's fsync fails)", i, err)
		}
		if hw := ps[i].HighWatermark(); hw != 2 {
			t.Fatalf("partition %d: high watermark %d, want 2", i, hw)
		}
	}
	if m.Metrics.FilesystemSyncs.Load() != 1 {
		t.Fatalf("filesystem syncs %d, want 1 (then the fallback)", m.Metrics.FilesystemSyncs.Load())
	}
	ffs.ClearFaults()
	if _, err := ps[2].Append(makeBatch(-1, 0, 0, 1, "b"), nil); !errors.Is(err, ErrStorage) {
		t.Fatalf("append to the failed partition: %v, want ErrStorage", err)
	}
	appendAll(t, m, []*Partition{ps[0], ps[1], ps[3]}, "c")
	for _, i := range []int{0, 1, 3} {
		if hw := ps[i].HighWatermark(); hw != 4 {
			t.Fatalf("partition %d after the next round: high watermark %d, want 4", i, hw)
		}
	}
}

func runwaysHeld(m *Manager) int {
	m.runways.mu.Lock()
	defer m.runways.mu.Unlock()
	return len(m.runways.held)
}
