package log

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/berthmq/berth/internal/vfs"
)

// With DeferMarkerSync, Open after a clean stop removes the marker but
// fsyncs no directory; FinishOpen(true) (the caller synced the
// filesystem) settles it without one, FinishOpen(false) fsyncs the
// directory. Until then a sync of the log fsyncs the directory too.
func TestDeferredMarkerSync(t *testing.T) {
	for _, fsSynced := range []bool{true, false} {
		ffs := vfs.NewFaultFS(nil)
		dir := t.TempDir()
		l := openT(t, dir, testConfig(), Options{FS: ffs})
		appendT(t, l, simpleBatch(2, 10, 1), 0)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		ffs.Record()
		l2 := openT(t, dir, testConfig(), Options{FS: ffs, DeferMarkerSync: true})
		if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !os.IsNotExist(err) {
			t.Fatalf("marker still there after Open: %v", err)
		}
		if ops := ffs.Ops(); slices.Contains(ops, "syncdir "+dir) {
			t.Fatalf("Open fsynced the directory: %q", ops)
		}
		if !l2.MarkerPending() {
			t.Fatal("no marker removal pending")
		}
		ffs.Record()
		if err := l2.FinishOpen(fsSynced); err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(ffs.Ops(), "syncdir "+dir); got == fsSynced {
			t.Fatalf("FinishOpen(%v): directory fsynced=%v", fsSynced, got)
		}
		if l2.MarkerPending() {
			t.Fatal("still pending after FinishOpen")
		}
		if err := l2.FinishOpen(false); err != nil { // settled: nothing to do
			t.Fatal(err)
		}
		l2.Close()
	}

	// A log synced before FinishOpen fsyncs its directory on that sync.
	ffs := vfs.NewFaultFS(nil)
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{FS: ffs})
	l.Close()
	l2 := openT(t, dir, testConfig(), Options{FS: ffs, DeferMarkerSync: true})
	defer l2.Close()
	appendT(t, l2, simpleBatch(1, 10, 1), 0)
	ffs.Record()
	if _, err := l2.Sync(); err != nil {
		t.Fatal(err)
	}
	if ops := ffs.Ops(); !slices.Contains(ops, "syncdir "+dir) {
		t.Fatalf("a sync with the marker removal pending did not fsync the directory: %q", ops)
	}
}
