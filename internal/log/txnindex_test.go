package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/vfs"
)

// txnFixture is a log of several segments with aborted transactions:
//
//   - producer 1 begins at offset 0 (segment 0) and is aborted by a marker in
//     the third segment;
//   - producer 2 begins and is aborted in the second segment;
//   - producer 3 begins in the third segment and is aborted there.
//
// The markers are plain batches: the log does not look at them.
type txnFixture struct {
	dir   string
	l     *Log
	bases []int64       // segment base offsets
	want  []AbortedTxn  // in marker order
	segOf map[int64]int // marker offset -> segment index
}

func newTxnFixture(t *testing.T, opts Options) *txnFixture {
	t.Helper()
	f := &txnFixture{dir: t.TempDir(), segOf: map[int64]int{}}
	f.l = openT(t, f.dir, testConfig(), opts)
	b := simpleBatch(1, 1500, 1) // two batches a segment
	appendT(t, f.l, b, 0)        // 0: producer 1 begins
	appendT(t, f.l, b, 0)        // 1
	appendT(t, f.l, b, 0)        // 2 (segment 1): producer 2 begins
	f.abort(t, b, AbortedTxn{ProducerID: 2, FirstOffset: 2, LastStableOffset: 0})
	appendT(t, f.l, b, 0) // 4 (segment 2): producer 3 begins
	f.abort(t, b, AbortedTxn{ProducerID: 1, FirstOffset: 0, LastStableOffset: 4})
	f.abort(t, b, AbortedTxn{ProducerID: 3, FirstOffset: 4, LastStableOffset: 7})
	appendT(t, f.l, b, 0) // 7 (segment 3)
	for _, s := range f.l.Segments() {
		f.bases = append(f.bases, s.BaseOffset)
	}
	if !slices.Equal(f.bases, []int64{0, 2, 4, 6}) {
		t.Fatalf("segments %v", f.bases)
	}
	for _, a := range f.want {
		f.segOf[a.LastOffset] = findSegment(f.l.segments(), a.LastOffset)
	}
	return f
}

// abort appends a marker batch with its entry.
func (f *txnFixture) abort(t *testing.T, b []byte, a AbortedTxn) {
	t.Helper()
	a.LastOffset = f.l.LogEndOffset()
	res, err := f.l.AppendTxn(append([]byte(nil), b...), 0, []AbortedTxn{a})
	if err != nil || res.FirstOffset != a.LastOffset {
		t.Fatalf("AppendTxn: %+v %v", res, err)
	}
	f.want = append(f.want, a)
}

func abortedT(t *testing.T, l *Log, from, upto int64) []AbortedTxn {
	t.Helper()
	ts, err := l.AbortedTxns(from, upto)
	if err != nil {
		t.Fatalf("AbortedTxns(%d, %d): %v", from, upto, err)
	}
	return ts
}

func pids(ts []AbortedTxn) []int64 {
	var out []int64
	for _, t := range ts {
		out = append(out, t.ProducerID)
	}
	return out
}

func TestTxnIndexAppendAndRead(t *testing.T) {
	f := newTxnFixture(t, Options{})
	l := f.l
	if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, f.want) {
		t.Fatalf("all: %+v, want %+v", got, f.want)
	}
	for _, c := range []struct {
		from, upto int64
		want       []int64
	}{
		// Producer 1's transaction starts in segment 0, its marker is in
		// segment 2: a read of offset 0 or 1 must list it.
		{0, 1, []int64{1}},
		{1, 2, []int64{1}},
		{2, 3, []int64{2, 1}},
		{3, 4, []int64{2, 1}},
		{4, 5, []int64{1, 3}},
		{6, 7, []int64{3}},
		{7, 8, nil},
	} {
		if got := pids(abortedT(t, l, c.from, c.upto)); !slices.Equal(got, c.want) {
			t.Errorf("[%d, %d): producers %v, want %v", c.from, c.upto, got, c.want)
		}
	}

	// One file per segment with entries, 34 bytes an entry, Kafka's layout.
	for i, base := range f.bases {
		var n int
		for _, a := range f.want {
			if f.segOf[a.LastOffset] == i {
				n++
			}
		}
		fi, err := os.Stat(segFile(f.dir, base, txnIndexSuffix))
		if n == 0 {
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("segment %d: txnindex %v, want none", base, err)
			}
			continue
		}
		if err != nil || fi.Size() != int64(n*txnEntrySize) {
			t.Fatalf("segment %d: txnindex %v %v, want %d entries", base, fi, err, n)
		}
	}
	b := readFileT(t, segFile(f.dir, 4, txnIndexSuffix))
	want := []uint64{1, 0, 5, 4}
	if v := binary.BigEndian.Uint16(b); v != 0 {
		t.Fatalf("version %d", v)
	}
	for i, w := range want {
		if got := binary.BigEndian.Uint64(b[2+8*i:]); got != w {
			t.Fatalf("field %d: %d, want %d", i, got, w)
		}
	}
}

