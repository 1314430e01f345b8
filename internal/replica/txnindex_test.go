package replica

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/batch"
	blog "github.com/berthmq/berth/internal/log"
)

// smallSegments rolls a segment every few batches of txnLoad.
func smallSegments() blog.Config {
	c := blog.DefaultConfig()
	c.SegmentBytes = 400
	c.IndexIntervalBytes = 128
	return c
}

// txnLoad writes transactions across several segments: producer 1's
// transaction begins first and is aborted last, after producer 2's aborted
// and producer 3's committed ones, with plain batches between them. It
// returns the aborted transactions expected.
func txnLoad(t *testing.T, p *Partition) []AbortedTxn {
	t.Helper()
	pad := make([]byte, 100)
	first1 := appendDurable(t, p, txnBatch(1, 0, 0, 1, "t1a")).BaseOffset
	appendDurable(t, p, makeBatch(-1, 0, 0, 1, "plain-a", pad...))
	first2 := appendDurable(t, p, txnBatch(2, 0, 0, 2, "t2a")).BaseOffset
	appendDurable(t, p, makeBatch(-1, 0, 0, 1, "plain-b", pad...))
	appendDurable(t, p, txnBatch(1, 0, 1, 1, "t1b"))
	m2 := markerDurable(t, p, 2, 0, batch.ControlAbort)
	appendDurable(t, p, txnBatch(3, 0, 0, 1, "t3"))
	appendDurable(t, p, makeBatch(-1, 0, 0, 1, "plain-c", pad...))
	markerDurable(t, p, 3, 0, batch.ControlCommit)
	appendDurable(t, p, makeBatch(-1, 0, 0, 1, "plain-d", pad...))
	m1 := markerDurable(t, p, 1, 0, batch.ControlAbort)
	appendDurable(t, p, makeBatch(-1, 0, 0, 1, "plain-e", pad...))
	return []AbortedTxn{{ProducerID: 2, FirstOffset: first2, LastOffset: m2}, {ProducerID: 1, FirstOffset: first1, LastOffset: m1}}
}

var txnLoadCommitted = []string{"plain-a-0", "plain-b-0", "t3-0", "plain-c-0", "plain-d-0", "plain-e-0"}

// readCommittedFetches reads like a read_committed consumer, one fetch of
// at most maxBytes at a time, dropping aborted batches with each fetch's
// own aborted list.
func readCommittedFetches(t *testing.T, p *Partition, maxBytes int32) []string {
	t.Helper()
	var out []string
	for off := int64(0); off < p.LastStableOffset(); {
		res, err := p.ReadCommitted(off, maxBytes, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("nothing read at %d below the LSO %d", off, res.LastStableOffset)
		}
		for b := res.Records; len(b) > 0; {
			recs, h, err := batch.Records(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			b = b[h.Size():]
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			aborted := slices.ContainsFunc(res.Aborted, func(a AbortedTxn) bool {
				return a.ProducerID == h.ProducerID && h.BaseOffset >= a.FirstOffset && h.BaseOffset < a.LastOffset
			})
			if h.Control() || h.Transactional() && aborted {
				continue
			}
			for _, r := range recs {
				out = append(out, strings.TrimRight(string(r.Value), "\x00"))
			}
		}
	}
	return out
}

// A read_committed consumer reading one batch at a time learns of an
// aborted transaction whose first batch lies segments before its marker,
// in both durability modes and after restarts with and without the
// producer snapshot.
func TestTxnReadCommittedAcrossSegments(t *testing.T) {
	for _, fsync := range []bool{true, false} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			dir := t.TempDir()
			p, stop := openPartitionWith(t, dir, fsync, smallSegments())
			want := txnLoad(t, p)
			check := func(how string) {
				t.Helper()
				segs := p.Log().Segments()
				if len(segs) < 4 {
					t.Fatalf("%s: %d segments", how, len(segs))
				}
				if i, j := segOf(segs, want[1].FirstOffset), segOf(segs, want[1].LastOffset); i >= j {
					t.Fatalf("%s: producer 1's transaction in segments %d..%d", how, i, j)
				}
				if got := p.AbortedTransactions(0); !slices.Equal(got, want) {
					t.Fatalf("%s: aborted %+v, want %+v", how, got, want)
				}
				for _, maxBytes := range []int32{1, 1 << 20} {
					if got := readCommittedFetches(t, p, maxBytes); !slices.Equal(got, txnLoadCommitted) {
						t.Fatalf("%s: read_committed (max %d bytes) sees %q", how, maxBytes, got)
					}
				}
				// The first fetch returns producer 1's first batch only,
				// and lists it though the marker is segments away.
				res, err := p.ReadCommitted(0, 1, true, nil)
				if err != nil || !slices.Equal(res.Aborted, want[1:]) {
					t.Fatalf("%s: first fetch: %v, aborted %+v", how, err, res.Aborted)
				}
			}
			check("written")
			stop()
			p, stop = openPartitionWith(t, dir, fsync, smallSegments())
			check("restarted")
			stop()
			if err := os.Remove(filepath.Join(dir, "t-0", "producer-state.snapshot")); err != nil {
				t.Fatal(err)
			}
			p, _ = openPartitionWith(t, dir, fsync, smallSegments())
			check("rebuilt from the log")
		})
	}
}

