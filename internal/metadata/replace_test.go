package metadata

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/berthmq/berth/internal/vfs"
)

var errInjected = errors.New("injected fsync failure")

// A snapshot whose fsync fails (here the one Close takes) is reported, and
// no snapshot file for it is left: a restart recovers from the WAL.
func TestSnapshotWriteFailureIsReported(t *testing.T) {
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(nil)
	cfg := testConfig(dir)
	cfg.FS = ffs
	c := open(t, cfg)
	if err := c.Propose(ctx(t), createRec("orders", 2)); err != nil {
		t.Fatal(err)
	}
	want := EncodeImage(c.Image())
	index := c.Image().Index

	ffs.Record()
	ffs.FailFileSyncs(errInjected)
	if err := c.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("Close with a failing snapshot write: %v, want the injected fsync failure", err)
	}
	if ops := ffs.Ops(); !slices.Contains(ops, "sync "+filepath.Join(dir, snapName(index))+vfs.TempSuffix) {
		t.Fatalf("operations %q: the snapshot was not written through the FS", ops)
	}
	snaps, err := listSnapshots(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(snaps, index) {
		t.Fatalf("snapshot %d exists although its write failed", index)
	}

	c2, err := Open(testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := EncodeImage(c2.Image()); !bytes.Equal(got, want) {
		t.Fatalf("image after restart:\n%s\nwant\n%s", got, want)
	}
}

// A WAL rewrite (after a snapshot) whose fsync fails is reported and
// leaves the old WAL as it was; so does one whose directory fsync fails,
// except that the new WAL is already in place.
func TestWALRewriteFailureIsReported(t *testing.T) {
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(nil)
	r, err := recoverDir(ffs, dir, testConfig(dir).Logger)
	if err != nil {
		t.Fatal(err)
	}
	w := r.wal
	defer w.close()
	ents := []*pb.Entry{{Index: new(uint64(1)), Term: new(uint64(1)), Type: pb.EntryNormal.Enum(), Data: []byte(`{"v":1}`)}}
	if err := w.append(ents, &pb.HardState{Term: new(uint64(1)), Commit: new(uint64(1))}, true); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(w.path())
	if err != nil {
		t.Fatal(err)
	}

	ffs.FailFileSyncs(errInjected)
	if err := w.rewrite(&pb.HardState{Term: new(uint64(2))}, nil); !errors.Is(err, errInjected) {
		t.Fatalf("rewrite with a failing fsync: %v, want the injected failure", err)
	}
	if after, err := os.ReadFile(w.path()); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("WAL changed by a failed rewrite (%v)", err)
	}
	if _, err := os.Stat(w.path() + vfs.TempSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary WAL left behind (stat: %v)", err)
	}

	ffs.FailFileSyncs(nil)
	ffs.FailDirSyncs(errInjected)
	if err := w.rewrite(&pb.HardState{Term: new(uint64(2))}, nil); !errors.Is(err, errInjected) {
		t.Fatalf("rewrite with a failing directory fsync: %v, want the injected failure", err)
	}
}
