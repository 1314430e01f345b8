package log

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berthmq/berth/internal/vfs"
)

// openRunwayLog opens a log in a new directory with segments of
// segmentBytes (0: testConfig's 4 KiB), through fs (nil: the OS).
func openRunwayLog(t *testing.T, segmentBytes int64, fs vfs.FS) (string, Config, *Log) {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig()
	if segmentBytes > 0 {
		cfg.SegmentBytes = segmentBytes
	}
	l := openT(t, dir, cfg, Options{FS: fs})
	return dir, cfg, l
}

// TestRunwayAppendsOverZeros: preallocated zeros follow the data, appends
// land on them, and nothing but the batches is ever read, sized or indexed.
func TestRunwayAppendsOverZeros(t *testing.T) {
	dir, cfg, l := openRunwayLog(t, 64<<10, nil)
	appendT(t, l, simpleBatch(3, 100, 1), 0)
	size := l.Size()
	n, err := l.ExtendRunway(20 << 10)
	if err != nil || n != 20<<10 {
		t.Fatalf("ExtendRunway: wrote %d, %v; want 20480", n, err)
	}
	if r := l.Runway(); r != 20<<10 {
		t.Fatalf("Runway %d, want 20480", r)
	}
	if got := fileSize(t, segFile(dir, 0, logSuffix)); got != size+20<<10 {
		t.Fatalf("segment file is %d bytes, want data %d + runway 20480", got, size)
	}
	if n, err := l.ExtendRunway(20 << 10); err != nil || n != 0 {
		t.Fatalf("second ExtendRunway wrote %d, %v; want nothing to do", n, err)
	}
	// Appends consume the runway; the file does not grow until they pass it.
	for range 5 {
		appendT(t, l, simpleBatch(2, 500, 2), 0)
	}
	if l.Size() <= size || l.Runway() != size+20<<10-l.Size() {
		t.Fatalf("size %d, runway %d: appends did not land on the runway", l.Size(), l.Runway())
	}
	if got := fileSize(t, segFile(dir, 0, logSuffix)); got != size+20<<10 {
		t.Fatalf("segment file grew to %d while the runway lasted", got)
	}
	if hs := readAllBatches(t, l, 0); len(hs) != 6 {
		t.Fatalf("read %d batches, want 6", len(hs))
	}
	// Never past segment.bytes: the segment would roll first.
	if _, err := l.ExtendRunway(1 << 20); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, segFile(dir, 0, logSuffix)); got != cfg.SegmentBytes {
		t.Fatalf("segment file is %d bytes, want segment.bytes %d at most", got, cfg.SegmentBytes)
	}
	// Appending past the runway grows the file as before.
	for l.Runway() > 0 {
		appendT(t, l, simpleBatch(1, 900, 3), 0)
	}
	appendT(t, l, simpleBatch(1, 900, 3), 0)
	if hs := readAllBatches(t, l, 0); len(hs) < 7 {
		t.Fatalf("read %d batches after the runway ran out", len(hs))
	}
}

// TestRunwayTrimmedAtRollAndClose: a rolled segment and a cleanly closed
// log end at their last batch, and a reopened log serves what it had.
func TestRunwayTrimmedAtRollAndClose(t *testing.T) {
	dir, cfg, l := openRunwayLog(t, 0, nil) // 4 KiB segments
	appendT(t, l, simpleBatch(2, 1000, 1), 0)
	if _, err := l.ExtendRunway(2048); err != nil {
		t.Fatal(err)
	}
	first := l.Size()
	appendT(t, l, simpleBatch(2, 1500, 1), 0) // rolls: over 4 KiB
	if segs := l.Segments(); len(segs) != 2 {
		t.Fatalf("%d segments, want a roll", len(segs))
	}
	if got := fileSize(t, segFile(dir, 0, logSuffix)); got != first {
		t.Fatalf("rolled segment file is %d bytes, want its data's %d", got, first)
	}
	if _, err := l.ExtendRunway(1024); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	active := l.Segments()[1]
	if got := fileSize(t, segFile(dir, active.BaseOffset, logSuffix)); got != active.Size {
		t.Fatalf("closed active segment file is %d bytes, want its data's %d", got, active.Size)
	}
	l2 := openT(t, dir, cfg, Options{})
	if l2.LogEndOffset() != leo || len(readAllBatches(t, l2, 0)) != 2 {
		t.Fatalf("reopened: LEO %d (want %d)", l2.LogEndOffset(), leo)
	}
}

