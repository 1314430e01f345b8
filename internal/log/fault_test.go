package log

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/berthmq/berth/internal/vfs"
)

func TestDiskFullLeavesNoPartialBatch(t *testing.T) {
	b := simpleBatch(4, 200, 1)
	tests := []struct {
		name   string
		budget int64
		err    error
		roll   bool
	}{
		{"no space at all", 0, syscall.ENOSPC, false},
		{"space for part of the header", 20, syscall.ENOSPC, false},
		{"space for all but one byte", int64(2*len(b) - 1), syscall.ENOSPC, false},
		{"quota", 100, syscall.EDQUOT, false},
		{"full at a roll", 0, syscall.ENOSPC, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ffs := vfs.NewFaultFS(nil)
			cfg := testConfig()
			if tc.roll {
				cfg.SegmentBytes = int64(5 * len(b))
			}
			l := openT(t, dir, cfg, Options{FS: ffs})
			for range 5 {
				appendT(t, l, b, 0)
			}
			active := l.Segments()[len(l.Segments())-1]
			before := fileSize(t, segFile(dir, active.BaseOffset, logSuffix))
			ffs.FailWritesAfter(tc.budget, tc.err)
			two := append(append([]byte(nil), b...), b...)
			_, err := l.Append(two, 0)
			if !errors.Is(err, ErrDiskFull) || !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want ErrDiskFull wrapping %v", err, tc.err)
			}
			if l.LogEndOffset() != 20 {
				t.Fatalf("LEO moved to %d", l.LogEndOffset())
			}
			for _, s := range l.Segments() {
				if got := fileSize(t, segFile(dir, s.BaseOffset, logSuffix)); got != s.Size {
					t.Fatalf("segment %d: %d bytes on disk, %d in the log", s.BaseOffset, got, s.Size)
				}
			}
			if got := fileSize(t, segFile(dir, active.BaseOffset, logSuffix)); got != before {
				t.Fatalf("active segment %d bytes, was %d", got, before)
			}
			if _, err := l.Sync(); err != nil {
				t.Fatalf("sync after a failed write: %v", err)
			}
			// Space returns: the log goes on.
			ffs.FailWritesAfter(-1, nil)
			if res := appendT(t, l, two, 0); res.FirstOffset != 20 || res.LastOffset != 27 {
				t.Fatalf("after: %+v", res)
			}
			readAllBatches(t, l, 0)
			crash(l)
			l = openT(t, dir, cfg, Options{})
			checkRecovered(t, l, 28)
		})
	}
}

func TestFsyncFailureFailsTheLog(t *testing.T) {
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(nil)
	l := openT(t, dir, testConfig(), Options{FS: ffs})
	appendT(t, l, simpleBatch(2, 10, 1), 0)
	if d, err := l.Sync(); err != nil || d != 2 {
		t.Fatalf("sync: %d %v", d, err)
	}
	appendT(t, l, simpleBatch(2, 10, 1), 0)
	ffs.FailSyncs(syscall.EIO)
	d, err := l.Sync()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) || d != 2 {
		t.Fatalf("sync: %d %v", d, err)
	}
	// Sticky, even once fsync works again: a retried fsync could report
	// success for pages the kernel already dropped.
	ffs.FailSyncs(nil)
	if _, err := l.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("second sync: %v", err)
	}
	if _, err := l.Append(simpleBatch(1, 1, 1), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append: %v", err)
	}
	// Reads still serve.
	if data, err := l.Read(0, 1000, 100, true); err != nil || len(data) == 0 {
		t.Fatalf("read: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("clean-shutdown marker written by a failed log")
	}
	l = openT(t, dir, testConfig(), Options{})
	checkRecovered(t, l, 4)
}

// Sync must not hold the append lock during the fsync.
func TestSyncDoesNotBlockAppendOrRead(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	l := openT(t, t.TempDir(), testConfig(), Options{FS: ffs})
	appendT(t, l, simpleBatch(2, 10, 1), 0)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ffs.SetSyncHook(func(name string) {
		if strings.HasSuffix(name, logSuffix) {
			once.Do(func() { close(entered); <-release })
		}
	})
	type result struct {
		d   int64
		err error
	}
	done := make(chan result)
	go func() {
		d, err := l.Sync()
		done <- result{d, err}
	}()
	<-entered
	// The fsync is in progress: appends and reads go on.
	res := appendT(t, l, simpleBatch(2, 10, 1), 0)
	if _, err := l.Read(0, 1000, 100, true); err != nil {
		t.Fatal(err)
	}
	close(release)
	r := <-done
	if r.err != nil || r.d != 2 {
		t.Fatalf("sync: %d %v", r.d, r.err)
	}
	ffs.SetSyncHook(nil)
	if d, err := l.Sync(); err != nil || d != res.LogEndOffset {
		t.Fatalf("second sync: %d %v", d, err)
	}
}

