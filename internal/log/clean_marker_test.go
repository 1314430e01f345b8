package log

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"
)

// markerLog builds a compacted-topic log of one closed segment holding
// transactions and an active one: producer 7's committed transaction
// whose record a later plain record supersedes, producer 8's aborted one,
// producer 7's committed one that stays:
//
//	0 txn(7) a=1   1 COMMIT(7)   2 txn(8) a=x   3 ABORT(8)
//	4 txn(7) b=1   5 COMMIT(7)   6 a=2          7 c=1 | 8 z=1 (active)
func markerLog(t *testing.T, dir string, clk *testClock) *Log {
	t.Helper()
	l := openT(t, dir, compactTestConfig(), Options{Now: clk.Now})
	appendT(t, l, txnBatchT(t, 7, kv("a", "1", 1)), 0)
	appendMarkerT(t, l, 7, 1, nil)
	appendT(t, l, txnBatchT(t, 8, kv("a", "x", 2)), 0)
	appendMarkerT(t, l, 8, 0, &AbortedTxn{ProducerID: 8, FirstOffset: 2, LastOffset: 3, LastStableOffset: 4})
	appendT(t, l, txnBatchT(t, 7, kv("b", "1", 3)), 0)
	appendMarkerT(t, l, 7, 1, nil)
	appendT(t, l, keyedBatch(t, 0, kv("a", "2", 4)), 0)
	appendT(t, l, keyedBatch(t, 0, kv("c", "1", 4)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("z", "1", 5)), 0)
	return l
}

// markersAt lists the offsets of the control batches, checking that the
// transaction index has an entry for every ABORT marker and for nothing
// else.
func markersAt(t *testing.T, l *Log) []int64 {
	t.Helper()
	keys := map[int64]string{}
	for _, r := range logRecords(t, l) {
		keys[r.off] = r.key
	}
	var out, aborts []int64
	for _, h := range readAllBatches(t, l, l.LogStartOffset()) {
		if !h.Control() {
			continue
		}
		out = append(out, h.BaseOffset)
		if keys[h.BaseOffset] == string([]byte{0, 0, 0, 0}) {
			aborts = append(aborts, h.BaseOffset)
		}
	}
	var entries []int64
	for _, a := range abortedT(t, l, 0, l.LogEndOffset()) {
		entries = append(entries, a.LastOffset)
	}
	if !slices.Equal(entries, aborts) {
		t.Fatalf("ABORT markers at %v, index entries for %v", aborts, entries)
	}
	return out
}

func markerCompactConfig() CompactConfig {
	cc := DefaultCompactConfig()
	cc.DeleteRetentionMs = 1000
	return cc
}

