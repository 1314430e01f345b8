package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/batch"
	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/vfs"
)

// testPartition opens topic "t" partition 0 on a Manager over fs and
// starts the syncer; both are closed at cleanup.
func testPartition(t *testing.T, fs vfs.FS, fsync bool) (*Partition, string) {
	t.Helper()
	m, p, dir := openPartition(t, fs, fsync)
	ctx, cancel := context.WithCancel(context.Background())
	m.Start(ctx)
	t.Cleanup(cancel)
	return p, dir
}

// openPartition is testPartition without starting the Manager's loops:
// the test runs sync rounds itself.
func openPartition(t testing.TB, fs vfs.FS, fsync bool) (*Manager, *Partition, string) {
	t.Helper()
	return openPartitionOf(t, fs, fsync, []int32{1})
}

// openPartitionOf is openPartition with the given replicas (all in sync;
// this node, 1, leads).
func openPartitionOf(t testing.TB, fs vfs.FS, fsync bool, replicas []int32) (*Manager, *Partition, string) {
	t.Helper()
	dir := t.TempDir()
	m := NewManager(ManagerConfig{
		Dir: dir, NodeID: 1, Fsync: fsync,
		FlushInterval: 10 * time.Millisecond,
		Resolve: func(*metadata.Topic) TopicConfig {
			return TopicConfig{
				Log: blog.DefaultConfig(), MaxMessageBytes: 16 << 20,
				TimestampBeforeMs: -1, TimestampAfterMs: -1, MinInsyncReplicas: 1, CleanupPolicy: "delete",
			}
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		FS:     fs,
	})
	id := [16]byte{1, 2, 3}
	im := &metadata.Image{
		Brokers:  map[int32]metadata.Broker{1: {ID: 1, Host: "localhost", Port: 9092}, 2: {ID: 2, Host: "localhost", Port: 9093}},
		Topics:   map[string]*metadata.Topic{"t": {Name: "t", ID: id, Configs: map[string]string{}, Partitions: []metadata.Partition{{Index: 0, Leader: 1, Replicas: replicas, ISR: replicas}}}},
		TopicIDs: map[[16]byte]string{id: "t"},
	}
	if err := m.Apply(im); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() }) // may report the injected fault; the tests check what matters
	p := m.Get("t", 0)
	if p == nil {
		t.Fatal("partition t-0 not opened")
	}
	return m, p, filepath.Join(dir, "t-0")
}

