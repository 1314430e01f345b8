package log

import (
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/berthmq/berth/internal/vfs"
)

// A sync split in two (BeginSync, then End once the caller synced the
// whole filesystem) makes durable what was appended before BeginSync and
// nothing after, without an fsync of its own; End(false) fsyncs the files
// as Sync does.
func TestPendingSyncFilesystemDurable(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{FS: ffs})
	appendT(t, l, simpleBatch(2, 10, 1), 0)

	ffs.Record()
	ps := l.BeginSync()
	appendT(t, l, simpleBatch(3, 10, 1), 0) // after BeginSync: not covered
	d, err := ps.End(true)
	if err != nil || d != 2 {
		t.Fatalf("End(true) = %d, %v; want 2 (the records appended before BeginSync)", d, err)
	}
	if ops := ffs.Ops(); slices.ContainsFunc(ops, func(op string) bool {
		return strings.HasPrefix(op, "sync ") && strings.HasSuffix(op, ".log")
	}) {
		t.Fatalf("End(true) fsynced the segment itself: %q", ops)
	}

	ffs.Record()
	d, err = l.BeginSync().End(false)
	if err != nil || d != 5 {
		t.Fatalf("End(false) = %d, %v; want 5", d, err)
	}
	if ops := ffs.Ops(); !slices.Contains(ops, "sync "+segFile(dir, 0, ".log")) {
		t.Fatalf("End(false) did not fsync the segment: %q", ops)
	}

	// Nothing new: End returns at once with what is durable.
	if d, err := l.BeginSync().End(true); err != nil || d != 5 {
		t.Fatalf("empty sync = %d, %v; want 5", d, err)
	}
}

// End(false) after a failed filesystem sync finds a failed fsync and fails
// the log, as Sync does.
func TestPendingSyncFallbackFails(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	l := openT(t, t.TempDir(), testConfig(), Options{FS: ffs})
	appendT(t, l, simpleBatch(1, 10, 1), 0)
	ps := l.BeginSync()
	ffs.FailFileSyncs(syscall.EIO)
	if _, err := ps.End(false); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("End(false) with failing fsyncs: %v, want ErrFailed wrapping EIO", err)
	}
	ffs.FailFileSyncs(nil)
	if _, err := l.Append(simpleBatch(1, 10, 1), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after a failed sync: %v, want ErrFailed", err)
	}
}