// TestRunwayAfterCrash: a crash leaves the zeros; recovery ends the
// segment at its last batch without calling it corruption, keeps every
// batch, and appends go on from there.
func TestRunwayAfterCrash(t *testing.T) {
	dir, cfg, l := openRunwayLog(t, 64<<10, nil)
	for range 3 {
		appendT(t, l, simpleBatch(2, 300, 1), 0)
	}
	if _, err := l.ExtendRunway(16 << 10); err != nil {
		t.Fatal(err)
	}
	appendT(t, l, simpleBatch(2, 300, 1), 0)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	size, leo := l.Size(), l.LogEndOffset()
	crash(l)

	var logs bytes.Buffer
	l2 := openT(t, dir, cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if l2.LogEndOffset() != leo || l2.Size() != size || len(readAllBatches(t, l2, 0)) != 4 {
		t.Fatalf("recovered LEO %d size %d, want %d and %d with 4 batches", l2.LogEndOffset(), l2.Size(), leo, size)
	}
	if got := fileSize(t, segFile(dir, 0, logSuffix)); got != size {
		t.Fatalf("recovered segment file is %d bytes, want %d", got, size)
	}
	if strings.Contains(logs.String(), "torn or corrupt") || !strings.Contains(logs.String(), "preallocated zeros") {
		t.Fatalf("recovery logged:\n%s\nwant the preallocated zeros removed quietly, not a torn tail", logs.String())
	}
	appendT(t, l2, simpleBatch(1, 10, 2), 0)
	if len(readAllBatches(t, l2, 0)) != 5 {
		t.Fatal("append after recovery")
	}
}

// TestRunwayCrashBeforeRolledTrimIsDurable: a segment rolled after its
// runway was written, with the trim lost in a crash, keeps its batches
// and so do the segments after it (zeros are no corruption).
func TestRunwayCrashBeforeRolledTrimIsDurable(t *testing.T) {
	dir, cfg, l := openRunwayLog(t, 0, nil)
	appendT(t, l, simpleBatch(2, 1000, 1), 0)
	first := l.Size()
	appendT(t, l, simpleBatch(2, 1500, 1), 0) // rolls
	appendT(t, l, simpleBatch(1, 100, 1), 0)
	leo := l.LogEndOffset()
	crash(l)
	// As if the trim of segment 0 never reached the disk.
	f, err := os.OpenFile(segFile(dir, 0, logSuffix), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 3000)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Remove(filepath.Join(dir, recoveryPointFile)) // segment 0 is rescanned too

	l2 := openT(t, dir, cfg, Options{})
	if l2.LogEndOffset() != leo || len(readAllBatches(t, l2, 0)) != 3 {
		t.Fatalf("recovered LEO %d, want %d with all 3 batches", l2.LogEndOffset(), leo)
	}
	if got := fileSize(t, segFile(dir, 0, logSuffix)); got != first {
		t.Fatalf("segment 0 is %d bytes after recovery, want %d", got, first)
	}
}

// TestRunwayZerosAfterTornBatchAreCorruption: a batch cut short by the
// crash, then zeros, is still a torn tail (logged as one).
func TestRunwayZerosAfterTornBatchAreCorruption(t *testing.T) {
	dir, cfg, l := openRunwayLog(t, 64<<10, nil)
	appendT(t, l, simpleBatch(2, 300, 1), 0)
	good := l.Size()
	if _, err := l.ExtendRunway(8 << 10); err != nil {
		t.Fatal(err)
	}
	torn := simpleBatch(3, 400, 1)
	crash(l)
	f, err := os.OpenFile(segFile(dir, 0, logSuffix), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(torn[:len(torn)/2], good); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var logs bytes.Buffer
	l2 := openT(t, dir, cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if l2.Size() != good || len(readAllBatches(t, l2, 0)) != 1 {
		t.Fatalf("recovered size %d, want %d", l2.Size(), good)
	}
	if !strings.Contains(logs.String(), "torn or corrupt") {
		t.Fatalf("a torn batch before the zeros was not reported:\n%s", logs.String())
	}
}

// TestRunwayFsyncFailureFailsTheLog: the runway's fsync may be the one
// that learns of a failed writeback of the data beside it, so its failure
// fails the log as Sync's does; nothing acknowledged is lost on reopen.
func TestRunwayFsyncFailureFailsTheLog(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	dir, cfg, l := openRunwayLog(t, 64<<10, ffs)
	appendT(t, l, simpleBatch(2, 100, 1), 0)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	ffs.FailFileSyncs(syscall.EIO)
	if _, err := l.ExtendRunway(8 << 10); !errors.Is(err, syscall.EIO) {
		t.Fatalf("ExtendRunway with failing fsyncs: %v, want EIO", err)
	}
	ffs.FailFileSyncs(nil)
	if _, err := l.Append(simpleBatch(1, 1, 1), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after a failed runway fsync: %v, want ErrFailed", err)
	}
	crash(l)
	l2 := openT(t, dir, cfg, Options{})
	if l2.LogEndOffset() != 2 {
		t.Fatalf("reopened at %d, want the 2 synced records", l2.LogEndOffset())
	}
}

// TestRunwayDiskFull: preallocation that runs out of space writes no
// partial zeros past what it reports, leaves the data alone, and appends
// go on (they extend the file as without a runway).
func TestRunwayDiskFull(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	dir, _, l := openRunwayLog(t, 1<<20, ffs)
	appendT(t, l, simpleBatch(2, 100, 1), 0)
	size := l.Size()
	ffs.FailWritesAfter(200<<10, nil) // room for one chunk and a half
	n, err := l.ExtendRunway(512 << 10)
	if !errors.Is(err, ErrDiskFull) || n != runwayChunk {
		t.Fatalf("ExtendRunway on a full disk: wrote %d, %v; want one chunk and ErrDiskFull", n, err)
	}
	if got := fileSize(t, segFile(dir, 0, logSuffix)); got != size+runwayChunk {
		t.Fatalf("segment file is %d bytes, want data %d + one chunk: no partial chunk", got, size)
	}
	ffs.FailWritesAfter(-1, nil)
	appendT(t, l, simpleBatch(1, 100, 1), 0)
	if hs := readAllBatches(t, l, 0); len(hs) != 2 {
		t.Fatalf("read %d batches, want 2", len(hs))
	}
}