// Entries reach the disk with the segment: a Sync fsyncs them, a clean
// close and a crash both keep them, and a reopened log reads them from the
// files (the active segment's from memory).
func TestTxnIndexSurvivesRestart(t *testing.T) {
	for _, how := range []string{"close", "crash"} {
		t.Run(how, func(t *testing.T) {
			synced := map[string]int{}
			ffs := vfs.NewFaultFS(nil)
			ffs.SetSyncHook(func(name string) { synced[name]++ })
			f := newTxnFixture(t, Options{FS: ffs})
			// A marker in the active segment, then a Sync.
			f.abort(t, simpleBatch(1, 10, 1), AbortedTxn{ProducerID: 4, FirstOffset: 7, LastStableOffset: 9})
			if _, err := f.l.Sync(); err != nil {
				t.Fatal(err)
			}
			ffs.SetSyncHook(nil)
			if synced[segFile(f.dir, 6, txnIndexSuffix)] == 0 {
				t.Fatalf("Sync did not fsync the active segment's txnindex: %v", synced)
			}
			if how == "close" {
				f.l.Close()
			} else {
				crash(f.l)
			}
			l := openT(t, f.dir, testConfig(), Options{})
			if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, f.want) {
				t.Fatalf("after reopening: %+v, want %+v", got, f.want)
			}
			// New entries go on after the loaded ones.
			a := AbortedTxn{ProducerID: 5, FirstOffset: 9, LastOffset: l.LogEndOffset(), LastStableOffset: 11}
			if _, err := l.AppendTxn(simpleBatch(1, 10, 1), 0, []AbortedTxn{a}); err != nil {
				t.Fatal(err)
			}
			if got := abortedT(t, l, 8, l.LogEndOffset()); !slices.Equal(got, []AbortedTxn{f.want[3], a}) {
				t.Fatalf("after an append: %+v", got)
			}
		})
	}
}

// Recovery keeps the valid entries whose marker is still in the data: a
// torn entry goes, and so does the entry of a marker lost with a torn
// segment tail.
func TestTxnIndexRecovery(t *testing.T) {
	f := newTxnFixture(t, Options{})
	f.abort(t, simpleBatch(1, 10, 1), AbortedTxn{ProducerID: 4, FirstOffset: 7, LastStableOffset: 9}) // 8
	crash(f.l)
	active := segFile(f.dir, 6, txnIndexSuffix)

	// A torn entry at the end of the file.
	tf, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	tf.Write(make([]byte, 20))
	tf.Close()
	l := openT(t, f.dir, testConfig(), Options{})
	if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, f.want) {
		t.Fatalf("after a torn entry: %+v", got)
	}
	if n := fileSize(t, active); n != 2*txnEntrySize {
		t.Fatalf("active txnindex %d bytes, want two entries", n)
	}
	crash(l)

	// The marker's batch torn: the data end falls below it.
	seg := segFile(f.dir, 6, logSuffix)
	if err := os.Truncate(seg, fileSize(t, seg)-5); err != nil {
		t.Fatal(err)
	}
	l = openT(t, f.dir, testConfig(), Options{})
	if l.LogEndOffset() != 8 {
		t.Fatalf("log end %d", l.LogEndOffset())
	}
	if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, f.want[:3]) {
		t.Fatalf("after losing the marker: %+v", got)
	}
	if n := fileSize(t, active); n != txnEntrySize {
		t.Fatalf("active txnindex %d bytes, want one entry", n)
	}
	crash(l)

	// An entry that is not valid (an unknown version) ends the valid
	// prefix; a file left empty goes.
	mid := segFile(f.dir, 4, txnIndexSuffix)
	b := readFileT(t, mid)
	b[0] = 0xff
	if err := os.WriteFile(mid, b, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openT(t, f.dir, testConfig(), Options{})
	if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, []AbortedTxn{f.want[0], f.want[2]}) {
		t.Fatalf("after a bad entry: %+v", got)
	}
	if _, err := os.Stat(mid); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty txnindex kept: %v", err)
	}
}

