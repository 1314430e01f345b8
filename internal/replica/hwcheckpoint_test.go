package replica

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/vfs"
)

// The high-watermark checkpoint is replaced durably: its new contents are
// fsynced before the rename and the directory after it. A failed fsync of
// either is reported, is not taken as checkpointed (so the next tick tries
// again), and a failed file fsync leaves the old checkpoint in place.
func TestHWCheckpointIsFsyncedAndFailuresAreReported(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	_, p, dir := openPartitionOf(t, ffs, true, []int32{1, 2})
	path := filepath.Join(dir, hwCheckpointFile)
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	p.hw.Store(5)
	ffs.Record()
	if err := p.checkpointHW(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "5\n" {
		t.Fatalf("checkpoint %q, want 5", got)
	}
	ops, tmp := ffs.Ops(), path+vfs.TempSuffix
	if i, j := slices.Index(ops, "sync "+tmp), slices.Index(ops, "rename "+tmp+" "+path); i < 0 || j < i || !slices.Contains(ops[j:], "syncdir "+dir) {
		t.Fatalf("operations %q: want the new file fsynced, renamed, then the directory fsynced", ops)
	}

	injected := errors.New("injected fsync failure")
	p.hw.Store(9)
	ffs.FailFileSyncs(injected)
	if err := p.checkpointHW(); !errors.Is(err, injected) {
		t.Fatalf("failed file fsync: error %v", err)
	}
	if got := read(); got != "5\n" || p.hwCheckpointed.Load() != 5 {
		t.Fatalf("after a failed file fsync: checkpoint %q, checkpointed %d; want the old 5", got, p.hwCheckpointed.Load())
	}
	ffs.FailFileSyncs(nil)
	ffs.FailDirSyncs(injected)
	if err := p.checkpointHW(); !errors.Is(err, injected) {
		t.Fatalf("failed directory fsync: error %v", err)
	}
	if p.hwCheckpointed.Load() != 5 {
		t.Fatalf("a checkpoint whose directory fsync failed counted as written (%d)", p.hwCheckpointed.Load())
	}
	ffs.FailDirSyncs(nil)
	if err := p.checkpointHW(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "9\n" || p.hwCheckpointed.Load() != 9 {
		t.Fatalf("after healing: checkpoint %q, checkpointed %d; want 9", got, p.hwCheckpointed.Load())
	}
}

// partition.metadata (the topic id) is written durably too: a failed fsync
// is reported and leaves no file, so the partition does not open on a topic
// id that may not survive a crash.
func TestTopicIDFileFailedWriteIsReported(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	dir := filepath.Join(t.TempDir(), "t-0")
	injected := errors.New("injected fsync failure")
	ffs.FailFileSyncs(injected)
	if err := checkTopicIDFile(ffs, dir, [16]byte{1}); !errors.Is(err, injected) {
		t.Fatalf("error %v, want the injected fsync failure", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "partition.metadata")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partition.metadata exists after a failed write (stat: %v)", err)
	}
	ffs.FailFileSyncs(nil)
	ffs.FailDirSyncs(injected)
	if err := checkTopicIDFile(ffs, dir, [16]byte{1}); !errors.Is(err, injected) {
		t.Fatalf("error %v, want the injected directory fsync failure", err)
	}
	ffs.FailDirSyncs(nil)
	if err := checkTopicIDFile(ffs, dir, [16]byte{1}); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint write that fails at any step (create, write, fsync, rename)
// is reported and leaves the old checkpoint whole, which is what a restart
// reads (through the FS, as every file of the partition).
func TestHWCheckpointFailedWriteKeepsOldFile(t *testing.T) {
	for _, op := range []string{"open", "write", "sync", "rename"} {
		t.Run(op, func(t *testing.T) {
			ffs := vfs.NewFaultFS(nil)
			_, p, dir := openPartitionOf(t, ffs, true, []int32{1, 2})
			p.hw.Store(5)
			if err := p.checkpointHW(); err != nil {
				t.Fatal(err)
			}
			injected := errors.New("injected fault")
			ffs.Inject(vfs.Fault{Op: op, Err: injected, Match: func(n string) bool {
				return strings.HasPrefix(filepath.Base(n), hwCheckpointFile)
			}})
			p.hw.Store(9)
			if err := p.checkpointHW(); !errors.Is(err, injected) {
				t.Fatalf("failed %s: error %v", op, err)
			}
			if got := readHWCheckpoint(vfs.OS(), dir); got != 5 || p.hwCheckpointed.Load() != 5 {
				t.Fatalf("after a failed %s: checkpoint %d, checkpointed %d; want the old 5", op, got, p.hwCheckpointed.Load())
			}
			ffs.ClearFaults()
			if err := p.checkpointHW(); err != nil {
				t.Fatal(err)
			}
			if got := readHWCheckpoint(ffs, dir); got != 9 {
				t.Fatalf("after healing: checkpoint %d, want 9", got)
			}
		})
	}
}
