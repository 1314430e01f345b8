package log

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// A clean close of a log that took no writes since it opened replaces no
// file: each one that already holds what it would be replaced with is
// only fsynced, and the clean-shutdown marker is the one file written.
// One that changed (the recovery point and the indexes after an append) is
// replaced as before, and the next open finds everything.
func TestCleanCloseKeepsUnchangedFiles(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{FS: ffs})
	for i := range 20 {
		appendT(t, l, simpleBatch(3, 300, int64(1000+i)), 1)
	}
	if err := l.SaveProducerSnapshot(l.LogEndOffset(), []byte("state")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	renamed := func() (names []string) {
		for _, op := range ffs.Ops() {
			if f := strings.Fields(op); f[0] == "rename" {
				names = append(names, filepath.Base(f[2]))
			}
		}
		return names
	}

	l = openT(t, dir, testConfig(), Options{FS: ffs})
	leo := l.LogEndOffset()
	if err := l.SaveProducerSnapshot(leo, []byte("state")); err != nil { // unchanged
		t.Fatal(err)
	}
	ffs.Record()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := renamed(); !slices.Equal(got, []string{cleanShutdownFile}) {
		t.Fatalf("an idle log's clean close replaced %q, want only the marker; ops %q", got, ffs.Ops())
	}
	// Checkpoints, only ever written fsynced, are left alone; the index
	// files, appended to without an fsync, are fsynced.
	var synced []string
	for _, op := range ffs.Ops() {
		if f := strings.Fields(op); f[0] == "sync" {
			synced = append(synced, filepath.Base(f[1]))
		}
	}
	for _, name := range []string{leaderEpochFile, logStartFile, recoveryPointFile, producerSnapshotFile} {
		if slices.Contains(synced, name) {
			t.Errorf("the idle close fsynced the unchanged %s; fsynced %q", name, synced)
		}
	}
	if !slices.ContainsFunc(synced, func(n string) bool { return strings.HasSuffix(n, indexSuffix) }) {
		t.Errorf("the idle close did not fsync the active segment's index; fsynced %q", synced)
	}

	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker after the idle close: %v", err)
	}
	l = openT(t, dir, testConfig(), Options{FS: ffs})
	if l.LogEndOffset() != leo {
		t.Fatalf("reopened at %d, want %d", l.LogEndOffset(), leo)
	}
	appendT(t, l, simpleBatch(3, 300, 5000), 2)
	ffs.Record()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := renamed()
	for _, want := range []string{leaderEpochFile, recoveryPointFile, cleanShutdownFile} {
		if !slices.Contains(got, want) {
			t.Errorf("a clean close after an append did not replace %s; replaced %q", want, got)
		}
	}
	if slices.Contains(got, logStartFile) {
		t.Errorf("the unchanged log start checkpoint was replaced: %q", got)
	}
	l = openT(t, dir, testConfig(), Options{FS: ffs})
	defer l.Close()
	if got := len(readAllBatches(t, l, 0)); got != 21 {
		t.Fatalf("%d batches after reopening, want 21", got)
	}
	if e, end := l.EndOffsetForEpoch(1); e != 1 || end != leo {
		t.Fatalf("epoch 1 ends at (%d, %d), want (1, %d)", e, end, leo)
	}
}
