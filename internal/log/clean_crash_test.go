package log

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/vfs"
)

// crashFixture is a log ready to compact, closed, with its records before
// and (from a compacted copy) after the clean.
type crashFixture struct {
	dir       string
	cfg       Config
	pre, post []got
	segments  int // closed segments the clean rewrites
}

// newCrashFixture builds a log whose clean is one group: of several
// segments (grouped) or of one.
func newCrashFixture(t *testing.T, grouped bool) *crashFixture {
	clk := newClock()
	f := &crashFixture{dir: t.TempDir(), cfg: compactTestConfig()}
	if !grouped {
		f.cfg.SegmentBytes = 1 << 20
	}
	l := openT(t, f.dir, f.cfg, Options{Now: clk.Now})
	fillKeyed(t, l, clk, 16, 5, 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("tail", "1", 1)), 0)
	f.segments = len(l.Segments()) - 1
	if grouped != (f.segments > 1) {
		t.Fatalf("%d closed segments", f.segments)
	}
	f.pre = logRecords(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f.cfg.SegmentBytes = 1 << 20 // one group
	ref := t.TempDir()
	copyDir(t, f.dir, ref)
	rl := openT(t, ref, f.cfg, Options{})
	if st := compactT(t, rl, DefaultCompactConfig()); st.SegmentsCleaned != f.segments {
		t.Fatalf("reference clean: %+v", st)
	}
	f.post = logRecords(t, rl)
	if len(f.post) >= len(f.pre) {
		t.Fatal("the clean removes nothing")
	}
	return f
}

// A crash at each step of a clean leaves, after Open, exactly the data
// before or exactly the data after it, and no cleaner file.
func TestCompactCrashLeavesBeforeOrAfter(t *testing.T) {
	points := []struct {
		point    string
		post     bool
		leftover string // a file suffix present at the crash
	}{
		{"cleaned", false, ".log" + cleanedSuffix},
		{"swap", true, ".log" + swapSuffix},
		{"deleted", true, ".log" + swapSuffix},
		{"indexed", true, ".log" + swapSuffix},
	}
	for _, grouped := range []bool{false, true} {
		for _, p := range points {
			t.Run(fmt.Sprintf("grouped=%v/%s", grouped, p.point), func(t *testing.T) {
				f := newCrashFixture(t, grouped)
				l := openT(t, f.dir, f.cfg, Options{})
				l.cleanHook = func(at string) error {
					if at == p.point {
						return errSimulatedCrash
					}
					return nil
				}
				if _, err := l.Compact(t.Context(), DefaultCompactConfig()); !errors.Is(err, errSimulatedCrash) {
					t.Fatalf("Compact: %v", err)
				}
				left := leftovers(t, f.dir)
				if !slices.ContainsFunc(left, func(n string) bool { return strings.HasSuffix(n, p.leftover) }) {
					t.Fatalf("at %s: leftovers %v, want a %s", p.point, left, p.leftover)
				}
				crash(l)

				l = openT(t, f.dir, f.cfg, Options{})
				want := f.pre
				if p.post {
					want = f.post
				}
				sameRecords(t, "after the crash", logRecords(t, l), want)
				if left := leftovers(t, f.dir); len(left) != 0 {
					t.Fatalf("left after Open: %v", left)
				}
				if p.post && len(l.Segments()) != 2 {
					t.Fatalf("segments %+v", l.Segments())
				}
				compactT(t, l, DefaultCompactConfig())
				sameRecords(t, "compacted again", logRecords(t, l), f.post)
			})
		}
	}
}

