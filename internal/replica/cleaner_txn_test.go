package replica

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/batch"
	blog "github.com/berthmq/berth/internal/log"
)

// keyedTxnBatch is a transactional batch of producer pid whose records
// are the key/value pairs kvs, padded to fill segments.
func keyedTxnBatch(pid int64, seq int32, kvs ...string) []byte {
	var recs []byte
	for i := 0; i < len(kvs); i += 2 {
		r := kmsg.Record{OffsetDelta: int32(i / 2), Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}
		r.Headers = []kmsg.Header{{Key: "pad", Value: make([]byte, 60)}}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	n := int32(len(kvs) / 2)
	b := kmsg.RecordBatch{
		Magic: 2, Attributes: int16(batch.AttrTransactional), LastOffsetDelta: n - 1, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, FirstSequence: seq, NumRecords: n, Records: recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// compactPartition runs one clean of p's log as the cleaner would: below
// the last stable offset; delete.retention.ms is 0.
func compactPartition(t *testing.T, p *Partition) blog.CompactStats {
	t.Helper()
	cc := blog.DefaultCompactConfig()
	cc.DeleteRetentionMs = 0
	cc.MaxOffset = p.LastStableOffset()
	st, err := p.Log().Compact(t.Context(), cc)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A compacted topic written transactionally: the cleaner keeps the latest
// committed value of each key, drops the aborted batches (an aborted value
// never supersedes a committed one), and read_committed readers see what
// they saw before, less the superseded values; after a restart, with or
// without the producer snapshot, no transaction is left open.
func TestCompactTransactionalTopic(t *testing.T) {
	dir := t.TempDir()
	p, stop := openPartitionWith(t, dir, true, smallSegments())
	appendDurable(t, p, keyedTxnBatch(1, 0, "k", "k1", "j", "j1"))
	markerDurable(t, p, 1, 0, batch.ControlCommit)
	appendDurable(t, p, keyedTxnBatch(2, 0, "k", "k2-aborted", "j", "j2-aborted"))
	markerDurable(t, p, 2, 0, batch.ControlAbort)
	appendDurable(t, p, keyedTxnBatch(1, 2, "k", "k3"))
	appendDurable(t, p, keyedTxnBatch(2, 2, "j", "j4-aborted")) // interleaved with producer 1's
	markerDurable(t, p, 1, 0, batch.ControlCommit)
	markerDurable(t, p, 2, 0, batch.ControlAbort)
	for i := range 4 { // fill segments so the above is cleanable
		appendDurable(t, p, keyedTxnBatch(3, int32(i), "pad", "p"))
		markerDurable(t, p, 3, 0, batch.ControlCommit)
	}
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw {
		t.Fatalf("LSO %d HW %d", lso, hw)
	}
	before := readCommittedFetches(t, p, 1<<20)
	if want := []string{"k1", "j1", "k3", "p", "p", "p", "p"}; !slices.Equal(before, want) {
		t.Fatalf("read_committed before: %q, want %q", before, want)
	}
	aborted := p.AbortedTransactions(0)
	if len(aborted) != 2 {
		t.Fatalf("aborted %+v", aborted)
	}
	st := compactPartition(t, p)
	if st.SegmentsCleaned == 0 || st.RecordsRemoved < 4 {
		t.Fatalf("%+v", st)
	}
	// k1 superseded by k3; the aborted values gone; the last "pad" may be
	// in the active segment.
	check := func(how string) {
		t.Helper()
		got := readCommittedFetches(t, p, 1<<20)
		if !slices.Equal(got, []string{"j1", "k3", "p"}) && !slices.Equal(got, []string{"j1", "k3", "p", "p"}) {
			t.Fatalf("%s: read_committed sees %q", how, got)
		}
		for _, maxBytes := range []int32{1, 1000} {
			if byFetch := readCommittedFetches(t, p, maxBytes); !slices.Equal(byFetch, got) {
				t.Fatalf("%s: read_committed by fetches of %d bytes sees %q, want %q", how, maxBytes, byFetch, got)
			}
		}
		for off := int64(0); off < p.HighWatermark(); {
			data, err := p.Read(off, 1, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			recs, h, err := batch.Records(data.Records, nil)
			if err != nil {
				t.Fatal(err)
			}
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			if h.ProducerID == 2 && !h.Control() && len(recs) > 0 {
				t.Fatalf("%s: aborted batch at %d still holds records", how, h.BaseOffset)
			}
		}
		if got := p.AbortedTransactions(0); len(got) != len(aborted) || !slices.Equal(got, aborted) {
			t.Fatalf("%s: aborted %+v, want %+v", how, got, aborted)
		}
		if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw {
			t.Fatalf("%s: LSO %d HW %d: a transaction is open", how, lso, hw)
		}
	}
	check("compacted")

	// Markers go once their transaction's batches are gone (removed by
	// an earlier round) and the delete horizon (0 here) has passed, below
	// the producer snapshot.
	p.snapshotProducers(true)
	var markers int64
	for range 3 {
		markers += compactPartition(t, p).MarkersRemoved
	}
	if markers < 2 {
		t.Fatalf("%d markers removed", markers)
	}
	// An ABORT marker that ends a cleaned group stays (with its entry).
	left := p.AbortedTransactions(0)
	if len(left) >= len(aborted) {
		t.Fatalf("aborted %+v: no ABORT marker removed", left)
	}
	for _, a := range left {
		if h := markerAt(t, p, a.LastOffset); !h.Control() || h.ProducerID != a.ProducerID {
			t.Fatalf("entry %+v without its marker", a)
		}
	}
	aborted = left
	check("markers removed")
	stop()
	p, stop = openPartitionWith(t, dir, true, smallSegments())
	check("restarted")
	stop()
	if err := os.Remove(filepath.Join(dir, "t-0", "producer-state.snapshot")); err != nil {
		t.Fatal(err)
	}
	p, _ = openPartitionWith(t, dir, true, smallSegments())
	check("rebuilt from the log")
	// Producer 1 goes on where it was: its sequence survived the clean.
	appendDurable(t, p, keyedTxnBatch(1, 3, "k", "k5"))
	markerDurable(t, p, 1, 0, batch.ControlCommit)
}

// markerAt returns the header of the batch at off.
func markerAt(t *testing.T, p *Partition, off int64) batch.Header {
	t.Helper()
	data, err := p.Read(off, 1, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := batch.ParseHeader(data.Records)
	if err != nil || h.BaseOffset != off {
		t.Fatalf("batch at %d: %+v %v", off, h, err)
	}
	return h
}

// A marker at or past the producer snapshot's offset stays, whatever its
// horizon: a restart from a snapshot taken while its transaction was open
// (here, after a crash that lost the later snapshots) must meet it, or the
// transaction would stay open for ever. Once a later snapshot covers it,
// it goes.
func TestCompactKeepsMarkerPastProducerSnapshot(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "t-0", "producer-state.snapshot")
	p, stop := openPartitionWith(t, dir, true, smallSegments())
	appendDurable(t, p, keyedTxnBatch(1, 0, "a", "1")) // 0, open
	p.snapshotProducers(true)                          // at 1: producer 1's transaction open from 0
	old, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	m := markerDurable(t, p, 1, 0, batch.ControlCommit) // 1
	appendDurable(t, p, keyedTxnBatch(2, 0, "a", "2"))  // supersedes a=1
	markerDurable(t, p, 2, 0, batch.ControlCommit)
	for i := range 6 {
		appendDurable(t, p, keyedTxnBatch(3, int32(i), "pad", "p"))
		markerDurable(t, p, 3, 0, batch.ControlCommit)
	}
	for range 3 {
		compactPartition(t, p)
	}
	if data, err := p.Read(0, 1, true, nil); err != nil || batch.DecodeHeader(data.Records).BaseOffset == 0 {
		t.Fatalf("a=1 not removed: %v", err)
	}
	if h := markerAt(t, p, m); !h.Control() || h.ProducerID != 1 {
		t.Fatalf("the COMMIT at %d, past the snapshot, was removed", m)
	}
	stop()
	if err := os.WriteFile(snap, old, 0o644); err != nil {
		t.Fatal(err)
	}
	p, stop = openPartitionWith(t, dir, true, smallSegments())
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw {
		t.Fatalf("from the old snapshot: LSO %d HW %d", lso, hw)
	}
	for i := range 4 { // new dirty data asks for a round
		appendDurable(t, p, keyedTxnBatch(3, int32(6+i), "pad", "p"))
		markerDurable(t, p, 3, 0, batch.ControlCommit)
	}
	p.snapshotProducers(true)
	for range 3 {
		compactPartition(t, p)
	}
	if data, err := p.Read(m, 1, true, nil); err != nil || batch.DecodeHeader(data.Records).BaseOffset == m {
		t.Fatalf("the COMMIT at %d stays though the snapshot covers it", m)
	}
	stop()
	p, _ = openPartitionWith(t, dir, true, smallSegments())
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw {
		t.Fatalf("after removal: LSO %d HW %d", lso, hw)
	}
	if got := readCommittedFetches(t, p, 1<<20); !slices.Equal(got, []string{"2", "p"}) && !slices.Equal(got, []string{"2", "p", "p"}) {
		t.Fatalf("read_committed sees %q", got)
	}
}
