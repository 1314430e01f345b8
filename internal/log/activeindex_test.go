package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/vfs"
)

// activeIndexLog opens a log whose active segment holds n batches (big
// segments, an index entry every 256 bytes), all synced and the index
// checkpointed, then m more batches synced but not checkpointed.
func activeIndexLog(t *testing.T, dir string, n, m int) (*Log, Config) {
	t.Helper()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l := openT(t, dir, cfg, Options{})
	for i := range n {
		appendT(t, l, simpleBatch(2, 100, int64(1000+i)), 1)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckpointIndex(); err != nil {
		t.Fatal(err)
	}
	for i := range m {
		appendT(t, l, simpleBatch(2, 100, int64(5000+i)), 2)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	return l, cfg
}

// After a crash, the active segment loads from the index entries the
// checkpoint wrote (every one of a durable batch) and only the batches
// after the last entry are checked: a flipped byte before it goes unseen
// (the prefix was fsynced before its entries were written), a torn tail
// after it is cut off, and every record is there.
func TestCrashRecoveryTrustsTheCheckpointedIndex(t *testing.T) {
	dir := t.TempDir()
	l, cfg := activeIndexLog(t, dir, 40, 10)
	leo := l.LogEndOffset()
	s := l.segments()[0]
	s.idxMu.RLock()
	entries := s.idx.len()
	_, lastPos := s.idx.entry(entries - 1)
	_, firstPos := s.idx.entry(0)
	s.idxMu.RUnlock()
	onDisk := fileSize(t, segFile(dir, 0, indexSuffix))
	if entries < 5 || onDisk == 0 || onDisk > int64(entries*offsetEntrySize) {
		t.Fatalf("%d index entries in memory, %d bytes on disk", entries, onDisk)
	}
	crash(l)
	logPath := segFile(dir, 0, logSuffix)
	// A torn tail: half a batch after the last synced one.
	tail := simpleBatch(2, 100, 9999)
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(tail[:len(tail)/2])
	f.Close()
	// A byte of a record body inside the indexed prefix: recovery does
	// not read it (a full scan would cut the log there).
	mutateFile(t, logPath, flip(int64(firstPos)+int64(len(tail))/2))
	l2 := openT(t, dir, cfg, Options{})
	if got := l2.LogEndOffset(); got != leo {
		t.Fatalf("LEO %d after recovery, want %d (the indexed prefix was re-checked and cut, or the tail was kept)", got, leo)
	}
	if fileSize(t, logPath) != l2.segments()[0].size.Load() {
		t.Fatalf("torn tail kept: file %d bytes, data %d", fileSize(t, logPath), l2.segments()[0].size.Load())
	}
	if lastPos == 0 {
		t.Fatal("no index entry past the start")
	}
	// Restore the byte and check everything reads back.
	l2.Close()
	mutateFile(t, logPath, flip(int64(firstPos)+int64(len(tail))/2))
	l3 := openT(t, dir, cfg, Options{})
	checkRecovered(t, l3, leo)
}

// The checkpoint writes only what is new, keeps the on-disk index equal
// to the in-memory one for durable batches, and starts over after a
// truncation removed the files; recovery after that crash is right.
func TestActiveIndexCheckpointAfterTruncation(t *testing.T) {
	dir := t.TempDir()
	l, cfg := activeIndexLog(t, dir, 30, 0)
	idxPath := segFile(dir, 0, indexSuffix)
	before, _ := os.ReadFile(idxPath)
	if err := l.CheckpointIndex(); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(idxPath); !bytes.Equal(before, again) {
		t.Fatal("a checkpoint with nothing new changed the index file")
	}
	if err := l.Truncate(20); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(idxPath); !os.IsNotExist(err) {
		t.Fatalf("index file after a truncation: %v", err)
	}
	for i := range 15 {
		appendT(t, l, simpleBatch(3, 50, int64(7000+i)), 3)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckpointIndex(); err != nil {
		t.Fatal(err)
	}
	s := l.segments()[0]
	s.idxMu.RLock()
	want := append([]byte(nil), s.idx.b...)
	s.idxMu.RUnlock()
	if got, _ := os.ReadFile(idxPath); !bytes.Equal(got, want) {
		t.Fatalf("index file %d bytes, memory %d", len(got), len(want))
	}
	leo := l.LogEndOffset()
	crash(l)
	checkRecovered(t, openT(t, dir, cfg, Options{}), leo)
}

// A torn index file (a partial entry) fails validation: recovery checks
// every batch instead, and loses nothing.
func TestActiveIndexTornFallsBackToAFullScan(t *testing.T) {
	dir := t.TempDir()
	l, cfg := activeIndexLog(t, dir, 30, 5)
	leo := l.LogEndOffset()
	crash(l)
	idxPath := filepath.Join(dir, segmentName(0)+indexSuffix)
	mutateFile(t, idxPath, func(b []byte) []byte { return append(b, 0, 0, 1) })
	l2 := openT(t, dir, cfg, Options{})
	checkRecovered(t, l2, leo)
	// The next checkpoint writes the file whole again.
	if err := l2.CheckpointIndex(); err != nil {
		t.Fatal(err)
	}
	s := l2.segments()[0]
	s.idxMu.RLock()
	want := append([]byte(nil), s.idx.b...)
	s.idxMu.RUnlock()
	if got, _ := os.ReadFile(idxPath); !bytes.Equal(got, want) {
		t.Fatalf("index file %d bytes after the checkpoint, memory %d", len(got), len(want))
	}
}

// Entries of batches not yet durable stay off the disk.
func TestActiveIndexHoldsOnlyDurableBatches(t *testing.T) {
	dir := t.TempDir()
	l, _ := activeIndexLog(t, dir, 20, 0)
	d := l.durable.Load()
	for i := range 20 {
		appendT(t, l, simpleBatch(2, 100, int64(8000+i)), 1)
	}
	if err := l.CheckpointIndex(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(segFile(dir, 0, indexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	x := offsetIndex{b: b}
	for i := range x.len() {
		if rel, _ := x.entry(i); int64(rel) >= d {
			t.Fatalf("entry %d names offset %d, past the durable %d", i, rel, d)
		}
	}
}

// A crash recovery that cuts the torn tail and then finds the indexes
// wrong (here a time index entry past the data) falls back to a full scan
// of the file as the cut left it, and the epochs come out once, in order:
// the ones the failed fast load saw are not kept.
func TestActiveIndexCutThenInvalidFallsBackCleanly(t *testing.T) {
	for _, tear := range []bool{true, false} {
		t.Run(fmt.Sprintf("torn=%v", tear), func(t *testing.T) { cutThenInvalid(t, tear) })
	}
}

func cutThenInvalid(t *testing.T, tear bool) {
	dir := t.TempDir()
	l, cfg := activeIndexLog(t, dir, 40, 10) // epoch 1, then epoch 2 after the checkpoint
	leo := l.LogEndOffset()
	_, epoch2Start := l.EndOffsetForEpoch(1)
	crash(l)
	logPath := segFile(dir, 0, logSuffix)
	torn := simpleBatch(2, 100, 9999)
	if tear {
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(torn[:len(torn)/2])
		f.Close()
	}
	// Lose the epoch checkpoint, so the epochs come from the scan alone.
	os.Remove(filepath.Join(dir, leaderEpochFile))
	// A time index entry past the data end: the fast load gives up after
	// the cut.
	mutateFile(t, segFile(dir, 0, timeIndexSuffix), func(b []byte) []byte {
		e := binary.BigEndian.AppendUint64(nil, uint64(1<<40))
		return append(b, binary.BigEndian.AppendUint32(e, uint32(leo+1000))...)
	})
	l2 := openT(t, dir, cfg, Options{})
	defer l2.Close()
	if got := l2.LogEndOffset(); got != leo {
		t.Fatalf("LEO %d, want %d", got, leo)
	}
	if e, end := l2.EndOffsetForEpoch(1); e != 1 || end != epoch2Start {
		t.Fatalf("epoch 1 ends at (%d, %d), want (1, %d)", e, end, epoch2Start)
	}
	if e, end := l2.EndOffsetForEpoch(2); e != 2 || end != leo {
		t.Fatalf("epoch 2 ends at (%d, %d), want (2, %d)", e, end, leo)
	}
}

// A sync that rolls no segment leaves a new epoch's checkpoint for later,
// so that every partition's first produce after a restart or a leader
// change is not acknowledged behind two more fsyncs: the index
// checkpoint, which recovery trusts, writes the epochs first, and after a
// crash the epochs of the data above it are rebuilt from the batches.
func TestSyncDefersTheEpochCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(nil)
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	l := openT(t, dir, cfg, Options{FS: ffs})
	appendT(t, l, simpleBatch(2, 100, 1000), 1)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	epochWrites := func() (n int) {
		for _, op := range ffs.Ops() {
			if strings.Contains(op, leaderEpochFile) && strings.HasPrefix(op, "write ") {
				n++
			}
		}
		return n
	}
	syncNoEpochWrite := func(epoch int32) int64 {
		t.Helper()
		ffs.Record()
		first := appendT(t, l, simpleBatch(2, 100, 1000+int64(epoch)), epoch).FirstOffset
		if _, err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		if n := epochWrites(); n != 0 {
			t.Fatalf("the sync of epoch %d's first batch wrote the epoch checkpoint %d times; ops %q", epoch, n, ffs.Ops())
		}
		return first
	}
	epoch2 := syncNoEpochWrite(2)
	epoch3 := syncNoEpochWrite(3)

	ffs.Record()
	if err := l.CheckpointIndex(); err != nil {
		t.Fatal(err)
	}
	if n := epochWrites(); n != 1 {
		t.Fatalf("the index checkpoint wrote the epoch checkpoint %d times, want 1; ops %q", n, ffs.Ops())
	}
	es, err := decodeEpochs(readFileT(t, filepath.Join(dir, leaderEpochFile)))
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 || es[1] != (epochEntry{2, epoch2}) || es[2] != (epochEntry{3, epoch3}) {
		t.Fatalf("epoch checkpoint %v, want epochs 1, 2 at %d and 3 at %d", es, epoch2, epoch3)
	}

	// Epoch 4 only in the batches past the index checkpoint.
	epoch4 := syncNoEpochWrite(4)
	leo := l.LogEndOffset()
	crash(l)
	l = openT(t, dir, cfg, Options{FS: ffs})
	defer l.Close()
	if got := l.LogEndOffset(); got != leo {
		t.Fatalf("LEO %d after the crash, want %d", got, leo)
	}
	for _, want := range []struct {
		epoch int32
		end   int64
	}{{1, epoch2}, {2, epoch3}, {3, epoch4}, {4, leo}} {
		if e, end := l.EndOffsetForEpoch(want.epoch); e != want.epoch || end != want.end {
			t.Errorf("after the crash epoch %d ends at (%d, %d), want (%d, %d)", want.epoch, e, end, want.epoch, want.end)
		}
	}
}
