package log

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/vfs"
)

// TestCompactTxnModel runs random plain and transactional appends by three
// producers, commits and aborts (markers with their index entries), rolls,
// cleans below the last stable offset with random settings, producer
// snapshots, clean and unclean restarts and clock moves, and after each
// step checks what a read_committed reader sees against the records
// committed (as TestCompactModel does for plain records: an aborted or
// open transaction's record never supersedes a committed one, and no
// aborted record shows), that the transaction index has an entry for
// every ABORT marker and nothing else, and that every transactional batch
// left in the log still has its marker.
func TestCompactTxnModel(t *testing.T) {
	var st CompactStats
	for seed := range uint64(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { compactTxnModel(t, seed, &st) })
	}
	if st.RecordsRemoved < 300 || st.MarkersRemoved < 20 {
		t.Fatalf("the model runs removed little: %+v", st)
	}
}

// modelTxn is a producer's open transaction.
type modelTxn struct {
	first   int64
	batches []int64 // base offsets
	recs    []got
}

func compactTxnModel(t *testing.T, seed uint64, stats *CompactStats) {
	r := rand.New(rand.NewPCG(seed, 11))
	clk := newClock()
	dir := t.TempDir()
	cfg := compactTestConfig()
	cfg.SegmentBytes = 300 + r.Int64N(1500)
	opts := Options{Now: clk.Now, FS: noSyncFS{vfs.OS()}, Logger: quietLogger()}
	l := openT(t, dir, cfg, opts)
	var committed []got           // plain records and those of committed transactions
	open := map[int64]*modelTxn{} // per producer
	markerOf := map[int64]int64{} // transactional batch base offset -> its marker's offset
	lso := func() int64 {
		out := l.LogEndOffset()
		for _, tx := range open {
			out = min(out, tx.first)
		}
		return out
	}

	for step := range 120 {
		what := ""
		switch op := r.IntN(24); {
		case op < 12:
			n := 1 + r.IntN(3)
			recs := make([]krec, n)
			ts := clk.Now().UnixMilli()
			for i := range recs {
				k := fmt.Sprint("k", r.IntN(8))
				if r.IntN(8) == 0 {
					recs[i] = tomb(k, ts)
				} else {
					recs[i] = kv(k, fmt.Sprint("v", step, ".", i), ts)
				}
			}
			pid := int64(r.IntN(4)) // 0: not transactional
			var b []byte
			if pid == 0 {
				b = keyedBatch(t, 0, recs...)
			} else {
				b = txnBatchT(t, pid, recs...)
			}
			res := appendT(t, l, b, int32(step))
			var gs []got
			for i, kr := range recs {
				gs = append(gs, got{off: res.FirstOffset + int64(i), key: string(kr.key), value: string(kr.value),
					tombstone: kr.value == nil, ts: ts})
			}
			if pid == 0 {
				committed = append(committed, gs...)
				what = fmt.Sprintf("append %d", n)
				break
			}
			tx := open[pid]
			if tx == nil {
				tx = &modelTxn{first: res.FirstOffset}
				open[pid] = tx
			}
			tx.batches = append(tx.batches, res.FirstOffset)
			tx.recs = append(tx.recs, gs...)
			what = fmt.Sprintf("append %d in a transaction of %d", n, pid)
		case op < 16:
			pid := int64(1 + r.IntN(3))
			tx := open[pid]
			if tx == nil {
				what = "no transaction to end"
				break
			}
			delete(open, pid)
			at := l.LogEndOffset()
			var off int64
			if r.IntN(2) == 0 {
				off = appendMarkerT(t, l, pid, 1, nil)
				committed = append(committed, tx.recs...)
				slices.SortFunc(committed, func(a, b got) int { return int(a.off - b.off) })
				what = fmt.Sprintf("commit %d", pid)
			} else {
				ls := at + 1
				for _, o := range open {
					ls = min(ls, o.first)
				}
				off = appendMarkerT(t, l, pid, 0, &AbortedTxn{ProducerID: pid, FirstOffset: tx.first, LastOffset: at, LastStableOffset: ls})
				what = fmt.Sprintf("abort %d", pid)
			}
			for _, b := range tx.batches {
				markerOf[b] = off
			}
		case op < 18:
			rollT(t, l)
			what = "roll"
		case op < 21:
			cc := DefaultCompactConfig()
			cc.MaxOffset = lso()
			cc.DeleteRetentionMs = r.Int64N(30)
			cc.MaxMemoryBytes = mapSlotSize * (6 + r.Int64N(30))
			st, err := l.Compact(t.Context(), cc)
			if err != nil {
				t.Fatalf("step %d: Compact: %v", step, err)
			}
			stats.RecordsRemoved += st.RecordsRemoved
			stats.MarkersRemoved += st.MarkersRemoved
			what = fmt.Sprintf("compact below %d: %+v", cc.MaxOffset, st)
		case op < 22:
			if err := l.SaveProducerSnapshot(l.LogEndOffset(), []byte("s")); err != nil {
				t.Fatal(err)
			}
			what = "snapshot"
		case op < 23:
			if r.IntN(2) == 0 {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				what = "reopen"
			} else {
				crash(l)
				what = "crash"
			}
			l = openT(t, dir, cfg, opts)
			if _, _, err := l.LoadProducerSnapshot(); err != nil {
				t.Fatal(err)
			}
		default:
			clk.Add(time.Duration(r.IntN(20)) * time.Millisecond)
			what = "tick"
		}
		when := fmt.Sprintf("seed %d step %d (%s)", seed, step, what)
		pending := map[int64]bool{}
		for _, tx := range open {
			for _, g := range tx.recs {
				pending[g.off] = true
			}
		}
		var visible []got
		for _, g := range committedRecords(t, l) {
			if !pending[g.off] {
				visible = append(visible, g)
			}
		}
		checkModelRecords(t, when, visible, committed)
		controls := map[int64]bool{}
		for _, o := range markersAt(t, l) {
			controls[o] = true
		}
		for _, h := range readAllBatches(t, l, l.LogStartOffset()) {
			if m, ok := markerOf[h.BaseOffset]; ok && !h.Control() && !controls[m] {
				t.Fatalf("%s: the batch at %d is left without its marker at %d", when, h.BaseOffset, m)
			}
		}
	}
}
