package metadata

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berthmq/berth/internal/vfs"
)

// isWAL picks the metadata WAL among the files of a FaultFS.
func isWAL(name string) bool { return filepath.Base(name) == walName }

// walFaultSetup opens a controller on dir through ffs with three
// acknowledged topics.
func walFaultSetup(t *testing.T, dir string, ffs *vfs.FaultFS) *Controller {
	t.Helper()
	cfg := testConfig(dir)
	cfg.SnapshotEvery = 1 << 30 // only the WAL is written while the faults are armed
	cfg.FS = ffs
	c := open(t, cfg)
	for i := range 3 {
		if err := c.Propose(ctx(t), createRec(fmt.Sprintf("acked%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// checkStopped checks that a proposal over a failed WAL write was not
// acknowledged (ErrClosed: the controller stopped) and that the cause is
// reported to it and to the proposals after it.
func checkStopped(t *testing.T, c *Controller, err error, name, cause string) {
	t.Helper()
	if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), cause) {
		t.Fatalf("proposal over a failing WAL: %v, want ErrClosed naming %q", err, cause)
	}
	if c.Image().Topic(name) != nil {
		t.Fatalf("topic %s applied although its WAL write failed", name)
	}
	err = c.Propose(ctx(t), createRec("later", 1))
	if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), cause) {
		t.Fatalf("proposal after the failure: %v, want ErrClosed naming %q", err, cause)
	}
}

// checkRecovered reopens dir through the OS filesystem and checks that the
// acknowledged topics survived and the controller takes proposals again.
func checkRecovered(t *testing.T, dir string) *Controller {
	t.Helper()
	c, err := Open(testConfig(dir))
	if err != nil {
		t.Fatalf("Open after the failed write: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if c.Image().Topic(fmt.Sprintf("acked%d", i)) == nil {
			t.Fatalf("acknowledged topic acked%d lost; image:\n%s", i, EncodeImage(c.Image()))
		}
	}
	if err := c.Propose(ctx(t), createRec("after", 1)); err != nil {
		t.Fatalf("proposal after recovery: %v", err)
	}
	return c
}

// A WAL fsync that fails is reported: the proposal whose entry it should
// have made durable is not acknowledged (it fails with ErrClosed and is not
// applied), and the controller stops rather than go on over a log it cannot
// trust; later callers get the cause. A restart recovers a consistent log.
func TestWALFailedFsyncIsNotAcknowledged(t *testing.T) {
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(nil)
	c := walFaultSetup(t, dir, ffs)

	ffs.Inject(vfs.Fault{Op: "sync", Match: isWAL, Err: errInjected})
	err := c.Propose(ctx(t), createRec("unsynced", 1))
	checkStopped(t, c, err, "unsynced", "WAL fsync: "+errInjected.Error())
	ffs.ClearFaults()
	c.Close()

	// The entry may be in the file (written, then its fsync failed): after a
	// restart it may commit, as any proposal answered with an error may
	// have. Either way the log is consistent and the acknowledged records
	// are there.
	checkRecovered(t, dir)
}

// A WAL write that runs out of space partway leaves a torn frame: the
// proposal is not acknowledged, and a restart truncates the torn tail back
// to the last whole frame and recovers everything acknowledged.
func TestWALFullDiskIsNotAcknowledgedAndRecovers(t *testing.T) {
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(nil)
	c := walFaultSetup(t, dir, ffs)
	before := walSize(t, dir)

	ffs.FailWritesAfter(7, nil) // part of the next frame's header
	err := c.Propose(ctx(t), createRec("torn", 1))
	checkStopped(t, c, err, "torn", "WAL write: "+syscall.ENOSPC.Error())
	if n := walSize(t, dir); n != before+7 {
		t.Fatalf("WAL is %d bytes, want the %d before the write and its 7 torn bytes", n, before)
	}
	ffs.FailWritesAfter(-1, nil)
	c.Close()

	c2, err := Open(testConfig(dir))
	if err != nil {
		t.Fatalf("Open after a torn WAL write: %v", err)
	}
	if n := walSize(t, dir); n != before {
		t.Fatalf("WAL is %d bytes after recovery, want the %d of whole frames", n, before)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	c3 := checkRecovered(t, dir)
	if c3.Image().Topic("torn") != nil {
		t.Fatal("the torn entry was recovered")
	}
}

// A WAL append that fails outright (nothing written) is reported likewise,
// and the file is left as it was.
func TestWALFailedWriteIsNotAcknowledged(t *testing.T) {
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(nil)
	c := walFaultSetup(t, dir, ffs)
	before := walSize(t, dir)

	ffs.Inject(vfs.Fault{Op: "write", Match: isWAL, Err: errInjected})
	err := c.Propose(ctx(t), createRec("unwritten", 1))
	checkStopped(t, c, err, "unwritten", "WAL write: "+errInjected.Error())
	if n := walSize(t, dir); n != before {
		t.Fatalf("WAL changed from %d to %d bytes by a failed write", before, n)
	}
	ffs.ClearFaults()
	c.Close()
	if checkRecovered(t, dir).Image().Topic("unwritten") != nil {
		t.Fatal("an entry never written was recovered")
	}
}
