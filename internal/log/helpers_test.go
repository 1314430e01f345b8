package log

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/vfs"
)

// rec is one test record.
type rec struct {
	ts    int64
	value []byte
}

// mkBatch builds an uncompressed v2 batch with base offset 0 holding recs;
// record i has offset delta i. The CRC is computed; epoch is -1.
func mkBatch(recs ...rec) []byte {
	var body []byte
	baseTS, maxTS := recs[0].ts, recs[0].ts
	for _, r := range recs {
		maxTS = max(maxTS, r.ts)
	}
	for i, r := range recs {
		var rb []byte
		rb = append(rb, 0) // attributes
		rb = binary.AppendVarint(rb, r.ts-baseTS)
		rb = binary.AppendVarint(rb, int64(i))
		rb = binary.AppendVarint(rb, -1) // null key
		rb = binary.AppendVarint(rb, int64(len(r.value)))
		rb = append(rb, r.value...)
		rb = binary.AppendVarint(rb, 0) // headers
		body = binary.AppendVarint(body, int64(len(rb)))
		body = append(body, rb...)
	}
	b := make([]byte, batch.HeaderSize, batch.HeaderSize+len(body))
	binary.BigEndian.PutUint32(b[offLength:], uint32(batch.HeaderSize-batchOverhead+len(body)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = 2
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(len(recs)-1))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(baseTS))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[offProducerID:], 0xffffffffffffffff)
	binary.BigEndian.PutUint16(b[offProducerEpoch:], 0xffff)
	binary.BigEndian.PutUint32(b[offBaseSequence:], 0xffffffff)
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(recs)))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// simpleBatch has n records of size bytes each, all with timestamp ts.
func simpleBatch(n, size int, ts int64) []byte {
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{ts: ts, value: bytes.Repeat([]byte{byte('a' + i%26)}, size)}
	}
	return mkBatch(recs...)
}

// testClock is an injectable clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *testClock { return &testClock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testConfig is small enough for tests to roll segments.
func testConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 4096
	c.IndexIntervalBytes = 256
	c.RetentionMs = -1
	return c
}

func openT(t testing.TB, dir string, cfg Config, opts Options) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	l, err := Open(dir, cfg, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendT(t testing.TB, l *Log, b []byte, epoch int32) AppendResult {
	t.Helper()
	res, err := l.Append(append([]byte(nil), b...), epoch)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return res
}

// crash drops the log as a killed process would: files closed, nothing
// written, no clean-shutdown marker.
func crash(l *Log) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return
	}
	for _, s := range l.segments() {
		s.release()
	}
}

// readAllBatches reads the log from offset from to the end and returns the
// batches' headers, checking each is a whole valid batch.
func readAllBatches(t testing.TB, l *Log, from int64) []batch.Header {
	t.Helper()
	var out []batch.Header
	off := from
	for off < l.LogEndOffset() {
		data, err := l.Read(off, 1<<20, 1<<62, true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(data) == 0 {
			// A gap at a segment end: the next segment has the data.
			t.Fatalf("Read(%d) below LEO %d returned nothing", off, l.LogEndOffset())
		}
		for len(data) > 0 {
			h, err := ParseBatchHeader(data)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			if _, err := CheckBatch(data[:h.Size()]); err != nil {
				t.Fatalf("Read(%d): batch at %d: %v", off, h.BaseOffset, err)
			}
			if len(out) > 0 && h.BaseOffset <= out[len(out)-1].LastOffset() {
				t.Fatalf("Read(%d): offsets not increasing: %d after %d", off, h.BaseOffset, out[len(out)-1].LastOffset())
			}
			out = append(out, h)
			off = h.LastOffset() + 1
			data = data[h.Size():]
		}
	}
	return out
}

func segFile(dir string, base int64, suffix string) string {
	return filepath.Join(dir, segmentName(base)+suffix)
}

func fileSize(t testing.TB, name string) int64 {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// fixCRC recomputes a batch's CRC after a test edits it.
func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// noSyncFS skips fsync: for tests that crash logs by hand and need speed,
// not durability (the fuzz targets).
type noSyncFS struct{ vfs.FS }

func (noSyncFS) SyncDir(string) error { return nil }

func (n noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := n.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error { return nil }
