package log

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

func FuzzParseBatchHeader(f *testing.F) {
	good := simpleBatch(3, 10, 1000)
	f.Add(good)
	f.Add(good[:BatchHeaderSize])
	f.Add(make([]byte, BatchHeaderSize))
	bad := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(bad[offLastOffsetDelta:], 0xffffffff)
	f.Add(bad)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseBatchHeader(b)
		if err != nil {
			return
		}
		if h.Magic != 2 || h.Size() < BatchHeaderSize || h.LastOffset() < h.BaseOffset {
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
		fs := noSyncFS{OSFS()}
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
