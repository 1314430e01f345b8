package log

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/vfs"
)

// TestCompactModel runs random appends, rolls, cleans with random settings,
// truncations above the high watermark, clean and unclean restarts and clock
// moves, and after each step checks the log against the records appended:
// every record read was appended at that offset; a record is gone only if
// a later record of its key was appended, or it is a tombstone; and a
// consumer reading the whole log sees each key's last value, or for a key
// whose last record is a tombstone either that tombstone or nothing.
func TestCompactModel(t *testing.T) {
	var st CompactStats
	for seed := range uint64(24) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { compactModel(t, seed, &st) })
	}
	// The runs exercise the cleaner, not just the checks.
	if st.RecordsRemoved < 500 || st.TombstonesRemoved < 20 {
		t.Fatalf("the model runs removed little: %+v", st)
	}
}

func compactModel(t *testing.T, seed uint64, stats *CompactStats) {
	r := rand.New(rand.NewPCG(seed, 7))
	clk := newClock()
	dir := t.TempDir()
	cfg := compactTestConfig()
	cfg.SegmentBytes = 300 + r.Int64N(2000)
	opts := Options{Now: clk.Now, FS: noSyncFS{vfs.OS()}, Logger: quietLogger()}
	l := openT(t, dir, cfg, opts)
	var all []got // every record appended and not truncated
	hw := int64(0)
	codecs := []int8{0, 0, 1, 2, 3, 4, codecXerial}

	for step := range 80 {
		what := ""
		switch op := r.IntN(20); {
		case op < 10:
			n := 1 + r.IntN(4)
			recs := make([]krec, n)
			ts := clk.Now().UnixMilli()
			for i := range recs {
				k := fmt.Sprint("k", r.IntN(12))
				switch x := r.IntN(20); {
				case x < 4:
					recs[i] = tomb(k, ts)
				case x < 5:
					recs[i] = krec{nil, []byte("nokey"), ts}
				default:
					recs[i] = kv(k, fmt.Sprint("v", step, ".", i), ts)
				}
			}
			res := appendT(t, l, keyedBatch(t, codecs[r.IntN(len(codecs))], recs...), int32(step))
			for i, kr := range recs {
				all = append(all, got{off: res.FirstOffset + int64(i), key: string(kr.key), value: string(kr.value),
					nullKey: kr.key == nil, tombstone: kr.value == nil, ts: ts})
			}
			what = fmt.Sprintf("append %d", n)
		case op < 12:
			rollT(t, l)
			what = "roll"
		case op < 16:
			hw = max(hw, min(l.LogEndOffset(), hw+r.Int64N(20)))
			cc := DefaultCompactConfig()
			cc.MaxOffset = hw
			cc.DeleteRetentionMs = r.Int64N(30)
			cc.MaxMemoryBytes = mapSlotSize * (6 + r.Int64N(30)) // often fills: rounds end early
			if r.IntN(4) == 0 {
				cc.MinCompactionLagMs = r.Int64N(20)
			}
			st, err := l.Compact(t.Context(), cc)
			if err != nil {
				t.Fatalf("step %d: Compact: %v", step, err)
			}
			stats.RecordsRemoved += st.RecordsRemoved
			stats.TombstonesRemoved += st.TombstonesRemoved
			what = fmt.Sprintf("compact below %d", hw)
		case op < 17:
			to := hw + r.Int64N(l.LogEndOffset()-hw+1)
			if err := l.Truncate(to); err != nil {
				t.Fatal(err)
			}
			leo := l.LogEndOffset()
			for len(all) > 0 && all[len(all)-1].off >= leo {
				all = all[:len(all)-1]
			}
			what = fmt.Sprintf("truncate to %d", to)
		case op < 18:
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openT(t, dir, cfg, opts)
			what = "reopen"
		case op < 19:
			crash(l)
			l = openT(t, dir, cfg, opts)
			what = "crash"
		default:
			clk.Add(time.Duration(r.IntN(20)) * time.Millisecond)
			what = "tick"
		}
		checkModel(t, fmt.Sprintf("step %d (%s)", step, what), l, all)
	}
}

func checkModel(t *testing.T, when string, l *Log, all []got) {
	t.Helper()
	if n := len(all); n > 0 && l.LogEndOffset() != all[n-1].off+1 {
		t.Fatalf("%s: LEO %d, last record %d", when, l.LogEndOffset(), all[n-1].off)
	}
	checkModelRecords(t, when, logRecords(t, l), all)
}

// checkModelRecords checks the records read against those appended (all):
// see TestCompactModel.
func checkModelRecords(t *testing.T, when string, read, all []got) {
	t.Helper()
	byOff := make(map[int64]got, len(all))
	lastOf := map[string]got{}
	for _, r := range all {
		byOff[r.off] = r
		if !r.nullKey {
			lastOf[r.key] = r
		}
	}
	present := map[int64]bool{}
	seen := map[string]got{}
	for _, r := range read {
		if want, ok := byOff[r.off]; !ok || want != r {
			t.Fatalf("%s: read %v, appended %v", when, r, want)
		}
		present[r.off] = true
		if !r.nullKey {
			seen[r.key] = r
		}
	}
	for _, r := range all {
		if present[r.off] {
			continue
		}
		if r.nullKey {
			t.Fatalf("%s: record without a key %v removed", when, r)
		}
		if last := lastOf[r.key]; last.off == r.off && !r.tombstone {
			t.Fatalf("%s: last value %v of its key removed", when, r)
		}
	}
	for k, last := range lastOf {
		s, ok := seen[k]
		switch {
		case !last.tombstone && (!ok || s != last):
			t.Fatalf("%s: key %s reads as %v (present %v), last appended %v", when, k, s, ok, last)
		case last.tombstone && ok && s != last:
			t.Fatalf("%s: deleted key %s resurrected as %v", when, k, s)
		}
	}
}