// makeBatch builds a v2 batch of n records; pid < 0 for a plain producer.
// Record i's value is "<tag>-<i>", then pad bytes.
func makeBatch(pid int64, epoch int16, seq int32, n int, tag string, pad ...byte) []byte {
	var recs []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: append([]byte(fmt.Sprintf("%s-%d", tag, i)), pad...)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	if pid < 0 {
		epoch, seq = -1, -1
	}
	b := kmsg.RecordBatch{
		Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(n), Records: recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// appendDurable appends and waits for the write to be durable.
func appendDurable(t *testing.T, p *Partition, b []byte) AppendResult {
	t.Helper()
	res, err := p.Append(b, nil)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if err := p.WaitDurable(res.Durable, res.Gen, time.Now().Add(10*time.Second), true); err != nil {
		t.Fatalf("wait durable: %v", err)
	}
	return res
}

// checkLog reads every committed batch and checks the log is exactly the
// given batches (record values by tag) at offsets 0.. with no gap, and
// that the segment file holds those bytes and nothing more (no partial
// batch behind the log's back).
func checkLog(t *testing.T, p *Partition, dir string, tags ...string) {
	t.Helper()
	data, err := p.Read(0, 64<<20, true, nil)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	b, next := data.Records, int64(0)
	for i, tag := range tags {
		recs, h, err := batch.Records(b, nil)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if h.BaseOffset != next {
			t.Fatalf("batch %d at offset %d, want %d", i, h.BaseOffset, next)
		}
		for j, r := range recs {
			if want := fmt.Sprintf("%s-%d", tag, j); !bytes.HasPrefix(r.Value, []byte(want)) {
				t.Fatalf("batch %d record %d: %q, want %q", i, j, r.Value, want)
			}
		}
		next += int64(len(recs))
		b = b[h.Size():]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes after the expected batches", len(b))
	}
	if hw := p.HighWatermark(); hw != next {
		t.Fatalf("high watermark %d, want %d", hw, next)
	}
	if leo := p.LogEndOffset(); leo != next {
		t.Fatalf("log end offset %d, want %d", leo, next)
	}
	st, err := os.Stat(filepath.Join(dir, "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != int64(len(data.Records)) {
		t.Fatalf("segment file is %d bytes, its batches %d: a partial write stayed", st.Size(), len(data.Records))
	}
}

// With durability.mode=os an append writes at once: a full disk fails it
// with ErrStorage, keeps no partial batch, leaves earlier data readable,
// and once space returns the next append lands at the next offset.
func TestDiskFullOSMode(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	p, dir := testPartition(t, ffs, false)
	for _, tag := range []string{"a", "b"} {
		appendDurable(t, p, makeBatch(-1, 0, 0, 3, tag))
	}
	if _, err := p.Log().Sync(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{0, 10} { // nothing fits; a torn write
		ffs.FailWritesAfter(n, syscall.ENOSPC)
		_, err := p.Append(makeBatch(-1, 0, 0, 3, "lost"), nil)
		if !errors.Is(err, ErrStorage) {
			t.Fatalf("budget %d: append error %v, want ErrStorage", n, err)
		}
		checkLog(t, p, dir, "a", "b")
	}
	ffs.FailWritesAfter(-1, nil)
	res := appendDurable(t, p, makeBatch(-1, 0, 0, 2, "c"))
	if res.BaseOffset != 6 {
		t.Fatalf("append after space returned at offset %d, want 6", res.BaseOffset)
	}
	checkLog(t, p, dir, "a", "b", "c")
}

// With durability.mode=fsync the syncer writes staged batches: a full disk
// makes WaitDurable fail (the producer is never acknowledged), drops the
// round's batches without a trace, and keeps the partition writable. The
// producer's retry is appended anew at the next offset, not answered as a
// duplicate of a batch that was never written.
func TestDiskFullFsyncMode(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	p, dir := testPartition(t, ffs, true)
	appendDurable(t, p, makeBatch(7, 0, 0, 3, "a"))
	appendDurable(t, p, makeBatch(7, 0, 3, 3, "b"))

	for _, n := range []int64{0, 10} {
		ffs.FailWritesAfter(n, syscall.ENOSPC)
		res, err := p.Append(makeBatch(7, 0, 6, 3, "c"), nil)
		if err == nil {
			err = p.WaitDurable(res.Durable, res.Gen, time.Now().Add(10*time.Second), true)
		}
		if !errors.Is(err, ErrStorage) {
			t.Fatalf("budget %d: got %v, want ErrStorage", n, err)
		}
		checkLog(t, p, dir, "a", "b")
	}
	ffs.FailWritesAfter(-1, nil)
	res := appendDurable(t, p, makeBatch(7, 0, 6, 3, "c"))
	if res.Duplicate || res.BaseOffset != 6 {
		t.Fatalf("retry after space returned: offset %d, duplicate %v; want a new append at 6", res.BaseOffset, res.Duplicate)
	}
	// A retry of that one now is a duplicate.
	if res, err := p.Append(makeBatch(7, 0, 6, 3, "c"), nil); err != nil || !res.Duplicate || res.BaseOffset != 6 {
		t.Fatalf("second retry: %+v, %v", res, err)
	}
	appendDurable(t, p, makeBatch(7, 0, 9, 1, "d"))
	checkLog(t, p, dir, "a", "b", "c", "d")
}

// A failed fsync may have lost dirty pages: the waiting producer gets an
// error instead of an acknowledgement, the high watermark stays at the
// last good sync, and the partition refuses writes from then on, even once
// fsyncs work again.
func TestFailedFsyncFailsPartition(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	p, _ := testPartition(t, ffs, true)
	appendDurable(t, p, makeBatch(-1, 0, 0, 3, "a"))

	ffs.FailSyncs(syscall.EIO)
	res, err := p.Append(makeBatch(-1, 0, 0, 2, "b"), nil)
	if err != nil {
		t.Fatalf("staging an append: %v", err)
	}
	if err := p.WaitDurable(res.Durable, res.Gen, time.Now().Add(10*time.Second), true); !errors.Is(err, ErrStorage) {
		t.Fatalf("wait for a write whose fsync failed: %v, want ErrStorage", err)
	}
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d after a failed fsync, want 3", hw)
	}
	data, err := p.Read(0, 1<<20, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if recs, h, err := batch.Records(data.Records, nil); err != nil || h.Size() != len(data.Records) || len(recs) != 3 {
		t.Fatalf("after the failed fsync, read %d bytes: %d records, %v", len(data.Records), len(recs), err)
	}
	ffs.FailSyncs(nil)
	for range 2 {
		if _, err := p.Append(makeBatch(-1, 0, 0, 1, "c"), nil); !errors.Is(err, ErrStorage) {
			t.Fatalf("append on a failed partition: %v, want ErrStorage", err)
		}
	}
}

// In durability.mode=os a write is acknowledged before its fsync; a failed
// background fsync still fails the partition for later writes.
func TestFailedFsyncFailsPartitionOSMode(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	p, _ := testPartition(t, ffs, false)
	ffs.FailSyncs(syscall.EIO)
	if _, err := p.Append(makeBatch(-1, 0, 0, 1, "a"), nil); err != nil {
		t.Fatalf("append: %v", err)
	}
	// The flush interval is 10ms: poll until the syncer has failed it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := p.Append(makeBatch(-1, 0, 0, 1, "b"), nil)
		if errors.Is(err, ErrStorage) {
			break
		}
		if err != nil {
			t.Fatalf("append: %v, want ErrStorage or success", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("partition still takes writes 10s after its fsync failed")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A sync round that writes several staged batches and runs out of space
// partway drops the whole round: the batches it did write are taken back
// (their producers are told the write failed, so none of them may stay),
// the torn one leaves no bytes, and the partition takes writes again at
// the old end once space returns.
func TestDiskFullDropsWholeRound(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	m, p, dir := openPartition(t, ffs, true)
	durable := func(res AppendResult) error {
		m.flushAndSync()
		return p.WaitDurable(res.Durable, res.Gen, time.Now().Add(10*time.Second), true)
	}
	res, err := p.Append(makeBatch(-1, 0, 0, 2, "a"), nil)
	if err == nil {
		err = durable(res)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Over the 4 MiB flush chunk, so the round writes it on its own
	// before the next batch.
	big := makeBatch(-1, 0, 0, 1, "big", make([]byte, 5<<20)...)
	small := makeBatch(9, 0, 0, 3, "small")
	r1, err1 := p.Append(big, nil)
	r2, err2 := p.Append(small, nil)
	if err1 != nil || err2 != nil {
		t.Fatalf("staging: %v, %v", err1, err2)
	}
	ffs.FailWritesAfter(int64(len(big))+10, syscall.ENOSPC)
	m.flushAndSync()
	for i, r := range []AppendResult{r1, r2} {
		if err := p.WaitDurable(r.Durable, r.Gen, time.Now().Add(10*time.Second), true); !errors.Is(err, ErrStorage) {
			t.Fatalf("batch %d of the failed round: %v, want ErrStorage", i, err)
		}
	}
	checkLog(t, p, dir, "a")

	ffs.FailWritesAfter(-1, nil)
	res, err = p.Append(makeBatch(9, 0, 0, 3, "small"), nil)
	if err == nil {
		err = durable(res)
	}
	if err != nil || res.BaseOffset != 2 || res.Duplicate {
		t.Fatalf("retry after space returned: %+v, %v; want a new append at 2", res, err)
	}
	checkLog(t, p, dir, "a", "small")
}
