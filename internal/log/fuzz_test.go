package log

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/vfs"
)

func FuzzParseBatchHeader(f *testing.F) {
	good := simpleBatch(3, 10, 1000)
	f.Add(good)
	f.Add(good[:batch.HeaderSize])
	f.Add(make([]byte, batch.HeaderSize))
	bad := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(bad[offLastOffsetDelta:], 0xffffffff)
	f.Add(bad)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseBatchHeader(b)
		if err != nil {
			return
		}
		if h.Magic != 2 || h.Size() < batch.HeaderSize || h.LastOffset() < h.BaseOffset {
			t.Fatalf("accepted %+v", h)
		}
		if h.Size() > len(b) {
			return
		}
		ch, err := CheckBatch(b[:h.Size()])
		if err != nil {
			return
		}
		if ch != h {
			t.Fatalf("CheckBatch %+v, ParseBatchHeader %+v", ch, h)
		}
		// Record parsing must not panic on any CRC-valid batch.
		firstRecordAtOrAfter(h, b[:h.Size()], 0, 0)
		firstRecordAtOrAfter(h, b[:h.Size()], h.MaxTimestamp, h.BaseOffset+1)
	})
}

// FuzzRecover writes arbitrary bytes as the tail of a crashed log's last
// segment, after cutting some of its bytes, and checks that Open never
// fails or panics, keeps every batch before the damage, serves only valid
// batches, and appends at the recovered end.
func FuzzRecover(f *testing.F) {
	b := simpleBatch(2, 20, 5)
	f.Add(uint16(0), []byte{})
	f.Add(uint16(1), []byte{})
	f.Add(uint16(30), make([]byte, 100))
	f.Add(uint16(0), b)
	next := append([]byte(nil), b...)
	putHeader(next, 6, 0)
	f.Add(uint16(0), next)               // a valid batch continuing the log
	f.Add(uint16(0), next[:len(next)-1]) // a torn one
	f.Add(uint16(uint16(len(b))), next)
	f.Fuzz(func(t *testing.T, cut uint16, tail []byte) {
		dir := t.TempDir()
		cfg := testConfig()
		fs := noSyncFS{vfs.OS()}
		l := openT(t, dir, cfg, Options{FS: fs})
		for range 3 {
			appendT(t, l, b, 0)
		}
		crash(l)
		name := filepath.Join(dir, segmentName(0)+logSuffix)
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		c := min(int(cut), len(data))
		intact := int64((len(data) - c) / len(b) * 2) // records in batches before the cut
		data = append(data[:len(data)-c], tail...)
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err = Open(dir, cfg, Options{FS: fs, Logger: quietLogger()})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		if l.LogEndOffset() < intact {
			t.Fatalf("LEO %d, %d records were intact", l.LogEndOffset(), intact)
		}
		hs := readAllBatches(t, l, 0)
		if len(hs) > 0 && hs[len(hs)-1].LastOffset()+1 != l.LogEndOffset() {
			t.Fatalf("last batch ends at %d, LEO %d", hs[len(hs)-1].LastOffset()+1, l.LogEndOffset())
		}
		leo := l.LogEndOffset()
		if res, err := l.Append(append([]byte(nil), b...), 1); err != nil || res.FirstOffset != leo {
			t.Fatalf("append after recovery: %+v %v", res, err)
		}
	})
}

// FuzzTxnIndex opens a log whose segment's transaction index holds
// arbitrary bytes after two valid entries, and checks that Open never
// fails or panics, keeps the valid entries before the damage, serves only
// entries whose marker is in the segment in increasing order, and appends
// after them.
func FuzzTxnIndex(f *testing.F) {
	entry := func(pid, first, last int64) []byte {
		return appendTxnEntry(nil, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: last, LastStableOffset: last + 1})
	}
	f.Add([]byte{})
	f.Add(make([]byte, 20))
	f.Add(entry(3, 3, 4))
	f.Add(entry(3, 3, 1))  // marker out of order
	f.Add(entry(3, 9, 4))  // first after marker
	f.Add(entry(3, 3, 99)) // marker past the data
	f.Add(append(entry(3, 3, 4), 0, 1))
	f.Fuzz(func(t *testing.T, tail []byte) {
		dir := t.TempDir()
		cfg := testConfig()
		fs := noSyncFS{vfs.OS()}
		l := openT(t, dir, cfg, Options{FS: fs})
		b := simpleBatch(1, 10, 5)
		for range 6 {
			appendT(t, l, b, 0)
		}
		crash(l)
		name := filepath.Join(dir, segmentName(0)+txnIndexSuffix)
		data := append(append(entry(1, 0, 1), entry(2, 1, 2)...), tail...)
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, cfg, Options{FS: fs, Logger: quietLogger()})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		all, err := l.AbortedTxns(0, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) < 2 || all[0].ProducerID != 1 || all[1].ProducerID != 2 {
			t.Fatalf("valid entries lost: %+v", all)
		}
		prev := int64(-1)
		for _, a := range all {
			if a.LastOffset <= prev || a.LastOffset >= l.LogEndOffset() || a.FirstOffset > a.LastOffset {
				t.Fatalf("bad entry served: %+v", a)
			}
			prev = a.LastOffset
		}
		leo := l.LogEndOffset()
		a := AbortedTxn{ProducerID: 7, FirstOffset: leo, LastOffset: leo, LastStableOffset: leo + 1}
		if _, err := l.AppendTxn(append([]byte(nil), b...), 0, []AbortedTxn{a}); err != nil {
			t.Fatal(err)
		}
		after, err := l.AbortedTxns(leo, leo+1)
		if err != nil || len(after) == 0 || after[len(after)-1] != a {
			t.Fatalf("after an append: %+v %v", after, err)
		}
	})
}