// A disk filling up during a clean fails the clean, not the log.
func TestCompactDiskFull(t *testing.T) {
	f := newCrashFixture(t, true)
	ffs := vfs.NewFaultFS(nil)
	l := openT(t, f.dir, f.cfg, Options{FS: ffs})
	ffs.FailWritesAfter(100, nil)
	if _, err := l.Compact(t.Context(), DefaultCompactConfig()); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Compact: %v", err)
	}
	if left := leftovers(t, f.dir); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
	sameRecords(t, "after a failed clean", logRecords(t, l), f.pre)
	ffs.FailWritesAfter(-1, nil)
	appendT(t, l, keyedBatch(t, 0, kv("more", "1", 1)), 0)
	compactT(t, l, DefaultCompactConfig())
	sameRecords(t, "after a clean", logRecords(t, l)[:len(f.post)], f.post)
}

// A failed directory fsync during the swap fails the log; reopening finds
// the data as it was or as cleaned.
func TestCompactSwapFsyncFailure(t *testing.T) {
	for _, at := range []string{"cleaned", "swap"} {
		t.Run(at, func(t *testing.T) {
			f := newCrashFixture(t, true)
			ffs := vfs.NewFaultFS(nil)
			l := openT(t, f.dir, f.cfg, Options{FS: ffs})
			l.cleanHook = func(p string) error {
				if p == at {
					ffs.FailSyncs(syscall.EIO)
				}
				return nil
			}
			if _, err := l.Compact(t.Context(), DefaultCompactConfig()); !errors.Is(err, ErrFailed) {
				t.Fatalf("Compact: %v", err)
			}
			if _, err := l.Append(keyedBatch(t, 0, kv("x", "1", 1)), 0); !errors.Is(err, ErrFailed) {
				t.Fatalf("append to a failed log: %v", err)
			}
			ffs.FailSyncs(nil)
			crash(l)
			l = openT(t, f.dir, f.cfg, Options{})
			recs := logRecords(t, l)
			if !slices.Equal(recs, f.pre) && !slices.Equal(recs, f.post) {
				t.Fatalf("after reopen: %v", recs)
			}
			if left := leftovers(t, f.dir); len(left) != 0 {
				t.Fatalf("left %v", left)
			}
		})
	}
}

// Whatever changes the segments during a clean stops it before the swap.
func TestCompactLogChangesDuringClean(t *testing.T) {
	tests := []struct {
		name   string
		change func(l *Log) error
		check  func(t *testing.T, l *Log, f *crashFixture)
	}{
		{
			name:   "truncate",
			change: func(l *Log) error { return l.Truncate(10) },
			check: func(t *testing.T, l *Log, f *crashFixture) {
				sameRecords(t, "truncated", logRecords(t, l), slices.DeleteFunc(slices.Clone(f.pre), func(r got) bool { return r.off >= 9 }))
				if fd := l.cleaner.firstDirty(0, l.LogEndOffset()); fd != 0 {
					t.Fatalf("first dirty %d", fd)
				}
			},
		},
		{
			name:   "retention",
			change: func(l *Log) error { return l.SetLogStartOffset(l.Segments()[1].BaseOffset) },
			check: func(t *testing.T, l *Log, f *crashFixture) {
				start := l.LogStartOffset()
				sameRecords(t, "after retention", logRecords(t, l), slices.DeleteFunc(slices.Clone(f.pre), func(r got) bool { return r.off < start }))
			},
		},
		{
			name:   "close",
			change: func(l *Log) error { return l.Close() },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newCrashFixture(t, true)
			l := openT(t, f.dir, f.cfg, Options{})
			l.cleanHook = func(p string) error {
				if p == "cleaned" {
					return tc.change(l)
				}
				return nil
			}
			st, err := l.Compact(t.Context(), DefaultCompactConfig())
			if tc.name == "close" {
				if err != nil || st.Skipped == "" {
					t.Fatalf("%+v %v", st, err)
				}
				if left := leftovers(t, f.dir); len(left) != 0 {
					t.Fatalf("left %v", left)
				}
				l = openT(t, f.dir, f.cfg, Options{})
				sameRecords(t, "reopened", logRecords(t, l), f.pre)
				return
			}
			if err != nil || st.Skipped == "" || st.SegmentsCleaned != 0 {
				t.Fatalf("%+v %v", st, err)
			}
			if left := leftovers(t, f.dir); len(left) != 0 {
				t.Fatalf("left %v", left)
			}
			tc.check(t, l, f)
		})
	}
}