// Truncation cuts the entries of the markers it removes; Reset and
// DeleteRecords delete the files with their segments.
func TestTxnIndexTruncateAndDelete(t *testing.T) {
	f := newTxnFixture(t, Options{})
	l := f.l
	if err := l.Truncate(6); err != nil { // drops producer 3's marker
		t.Fatal(err)
	}
	if got := abortedT(t, l, 0, 6); !slices.Equal(got, f.want[:2]) {
		t.Fatalf("after truncating to 6: %+v", got)
	}
	if n := fileSize(t, segFile(f.dir, 6, txnIndexSuffix)); n != 0 {
		t.Fatalf("txnindex %d bytes after the truncation", n)
	}
	// New entries go on after the cut.
	a := AbortedTxn{ProducerID: 6, FirstOffset: 6, LastOffset: 6, LastStableOffset: 7}
	if _, err := l.AppendTxn(simpleBatch(1, 10, 1), 0, []AbortedTxn{a}); err != nil {
		t.Fatal(err)
	}
	if got := abortedT(t, l, 4, 7); !slices.Equal(got, []AbortedTxn{f.want[1], a}) {
		t.Fatalf("after an append: %+v", got)
	}
	// Truncating into a closed segment makes it active again, its
	// entries cut and the later segment's file deleted.
	if err := l.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if got := abortedT(t, l, 0, 5); !slices.Equal(got, f.want[:1]) {
		t.Fatalf("after truncating to 5: %+v", got)
	}
	if _, err := os.Stat(segFile(f.dir, 6, txnIndexSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("txnindex of a truncated segment: %v", err)
	}
	b := AbortedTxn{ProducerID: 7, FirstOffset: 5, LastOffset: 5, LastStableOffset: 6}
	if _, err := l.AppendTxn(simpleBatch(1, 10, 1), 0, []AbortedTxn{b}); err != nil {
		t.Fatal(err)
	}
	if got := abortedT(t, l, 4, 6); !slices.Equal(got, []AbortedTxn{b}) {
		t.Fatalf("after an append: %+v", got)
	}

	if err := l.SetLogStartOffset(3); err != nil { // deletes segment 0
		t.Fatal(err)
	}
	if err := l.SetLogStartOffset(4); err != nil { // and segment 1 with its entry
		t.Fatal(err)
	}
	if _, err := os.Stat(segFile(f.dir, 2, txnIndexSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("txnindex of a deleted segment: %v", err)
	}
	if err := l.Reset(100); err != nil {
		t.Fatal(err)
	}
	if got := abortedT(t, l, 100, 101); len(got) != 0 {
		t.Fatalf("after a reset: %+v", got)
	}
	ents, _ := os.ReadDir(f.dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), txnIndexSuffix) {
			t.Fatalf("left after a reset: %s", e.Name())
		}
	}
}

// AppendAbortedTxns (a follower's markers, the owner's replay) puts each
// entry in its marker's segment and skips what is indexed already.
func TestAppendAbortedTxnsSkipsIndexed(t *testing.T) {
	f := newTxnFixture(t, Options{})
	l := f.l
	extra := AbortedTxn{ProducerID: 9, FirstOffset: 7, LastOffset: 7, LastStableOffset: 8}
	beyond := AbortedTxn{ProducerID: 9, FirstOffset: 7, LastOffset: 50, LastStableOffset: 51}
	if err := l.AppendAbortedTxns(append(slices.Clone(f.want), extra, beyond)); err != nil {
		t.Fatal(err)
	}
	if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, append(slices.Clone(f.want), extra)) {
		t.Fatalf("%+v", got)
	}
	// Into a segment that is no longer active, as after a crash lost it.
	if err := os.Remove(segFile(f.dir, 2, txnIndexSuffix)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openT(t, f.dir, testConfig(), Options{})
	if got := abortedT(t, l, 2, 3); !slices.Equal(pids(got), []int64{1}) {
		t.Fatalf("without segment 1's index: %+v", got)
	}
	if err := l.AppendAbortedTxns(f.want); err != nil {
		t.Fatal(err)
	}
	if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, append(slices.Clone(f.want), extra)) {
		t.Fatalf("replayed: %+v", got)
	}
}