// A marker stays while a batch of its transaction is in the log, and goes
// (with its transaction index entry, for an ABORT) once none is left and
// delete.retention.ms has passed since the first round that mapped it; a
// marker at or past the producer snapshot's offset stays. read_committed
// results never change.
func TestCompactRemovesMarkers(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	l := markerLog(t, dir, clk)
	want := committedRecords(t, l)
	want = latestOnly(want, 8)
	if err := l.SaveProducerSnapshot(3, []byte("s")); err != nil {
		t.Fatal(err)
	}
	cc := markerCompactConfig()

	// Round 1 removes a=1 and the aborted a=x; their markers stay, since
	// the round read their batches.
	st := compactT(t, l, cc)
	if st.RecordsRemoved != 2 || st.MarkersRemoved != 0 {
		t.Fatalf("round 1: %+v", st)
	}
	sameRecords(t, "round 1", committedRecords(t, l), want)
	if got := markersAt(t, l); !slices.Equal(got, []int64{1, 3, 5}) {
		t.Fatalf("round 1: markers at %v", got)
	}
	if l.NeedsCompaction(cc) {
		t.Fatal("due before the delete horizon")
	}

	// Before the horizon: nothing goes.
	clk.Add(500 * time.Millisecond)
	if st := compactT(t, l, cc); st.MarkersRemoved != 0 {
		t.Fatalf("round 2: %+v", st)
	}
	if got := markersAt(t, l); !slices.Equal(got, []int64{1, 3, 5}) {
		t.Fatalf("round 2: markers at %v", got)
	}

	// Past it: the COMMIT at 1 goes; the ABORT at 3 is not below the
	// producer snapshot (offset 3); the COMMIT at 5 still has b=1.
	clk.Add(501 * time.Millisecond)
	if !l.NeedsCompaction(cc) {
		t.Fatal("not due at the delete horizon")
	}
	if st := compactT(t, l, cc); st.MarkersRemoved != 1 || st.RecordsRemoved != 0 {
		t.Fatalf("round 3: %+v", st)
	}
	sameRecords(t, "round 3", committedRecords(t, l), want)
	if got := markersAt(t, l); !slices.Equal(got, []int64{3, 5}) {
		t.Fatalf("round 3: markers at %v", got)
	}

	// A later snapshot lets the ABORT go, with its index entry, in the
	// next round (new dirty data asks for one).
	appendT(t, l, keyedBatch(t, 0, kv("y", "1", 6)), 0)
	rollT(t, l)
	want = append(want, got{off: 9, key: "y", value: "1", ts: 6})
	if err := l.SaveProducerSnapshot(l.LogEndOffset(), []byte("s")); err != nil {
		t.Fatal(err)
	}
	if st := compactT(t, l, cc); st.MarkersRemoved != 1 {
		t.Fatalf("round 4: %+v", st)
	}
	sameRecords(t, "round 4", committedRecords(t, l), want)
	if got := markersAt(t, l); !slices.Equal(got, []int64{5}) {
		t.Fatalf("round 4: markers at %v", got)
	}
	if _, err := os.Stat(segFile(dir, 0, txnIndexSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("an empty .txnindex is left")
	}
	l.Close()
	l = openT(t, dir, compactTestConfig(), Options{Now: clk.Now})
	sameRecords(t, "reopened", committedRecords(t, l), want)
	if got := markersAt(t, l); !slices.Equal(got, []int64{5}) {
		t.Fatalf("reopened: markers at %v", got)
	}
}

// A crash at each step of the clean that removes an ABORT marker leaves
// the marker and its entry together, both or neither, and the next clean
// finishes the job.
func TestCompactMarkerRemovalCrash(t *testing.T) {
	for _, point := range []string{"cleaned", "swap", "deleted", "indexed"} {
		t.Run(point, func(t *testing.T) {
			clk := newClock()
			dir := t.TempDir()
			l := markerLog(t, dir, clk)
			want := latestOnly(committedRecords(t, l), 8)
			if err := l.SaveProducerSnapshot(l.LogEndOffset(), []byte("s")); err != nil {
				t.Fatal(err)
			}
			cc := markerCompactConfig()
			compactT(t, l, cc)
			clk.Add(2 * time.Second)
			l.cleanHook = func(at string) error {
				if at == point {
					return errSimulatedCrash
				}
				return nil
			}
			if _, err := l.Compact(t.Context(), cc); !errors.Is(err, errSimulatedCrash) {
				t.Fatalf("Compact: %v", err)
			}
			crash(l)
			l = openT(t, dir, compactTestConfig(), Options{Now: clk.Now})
			if left := leftovers(t, dir); len(left) != 0 {
				t.Fatalf("left after Open: %v", left)
			}
			sameRecords(t, "after the crash", committedRecords(t, l), want)
			if m := markersAt(t, l); !slices.Equal(m, []int64{1, 3, 5}) && !slices.Equal(m, []int64{5}) {
				t.Fatalf("after the crash: markers at %v", m)
			}
			if _, _, err := l.LoadProducerSnapshot(); err != nil {
				t.Fatal(err)
			}
			// The next round (new dirty data asks for one) finishes.
			appendT(t, l, keyedBatch(t, 0, kv("y", "1", 6)), 0)
			rollT(t, l)
			want = append(want, got{off: 9, key: "y", value: "1", ts: 6})
			compactT(t, l, cc)
			sameRecords(t, "compacted again", committedRecords(t, l), want)
			if got := markersAt(t, l); !slices.Equal(got, []int64{5}) {
				t.Fatalf("compacted again: markers at %v", got)
			}
		})
	}
}