// A reader that pinned a segment before the clean keeps reading the old
// data after the swap; the file closes with its last reader.
func TestCompactReaderKeepsOldSegment(t *testing.T) {
	f := newCrashFixture(t, true)
	l := openT(t, f.dir, f.cfg, Options{})
	old := l.pinned()
	var oldData [][]byte
	for _, s := range old {
		b := make([]byte, s.size.Load())
		if _, err := s.f.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		oldData = append(oldData, b)
	}
	compactT(t, l, DefaultCompactConfig())
	for i, s := range old[:len(old)-1] {
		if !s.deleted.Load() {
			t.Fatalf("segment %d not replaced", s.base)
		}
		data, done, err := s.read(nil, s.base, 1<<30, 1<<62, true)
		if err != nil || !done || string(data) != string(oldData[i]) {
			t.Fatalf("pinned segment %d: %d bytes, %v", s.base, len(data), err)
		}
	}
	unpin(old)
	if _, err := old[0].f.ReadAt(make([]byte, 1), 0); err == nil {
		t.Fatal("replaced segment still open after its last reader")
	}
	sameRecords(t, "compacted", logRecords(t, l), f.post)
}

// Appends, reads and cleans at once; run with -race. Readers see whole,
// valid batches; at the end every key's last value is there.
func TestCompactConcurrentAppendRead(t *testing.T) {
	cfg := compactTestConfig()
	cfg.SegmentBytes = 4096
	l := openT(t, t.TempDir(), cfg, Options{})
	var (
		mu       sync.Mutex
		latest   = map[string]string{}
		stop     atomic.Bool
		appended = make(chan struct{})
		wg       sync.WaitGroup
		errs     = make(chan error, 4)
	)
	appendOne := func(i int) {
		k, v := fmt.Sprint("k", i%13), fmt.Sprint("v", i)
		b := keyedBatch(t, int8(i%5), kv(k, v, int64(i)))
		mu.Lock()
		defer mu.Unlock()
		if _, err := l.Append(b, 0); err != nil {
			errs <- err
			return
		}
		latest[k] = v
	}
	for i := range 50 {
		appendOne(i)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(appended)
		for i := 50; i < 1500; i++ {
			appendOne(i)
		}
	}()
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for !stop.Load() {
			off := r.Int64N(l.LogEndOffset())
			data, err := l.Read(off, 4096, 1<<62, true)
			if err != nil {
				errs <- fmt.Errorf("Read(%d): %w", off, err)
				return
			}
			for len(data) >= batch.HeaderSize {
				h, err := CheckBatch(data[:min(len(data), int(peekSize(data)))])
				if err != nil {
					errs <- fmt.Errorf("Read(%d): %w", off, err)
					return
				}
				data = data[h.Size():]
			}
		}
	}()
	cc := DefaultCompactConfig()
	cc.MinCleanableDirtyRatio = 0
	for done := false; !done; {
		select {
		case <-appended:
			done = true
		default:
		}
		if _, err := l.Compact(t.Context(), cc); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	have := map[string]string{}
	for _, r := range logRecords(t, l) {
		have[r.key] = r.value
	}
	if fmt.Sprint(have) != fmt.Sprint(latest) {
		t.Fatalf("latest values\nhave %v\nwant %v", have, latest)
	}
}