// A failed data write takes the marker's entry back.
func TestAppendTxnWriteFailureDropsEntry(t *testing.T) {
	ffs := vfs.NewFaultFS(nil)
	f := newTxnFixture(t, Options{FS: ffs})
	l := f.l
	ffs.FailWritesAfter(txnEntrySize+10, nil) // the entry fits, the batch does not
	a := AbortedTxn{ProducerID: 4, FirstOffset: 7, LastOffset: 8, LastStableOffset: 9}
	if _, err := l.AppendTxn(simpleBatch(1, 100, 1), 0, []AbortedTxn{a}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("AppendTxn: %v", err)
	}
	ffs.FailWritesAfter(-1, nil)
	if got := abortedT(t, l, 0, 100); !slices.Equal(got, f.want) {
		t.Fatalf("%+v", got)
	}
	if _, err := l.AppendTxn(simpleBatch(1, 100, 1), 0, []AbortedTxn{a}); err != nil {
		t.Fatal(err)
	}
	if got := abortedT(t, l, 8, 9); !slices.Equal(got, []AbortedTxn{a}) {
		t.Fatalf("%+v", got)
	}
	l.Close()
	l = openT(t, f.dir, testConfig(), Options{})
	if got := abortedT(t, l, 8, 9); !slices.Equal(got, []AbortedTxn{a}) {
		t.Fatalf("reopened: %+v", got)
	}
}

// compactTxnLog builds a compacted-topic log whose closed segments hold
// transactions: each segment a keyed batch, a transactional batch and its
// ABORT marker (entry), then an active segment.
func compactTxnLog(t *testing.T, dir string) (*Log, []AbortedTxn) {
	t.Helper()
	l := openT(t, dir, compactTestConfig(), Options{})
	var want []AbortedTxn
	for i := range 3 {
		appendT(t, l, keyedBatch(t, 0, kv("k", fmt.Sprint(i), 1), kv("k", fmt.Sprint(i), 1)), 0)
		txn := keyedBatch(t, 0, kv("t", "x", 2))
		txn[offAttributes+1] |= 0x10
		fixCRC(txn)
		first := appendT(t, l, txn, 0).FirstOffset
		ctrl := keyedBatch(t, 0, krec{[]byte{0, 0, 0, 0}, []byte{0, 0, 0, 0, 0, 0}, 3})
		ctrl[offAttributes+1] |= 0x30
		fixCRC(ctrl)
		a := AbortedTxn{ProducerID: int64(10 + i), FirstOffset: first, LastOffset: l.LogEndOffset(), LastStableOffset: l.LogEndOffset() + 1}
		if _, err := l.AppendTxn(ctrl, 0, []AbortedTxn{a}); err != nil {
			t.Fatal(err)
		}
		want = append(want, a)
		rollT(t, l)
	}
	appendT(t, l, keyedBatch(t, 0, kv("z", "1", 1)), 0)
	return l, want
}

// The cleaner carries each segment's entries to the cleaned segment, also
// when it merges segments, and across a reopen.
func TestCompactCarriesTxnIndex(t *testing.T) {
	dir := t.TempDir()
	l, want := compactTxnLog(t, dir)
	l.SetConfig(func() Config { c := compactTestConfig(); c.SegmentBytes = 1 << 20; return c }())
	st := compactT(t, l, DefaultCompactConfig())
	if st.SegmentsCleaned != 3 || st.RecordsRemoved == 0 {
		t.Fatalf("%+v", st)
	}
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("%d segments", n)
	}
	if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, want) {
		t.Fatalf("after compaction: %+v, want %+v", got, want)
	}
	if n := fileSize(t, segFile(dir, 0, txnIndexSuffix)); n != 3*txnEntrySize {
		t.Fatalf("cleaned txnindex %d bytes", n)
	}
	for _, s := range []int64{want[0].LastOffset + 1, want[1].LastOffset + 1} {
		if _, err := os.Stat(segFile(dir, s, txnIndexSuffix)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("txnindex of merged segment %d: %v", s, err)
		}
	}
	l.Close()
	l = openT(t, dir, compactTestConfig(), Options{})
	if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, want) {
		t.Fatalf("reopened: %+v", got)
	}
}

