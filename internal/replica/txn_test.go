package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/batch"
	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
)

// txnBatch is makeBatch with the transactional bit set.
func txnBatch(pid int64, epoch int16, seq int32, n int, tag string) []byte {
	b := makeBatch(pid, epoch, seq, n, tag)
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|batch.AttrTransactional)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// openPartitionAt opens (or reopens) partition t-0 under dir with the
// manager's loops running; close stops it cleanly.
func openPartitionAt(t *testing.T, dir string) (p *Partition, close func()) {
	t.Helper()
	return openPartitionWith(t, dir, true, blog.DefaultConfig())
}

// openPartitionWith is openPartitionAt with a durability mode and a log
// configuration.
func openPartitionWith(t *testing.T, dir string, fsync bool, cfg blog.Config) (p *Partition, close func()) {
	t.Helper()
	m := NewManager(ManagerConfig{
		Dir: dir, NodeID: 1, Fsync: fsync, FlushInterval: 10 * time.Millisecond,
		Resolve: func(*metadata.Topic) TopicConfig {
			return TopicConfig{Log: cfg, MaxMessageBytes: 16 << 20,
				TimestampBeforeMs: -1, TimestampAfterMs: -1, MinInsyncReplicas: 1, CleanupPolicy: "delete"}
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	id := [16]byte{1, 2, 3}
	im := &metadata.Image{
		Brokers:  map[int32]metadata.Broker{1: {ID: 1, Host: "localhost", Port: 9092}},
		Topics:   map[string]*metadata.Topic{"t": {Name: "t", ID: id, Configs: map[string]string{}, Partitions: []metadata.Partition{{Index: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}}},
		TopicIDs: map[[16]byte]string{id: "t"},
	}
	if err := m.Apply(im); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.Start(ctx)
	closed := false
	close = func() {
		if !closed {
			closed = true
			cancel()
			m.Close()
		}
	}
	t.Cleanup(close)
	return m.Get("t", 0), close
}

func markerDurable(t *testing.T, p *Partition, pid int64, epoch int16, typ int16) int64 {
	t.Helper()
	res, err := p.AppendMarker(pid, epoch, typ, 0)
	if err != nil {
		t.Fatalf("marker: %v", err)
	}
	if err := p.WaitDurable(res.Durable, res.Gen, time.Now().Add(10*time.Second), true); err != nil {
		t.Fatalf("marker durable: %v", err)
	}
	return res.BaseOffset
}

// readCommitted returns the data record values a read_committed consumer
// keeps from offset 0: batches below the LSO, minus control batches and the
// batches of aborted transactions, as a client filters them.
func readCommitted(t *testing.T, p *Partition) []string {
	t.Helper()
	res, err := p.ReadCommitted(0, 64<<20, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	b := res.Records
	for len(b) > 0 {
		recs, h, err := batch.Records(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		b = b[h.Size():]
		if h.Control() {
			continue
		}
		aborted := slices.ContainsFunc(res.Aborted, func(a AbortedTxn) bool {
			return a.ProducerID == h.ProducerID && h.BaseOffset >= a.FirstOffset && h.BaseOffset < a.LastOffset
		})
		if h.Transactional() && aborted {
			continue
		}
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
	}
	return out
}

// The LSO stays at an open transaction's first offset, moves on when the
// marker is durable, and aborted transactions are listed for readers.
func TestLastStableOffsetFollowsTransactions(t *testing.T) {
	dir := t.TempDir()
	p, _ := openPartitionAt(t, dir)
	appendDurable(t, p, makeBatch(-1, 0, 0, 2, "plain")) // 0-1
	appendDurable(t, p, txnBatch(7, 0, 0, 3, "t7a"))     // 2-4
	appendDurable(t, p, txnBatch(8, 0, 0, 1, "t8"))      // 5
	if got, hw := p.LastStableOffset(), p.HighWatermark(); got != 2 || hw != 6 {
		t.Fatalf("LSO %d HW %d, want 2 and 6", got, hw)
	}
	if got := readCommitted(t, p); !slices.Equal(got, []string{"plain-0", "plain-1"}) {
		t.Fatalf("read_committed sees %q", got)
	}
	if off := markerDurable(t, p, 7, 0, batch.ControlAbort); off != 6 {
		t.Fatalf("abort marker at %d", off)
	}
	if got := p.LastStableOffset(); got != 5 { // producer 8 still open
		t.Fatalf("LSO after abort %d, want 5", got)
	}
	markerDurable(t, p, 8, 0, batch.ControlCommit) // 7
	if got, hw := p.LastStableOffset(), p.HighWatermark(); got != hw || hw != 8 {
		t.Fatalf("LSO %d HW %d, want both 8", got, hw)
	}
	if got := p.AbortedTransactions(0); !slices.Equal(got, []AbortedTxn{{ProducerID: 7, FirstOffset: 2, LastOffset: 6}}) {
		t.Fatalf("aborted %+v", got)
	}
	if got := readCommitted(t, p); !slices.Equal(got, []string{"plain-0", "plain-1", "t8-0"}) {
		t.Fatalf("read_committed sees %q", got)
	}
	// The aborted transactions listed are those overlapping the batches
	// returned, not every one up to the LSO.
	if res, err := p.ReadCommitted(0, 1, true, nil); err != nil || len(res.Aborted) != 0 {
		t.Fatalf("read of the first batch: %v, aborted %+v", err, res.Aborted)
	}
	if res, err := p.ReadCommitted(2, 1, true, nil); err != nil || len(res.Aborted) != 1 {
		t.Fatalf("read of the aborted batch: %v, aborted %+v", err, res.Aborted)
	}
	// The LSO is never below the log start offset, even when an open
	// transaction's first records are deleted.
	appendDurable(t, p, txnBatch(10, 0, 0, 2, "t10")) // 8-9
	if _, err := p.DeleteRecordsBefore(9); err != nil {
		t.Fatal(err)
	}
	if got := p.LastStableOffset(); got != 9 {
		t.Fatalf("LSO %d after deleting records below 9, want 9", got)
	}
	markerDurable(t, p, 10, 0, batch.ControlCommit) // 10
	// A marker from an older epoch is fenced; the producer's epoch is 0.
	appendDurable(t, p, txnBatch(9, 3, 0, 1, "t9"))
	if _, err := p.AppendMarker(9, 2, batch.ControlCommit, 0); !errors.Is(err, ErrInvalidEpoch) {
		t.Fatalf("stale marker: %v, want ErrInvalidEpoch", err)
	}
	// A transactional batch without a producer id is refused.
	if _, err := p.Append(txnBatch(-1, 0, 0, 1, "x"), nil); !errors.Is(err, batch.ErrInvalidRecord) {
		t.Fatalf("transactional batch without producer id: %v", err)
	}
}

// An open transaction and the aborted list survive a clean restart (the
// producer snapshot) and a restart without the snapshot (rebuilt from the
// log).
func TestTransactionStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	p, stop := openPartitionAt(t, dir)
	appendDurable(t, p, txnBatch(7, 0, 0, 2, "t7")) // 0-1
	markerDurable(t, p, 7, 0, batch.ControlAbort)   // 2
	appendDurable(t, p, makeBatch(-1, 0, 0, 1, "plain"))
	appendDurable(t, p, txnBatch(8, 1, 0, 2, "t8")) // 4-5, left open
	check := func(p *Partition, how string) {
		t.Helper()
		if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != 4 || hw != 6 {
			t.Fatalf("%s: LSO %d HW %d, want 4 and 6", how, lso, hw)
		}
		if got := p.AbortedTransactions(0); !slices.Equal(got, []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 2}}) {
			t.Fatalf("%s: aborted %+v", how, got)
		}
	}
	check(p, "before restart")
	stop()
	snap := filepath.Join(dir, "t-0", "producer-state.snapshot")
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("no producer snapshot after a clean close: %v", err)
	}
	p, stop = openPartitionAt(t, dir)
	check(p, "after restart from the snapshot")
	stop()
	if err := os.Remove(snap); err != nil {
		t.Fatal(err)
	}
	p, _ = openPartitionAt(t, dir)
	check(p, "after rebuilding from the log")
	markerDurable(t, p, 8, 1, batch.ControlCommit)
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw {
		t.Fatalf("LSO %d after the commit, HW %d", lso, hw)
	}
}

// Snapshots written before transactions (the bare producer map) still load,
// and snapshots are written as version 3, without aborted transactions.
func TestProducerSnapshotVersion1Loads(t *testing.T) {
	ps := newProducerState()
	if err := ps.unmarshal([]byte(`{"5":{"e":2,"b":[{"fs":0,"ls":2,"fo":10,"lo":12,"ts":1}],"t":1}}`)); err != nil {
		t.Fatal(err)
	}
	e := ps.m[5]
	if e == nil || e.Epoch != 2 || len(e.Batches) != 1 || e.InTxn || len(ps.legacyAborted) != 0 {
		t.Fatalf("loaded %+v, aborted %v", e, ps.legacyAborted)
	}
	ps.update(&batch.Header{ProducerID: 5, ProducerEpoch: 2, BaseSequence: 3, Attributes: batch.AttrTransactional}, 13, 2)
	if ce := e.coordinatorEpoch(); ce != -1 {
		t.Fatalf("coordinator epoch %d from a snapshot without one, want -1", ce)
	}
	ps.endTxn(5, 2, 0, 14, 3)
	b, err := ps.marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"v":3`) || strings.Contains(string(b), `"a"`) {
		t.Fatalf("snapshot data %s", b)
	}
	back := newProducerState()
	if err := back.unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if len(back.legacyAborted) != 0 || back.m[5].Epoch != 2 || back.m[5].InTxn || back.m[5].coordinatorEpoch() != 0 {
		t.Fatalf("round trip: %+v %+v", back.legacyAborted, back.m[5])
	}
}