// A crash between two groups of one round leaves the first group cleaned
// and the second as it was. The first group's last segment holds only
// records the second group supersedes: its swap still replaces it whole,
// because a group keeps its last batch (empty) to mark where it ended.
func TestCompactCrashBetweenGroups(t *testing.T) {
	dir := t.TempDir()
	cfg := compactTestConfig()
	l := openT(t, dir, cfg, Options{})
	appendT(t, l, keyedBatch(t, 0, kv("a", "1", 1), kv("b", "1", 1)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("x", "1", 1)), 0)
	appendT(t, l, keyedBatch(t, 0, kv("y", "1", 1), kv("x", "2", 1)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("x", "3", 1), kv("y", "3", 1), kv("a", "3", 1)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("tail", "1", 1)), 0)
	segs := l.Segments()
	pre := logRecords(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.SegmentBytes = segs[0].Size + segs[1].Size // the first two segments group
	l = openT(t, dir, cfg, Options{})
	swaps := 0
	l.cleanHook = func(p string) error {
		if p == "swap" {
			if swaps++; swaps == 1 {
				return errSimulatedCrash
			}
		}
		return nil
	}
	if _, err := l.Compact(t.Context(), DefaultCompactConfig()); !errors.Is(err, errSimulatedCrash) {
		t.Fatal(err)
	}
	crash(l)
	l = openT(t, dir, cfg, Options{})
	want := slices.DeleteFunc(latestOnly(pre, segs[3].BaseOffset), func(r got) bool { return r.off >= segs[2].BaseOffset })
	want = append(want, pre[len(pre)-4:]...)
	sameRecords(t, "first group cleaned", logRecords(t, l), want)
	after := l.Segments()
	if len(after) != 3 || after[0].BaseOffset != 0 || after[0].NextOffset != segs[2].BaseOffset || after[1].BaseOffset != segs[2].BaseOffset {
		t.Fatalf("segments %+v, were %+v", after, segs)
	}
}

// Files of a swap set that never formed are removed on Open, and the
// segment's indexes rebuilt from its data.
func TestOpenRemovesOrphanCleanerFiles(t *testing.T) {
	f := newCrashFixture(t, false)
	for _, name := range []string{
		segmentName(0) + indexSuffix + swapSuffix,           // the set was being formed
		segmentName(0) + timeIndexSuffix + cleanedSuffix,    // being written
		segmentName(12345) + logSuffix + cleanedSuffix,      // any base
		segmentName(0) + timeIndexSuffix + swapSuffix + "x", // not ours: left alone
	} {
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := openT(t, f.dir, f.cfg, Options{})
	sameRecords(t, "after Open", logRecords(t, l), f.pre)
	if left := leftovers(t, f.dir); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
	if _, err := os.Stat(filepath.Join(f.dir, segmentName(0)+timeIndexSuffix+swapSuffix+"x")); err != nil {
		t.Fatal("removed a file that is not the cleaner's")
	}
	if l.segments()[0].idx.len() == 0 {
		t.Fatal("index not rebuilt")
	}
}

// A truncation during a round, even of segments after the group being
// swapped, stops the round: its map may hold offsets that are gone, and a
// record superseded only by one of them must stay.
func TestCompactTruncationAfterGroupStopsRound(t *testing.T) {
	l := openT(t, t.TempDir(), compactTestConfig(), Options{})
	appendT(t, l, keyedBatch(t, 0, kv("k", "1", 1), kv("a", "1", 1)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("b", "1", 1)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("k", "2", 1)), 0) // offset 3: truncated below
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("tail", "1", 1)), 0)
	cfg := compactTestConfig()
	cfg.SegmentBytes = l.Segments()[0].Size // groups of one segment
	l.SetConfig(cfg)
	l.cleanHook = func(p string) error {
		if p == "cleaned" && l.LogEndOffset() > 3 {
			return l.Truncate(3)
		}
		return nil
	}
	st, err := l.Compact(t.Context(), DefaultCompactConfig())
	if err != nil || st.Skipped == "" || st.SegmentsCleaned != 0 {
		t.Fatalf("%+v %v", st, err)
	}
	sameRecords(t, "k keeps its value", logRecords(t, l), []got{
		{off: 0, key: "k", value: "1", ts: 1}, {off: 1, key: "a", value: "1", ts: 1}, {off: 2, key: "b", value: "1", ts: 1},
	})
}