// A crash at each step of a clean keeps every entry: Open completes or
// drops the swap with the transaction indexes.
func TestCompactCrashKeepsTxnIndex(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		for _, point := range []string{"cleaned", "swap", "deleted", "indexed"} {
			t.Run(fmt.Sprintf("grouped=%v/%s", grouped, point), func(t *testing.T) {
				dir := t.TempDir()
				l, want := compactTxnLog(t, dir)
				if grouped {
					l.SetConfig(func() Config { c := compactTestConfig(); c.SegmentBytes = 1 << 20; return c }())
				}
				l.cleanHook = func(at string) error {
					if at == point {
						return errSimulatedCrash
					}
					return nil
				}
				if _, err := l.Compact(t.Context(), DefaultCompactConfig()); !errors.Is(err, errSimulatedCrash) {
					t.Fatalf("Compact: %v", err)
				}
				crash(l)
				l = openT(t, dir, compactTestConfig(), Options{})
				if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, want) {
					t.Fatalf("after the crash: %+v, want %+v", got, want)
				}
				if left := leftovers(t, dir); len(left) != 0 {
					t.Fatalf("left after Open: %v", left)
				}
				compactT(t, l, DefaultCompactConfig())
				if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, want) {
					t.Fatalf("compacted again: %+v", got)
				}
			})
		}
	}
}

// benchTxnLog is a log of about 60 segments of 300 batches with an ABORT
// entry every 16 batches (a transaction of 15 batches). Transactions are
// sequential, so every entry's last stable offset is its marker + 1.
func benchTxnLog(b *testing.B) *Log {
	c := DefaultConfig()
	c.SegmentBytes = 256 * 100
	l := openT(b, b.TempDir(), c, Options{})
	batch := simpleBatch(1, 20, 1)
	first := int64(0)
	for i := range 64 * 256 {
		var es []AbortedTxn
		off := l.LogEndOffset()
		if i%16 == 15 {
			es = []AbortedTxn{{ProducerID: int64(i), FirstOffset: first, LastOffset: off, LastStableOffset: off + 1}}
			first = off + 1
		}
		if _, err := l.AppendTxn(batch, 0, es); err != nil {
			b.Fatal(err)
		}
	}
	if n := len(l.Segments()); n < 50 {
		b.Fatalf("%d segments", n)
	}
	return l
}

// BenchmarkAbortedTxns is the read_committed fetch's look-up: at the tail
// (the active segment, in memory) and in old segments (read from the
// files).
func BenchmarkAbortedTxns(b *testing.B) {
	l := benchTxnLog(b)
	leo := l.LogEndOffset()
	for _, c := range []struct {
		name string
		from int64
	}{{"tail", leo - 8}, {"old", 100}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ts, err := l.AbortedTxns(c.from, c.from+8)
				if err != nil || len(ts) != 1 {
					b.Fatalf("%+v %v", ts, err)
				}
			}
		})
	}
}

// A closed segment with more entries than one read takes is searched in
// its file: every look-up matches a scan of all entries.
func TestAbortedTxnsSearchesLargeIndex(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig(), Options{})
	l.SetConfig(func() Config { c := testConfig(); c.SegmentBytes = 1 << 20; return c }())
	var all []AbortedTxn
	batch := simpleBatch(1, 10, 1)
	for i := range 3*txnReadChunk + 7 {
		appendT(t, l, batch, 0)
		off := l.LogEndOffset()
		a := AbortedTxn{ProducerID: int64(i), FirstOffset: off - 1, LastOffset: off, LastStableOffset: off + 1}
		if _, err := l.AppendTxn(append([]byte(nil), batch...), 0, []AbortedTxn{a}); err != nil {
			t.Fatal(err)
		}
		all = append(all, a)
	}
	rollT(t, l)
	appendT(t, l, batch, 0)
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("%d segments", n)
	}
	for from := int64(0); from < l.LogEndOffset(); from += 37 {
		for _, span := range []int64{1, 2, 300} {
			upto := from + span
			var want []AbortedTxn
			for _, a := range all {
				if a.LastOffset >= from && a.FirstOffset < upto {
					want = append(want, a)
				}
				if a.LastStableOffset >= upto {
					break
				}
			}
			if got := abortedT(t, l, from, upto); !slices.Equal(got, want) {
				t.Fatalf("[%d, %d): %d entries, want %d", from, upto, len(got), len(want))
			}
		}
	}
}