func TestSyncAfterRollCoversRolledSegments(t *testing.T) {
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(nil)
	var mu sync.Mutex
	synced := map[string]int{}
	ffs.SetSyncHook(func(name string) { mu.Lock(); synced[filepath.Base(name)]++; mu.Unlock() })
	cfg := testConfig()
	l := openT(t, dir, cfg, Options{FS: ffs})
	b := simpleBatch(3, 500, 1)
	for range 10 {
		appendT(t, l, b, 0)
	}
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments", len(segs))
	}
	d, err := l.Sync()
	if err != nil || d != 30 {
		t.Fatalf("%d %v", d, err)
	}
	mu.Lock()
	for _, s := range segs {
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if s == segs[len(segs)-1] && suf != logSuffix {
				continue
			}
			name := segmentName(s.BaseOffset) + suf
			if suf != logSuffix {
				name += vfs.TempSuffix // written whole and fsynced, then renamed
			}
			if synced[name] == 0 {
				t.Errorf("%s not fsynced", name)
			}
		}
	}
	mu.Unlock()
	// The recovery point moved with the roll.
	if off, ok, err := readOffsetCheckpoint(vfs.OS(), filepath.Join(dir, recoveryPointFile)); err != nil || !ok || off != 30 {
		t.Fatalf("recovery point %d %v %v", off, ok, err)
	}
}

func TestReaderKeepsDeletedSegment(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionBytes = 0
	l := openT(t, t.TempDir(), cfg, Options{})
	for range 10 {
		appendT(t, l, simpleBatch(3, 500, 1), 0)
	}
	s := l.segments()[0]
	if !s.acquire() {
		t.Fatal("acquire")
	}
	if n, _, err := l.ApplyRetention(); err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	if !s.deleted.Load() {
		t.Fatal("segment not deleted")
	}
	// A reader that pinned the segment before the deletion still reads it.
	data, done, err := s.read(nil, 0, 1<<20, 1<<62, true)
	if err != nil || !done || len(data) == 0 {
		t.Fatalf("read pinned deleted segment: %v", err)
	}
	if _, err := CheckBatch(data[:peekSize(data)]); err != nil {
		t.Fatal(err)
	}
	s.release()
	if s.acquire() {
		t.Fatal("acquired a closed segment")
	}
	if _, err := s.f.ReadAt(make([]byte, 1), 0); err == nil {
		t.Fatal("file still open after the last release")
	}
	if _, err := l.Read(0, 100, 1<<62, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
}

// Appends, reads, syncs, retention and log-start moves at once; run with
// -race. Readers check that every batch they get is whole and valid.
func TestConcurrentAppendReadSyncRetention(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionBytes = 16 << 10
	l := openT(t, t.TempDir(), cfg, Options{})
	const n = 600
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errc := make(chan error, 8)
	wg.Add(1)
	go func() { // writer
		defer wg.Done()
		defer close(stop)
		for i := range n {
			b := simpleBatch(1+i%4, 50+i%200, int64(i))
			if _, err := l.Append(b, int32(i/100)); err != nil {
				errc <- err
				return
			}
		}
	}()
	loop := func(fn func(r *rand.Rand) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := fn(r); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	reader := func(r *rand.Rand) error {
		start, leo := l.LogStartOffset(), l.LogEndOffset()
		if leo == start {
			return nil
		}
		off := start + r.Int64N(leo-start)
		data, err := l.Read(off, int32(r.IntN(8192)), leo, true)
		if errors.Is(err, ErrOffsetOutOfRange) && off < l.LogStartOffset() {
			return nil // retention passed us
		}
		if err != nil {
			return err
		}
		for first := true; len(data) > 0; first = false {
			h, err := CheckBatch(data[:min(len(data), int(peekSize(data)))])
			if err != nil {
				return err
			}
			if first && (h.BaseOffset > off || h.LastOffset() < off) {
				return errors.New("first batch does not hold the offset")
			}
			if h.BaseOffset >= leo {
				return errors.New("batch past maxOffset")
			}
			data = data[h.Size():]
		}
		return nil
	}
	loop(reader)
	loop(reader)
	loop(func(*rand.Rand) error { _, err := l.Sync(); return err })
	loop(func(*rand.Rand) error { _, _, err := l.ApplyRetention(); return err })
	loop(func(*rand.Rand) error {
		_, _, _, err := l.OffsetForTimestamp(int64(n / 2))
		l.MaxTimestamp()
		l.Segments()
		return err
	})
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if l.LogEndOffset() == 0 || l.LogStartOffset() == 0 {
		t.Fatalf("LEO %d start %d", l.LogEndOffset(), l.LogStartOffset())
	}
	readAllBatches(t, l, l.LogStartOffset())
}

// Reads racing a truncation never return data from past the new end
// mixed with new data.
func TestConcurrentReadTruncate(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig(), Options{})
	for i := range 200 {
		appendT(t, l, simpleBatch(2, 100, int64(i)), 1)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errc := make(chan error, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				data, err := l.Read(0, 1<<20, 1<<62, true)
				if err != nil {
					errc <- err
					return
				}
				for len(data) > 0 {
					h, err := CheckBatch(data[:min(len(data), int(peekSize(data)))])
					if err != nil {
						errc <- err
						return
					}
					data = data[h.Size():]
				}
			}
		}()
	}
	for i := range 50 {
		if err := l.Truncate(int64(300 - 2*i)); err != nil {
			t.Fatal(err)
		}
		appendT(t, l, simpleBatch(3, 10, 1), int32(2+i))
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}