func segOf(segs []blog.SegmentInfo, off int64) int {
	i := 0
	for i+1 < len(segs) && segs[i+1].BaseOffset <= off {
		i++
	}
	return i
}

// A restart whose transaction indexes lost entries (a crash between a
// marker and its entry) gets them back from the replay of the log after
// the producer snapshot; and a truncation cuts and rebuilds them.
func TestTxnIndexRebuiltOnRestartAndTruncation(t *testing.T) {
	dir := t.TempDir()
	p, stop := openPartitionWith(t, dir, true, smallSegments())
	want := txnLoad(t, p)
	stop()
	// Lose every index file and the snapshot: the replay from the log
	// start writes them again.
	removeTxnIndexes(t, filepath.Join(dir, "t-0"))
	if err := os.Remove(filepath.Join(dir, "t-0", "producer-state.snapshot")); err != nil {
		t.Fatal(err)
	}
	p, _ = openPartitionWith(t, dir, true, smallSegments())
	if got := p.AbortedTransactions(0); !slices.Equal(got, want) {
		t.Fatalf("after the replay: %+v, want %+v", got, want)
	}
	if n := len(txnIndexFiles(t, filepath.Join(dir, "t-0"))); n != 2 {
		t.Fatalf("%d txnindex files", n)
	}

	// A truncation below producer 1's marker drops its entry; the
	// transaction is open again.
	p.appendMu.Lock()
	if err := p.log.Truncate(want[1].LastOffset); err != nil {
		t.Fatal(err)
	}
	p.afterTruncate()
	p.appendMu.Unlock()
	if got := p.AbortedTransactions(0); !slices.Equal(got, want[:1]) {
		t.Fatalf("after truncation: %+v", got)
	}
	if lso := p.LastStableOffset(); lso != want[1].FirstOffset {
		t.Fatalf("LSO %d, want %d", lso, want[1].FirstOffset)
	}
	markerDurable(t, p, 1, 0, batch.ControlAbort)
	if got := p.AbortedTransactions(0); len(got) != 2 || got[1].ProducerID != 1 || got[1].FirstOffset != want[1].FirstOffset {
		t.Fatalf("after the new marker: %+v", got)
	}
}

func txnIndexFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.txnindex"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func removeTxnIndexes(t *testing.T, dir string) {
	t.Helper()
	for _, f := range txnIndexFiles(t, dir) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

// A version 2 producer snapshot, which held the aborted transactions,
// still loads: its list goes to the transaction indexes (from which the
// log has since removed them, in this test) and the snapshot is written
// again as version 3.
func TestProducerSnapshotVersion2Upgrade(t *testing.T) {
	dir := t.TempDir()
	pdir := filepath.Join(dir, "t-0")
	p, stop := openPartitionWith(t, dir, true, smallSegments())
	want := txnLoad(t, p)
	leo := p.LogEndOffset()
	stop()

	// What Berth before the transaction index left: a version 2 snapshot
	// with the aborted list, no txnindex files.
	removeTxnIndexes(t, pdir)
	l, err := blog.Open(pdir, smallSegments(), blog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	off, data, err := l.LoadProducerSnapshot()
	if err != nil || off != leo {
		t.Fatalf("snapshot at %d: %v", off, err)
	}
	var v2 map[string]any
	if err := json.Unmarshal(data, &v2); err != nil {
		t.Fatal(err)
	}
	v2["v"] = 2
	var a [][3]int64
	for _, t := range want {
		a = append(a, [3]int64{t.ProducerID, t.FirstOffset, t.LastOffset})
	}
	v2["a"] = a
	if data, err = json.Marshal(v2); err != nil {
		t.Fatal(err)
	}
	if err := l.SaveProducerSnapshot(off, data); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	p, stop = openPartitionWith(t, dir, true, smallSegments())
	if got := p.AbortedTransactions(0); !slices.Equal(got, want) {
		t.Fatalf("after the upgrade: %+v, want %+v", got, want)
	}
	if got := readCommittedFetches(t, p, 1); !slices.Equal(got, txnLoadCommitted) {
		t.Fatalf("read_committed sees %q", got)
	}
	stop()
	l, err = blog.Open(pdir, smallSegments(), blog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, data, err = l.LoadProducerSnapshot()
	l.Close()
	var v struct {
		V int             `json:"v"`
		A json.RawMessage `json:"a"`
	}
	if err != nil || json.Unmarshal(data, &v) != nil || v.V != 3 || v.A != nil {
		t.Fatalf("snapshot after the upgrade: %s %v", data, err)
	}
	// Without the list now, a restart reads the indexes.
	p, _ = openPartitionWith(t, dir, true, smallSegments())
	if got := p.AbortedTransactions(0); !slices.Equal(got, want) {
		t.Fatalf("after a restart: %+v", got)
	}
}
