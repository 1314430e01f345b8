package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/batch"
)

func TestAppendReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{})
	var sent [][]byte
	var want int64
	for i := range 20 {
		b := simpleBatch(1+i%5, 30, int64(1000+i))
		res := appendT(t, l, b, 3)
		if res.FirstOffset != want || res.LastOffset != want+int64(i%5) || res.LogEndOffset != res.LastOffset+1 {
			t.Fatalf("append %d: got %+v, want first %d", i, res, want)
		}
		if res.MaxTimestamp != int64(1000+i) {
			t.Fatalf("append %d: max timestamp %d", i, res.MaxTimestamp)
		}
		sent = append(sent, b)
		want = res.LogEndOffset
	}
	if l.LogEndOffset() != want || l.LogStartOffset() != 0 {
		t.Fatalf("LEO %d LSO %d, want %d 0", l.LogEndOffset(), l.LogStartOffset(), want)
	}
	hs := readAllBatches(t, l, 0)
	if len(hs) != len(sent) {
		t.Fatalf("read %d batches, sent %d", len(hs), len(sent))
	}
	// Every offset reads the batch holding it, with the payload intact and
	// only baseOffset and partitionLeaderEpoch rewritten.
	for _, h := range hs {
		for off := h.BaseOffset; off <= h.LastOffset(); off++ {
			data, err := l.Read(off, 1, 1<<62, true)
			if err != nil {
				t.Fatal(err)
			}
			got, err := CheckBatch(data)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			if got.BaseOffset != h.BaseOffset || got.LeaderEpoch != 3 {
				t.Fatalf("Read(%d): batch %d epoch %d", off, got.BaseOffset, got.LeaderEpoch)
			}
		}
	}
	for i, h := range hs {
		data, _ := l.Read(h.BaseOffset, 1, 1<<62, true)
		if !bytes.Equal(data[offMagic:], sent[i][offMagic:]) {
			t.Fatalf("batch %d: bytes after the epoch differ", i)
		}
	}
}

func TestReadLimits(t *testing.T) {
	l := openT(t, t.TempDir(), DefaultConfig(), Options{})
	b := simpleBatch(2, 100, 1) // offsets 0-1, 2-3, 4-5, 6-7
	size := int32(len(b))
	for range 4 {
		appendT(t, l, b, 0)
	}
	if err := l.SetLogStartOffset(2); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		offset    int64
		maxBytes  int32
		maxOffset int64
		minOne    bool
		wantBases []int64
		wantErr   error
	}{
		{"all", 2, 1 << 20, 100, true, []int64{2, 4, 6}, nil},
		{"inside a batch starts at its base", 5, 1 << 20, 100, true, []int64{4, 6}, nil},
		{"maxBytes cuts at whole batches", 2, 2*size + 10, 100, false, []int64{2, 4}, nil},
		{"maxBytes below one batch, minOne", 2, 10, 100, true, []int64{2}, nil},
		{"maxBytes below one batch, no minOne", 2, 10, 100, false, nil, nil},
		{"maxOffset excludes batches at or above it", 2, 1 << 20, 6, true, []int64{2, 4}, nil},
		{"maxOffset inside a batch keeps it", 2, 1 << 20, 5, true, []int64{2, 4}, nil},
		{"offset at maxOffset", 4, 1 << 20, 4, true, nil, nil},
		{"offset at LEO", 8, 1 << 20, 100, true, nil, nil},
		{"offset past LEO", 9, 1 << 20, 100, true, nil, ErrOffsetOutOfRange},
		{"offset below log start", 1, 1 << 20, 100, true, nil, ErrOffsetOutOfRange},
		{"negative offset", -1, 1 << 20, 100, true, nil, ErrOffsetOutOfRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := l.Read(tc.offset, tc.maxBytes, tc.maxOffset, tc.minOne)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			var bases []int64
			for len(data) > 0 {
				h, err := CheckBatch(data[:min(len(data), int(peekSize(data)))])
				if err != nil {
					t.Fatal(err)
				}
				bases = append(bases, h.BaseOffset)
				data = data[h.Size():]
			}
			if fmt.Sprint(bases) != fmt.Sprint(tc.wantBases) {
				t.Fatalf("bases %v, want %v", bases, tc.wantBases)
			}
		})
	}
}

func TestIndexLookupAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 100
	l := openT(t, dir, cfg, Options{})
	var bases []int64
	for i := range 300 {
		res := appendT(t, l, simpleBatch(1+i%3, 20+i%50, int64(i)), 0)
		bases = append(bases, res.FirstOffset)
	}
	if n := len(l.Segments()); n < 10 {
		t.Fatalf("only %d segments", n)
	}
	check := func(l *Log) {
		t.Helper()
		for i, base := range bases {
			last := l.LogEndOffset() - 1
			if i+1 < len(bases) {
				last = bases[i+1] - 1
			}
			for off := base; off <= last; off++ {
				data, err := l.Read(off, 1, 1<<62, true)
				if err != nil {
					t.Fatal(err)
				}
				if h, err := CheckBatch(data); err != nil || h.BaseOffset != base {
					t.Fatalf("Read(%d) = batch %d (%v), want %d", off, h.BaseOffset, err, base)
				}
			}
		}
	}
	check(l)
	for _, s := range l.segments() {
		if s != l.active && s.idx.len() == 0 {
			t.Fatalf("segment %d has no index entries", s.base)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check(openT(t, dir, cfg, Options{}))
}

func TestRoll(t *testing.T) {
	batch := simpleBatch(4, 100, 1) // ~500 bytes
	tests := []struct {
		name  string
		cfg   func(*Config)
		step  func(c *testClock)
		n     int
		check func(t *testing.T, segs []SegmentInfo)
	}{
		{
			name: "by size",
			cfg:  func(c *Config) { c.SegmentBytes = int64(3 * len(batch)) },
			n:    10,
			check: func(t *testing.T, segs []SegmentInfo) {
				if len(segs) != 4 {
					t.Fatalf("%d segments, want 4: %+v", len(segs), segs)
				}
				for _, s := range segs {
					if s.Size > int64(3*len(batch)) {
						t.Fatalf("segment %d has %d bytes", s.BaseOffset, s.Size)
					}
				}
			},
		},
		{
			name: "batch larger than segment.bytes goes alone",
			cfg:  func(c *Config) { c.SegmentBytes = 100 },
			n:    3,
			check: func(t *testing.T, segs []SegmentInfo) {
				if len(segs) != 3 {
					t.Fatalf("%d segments, want 3", len(segs))
				}
			},
		},
		{
			name: "by time",
			cfg:  func(c *Config) { c.SegmentMs = 1000 },
			step: func(c *testClock) { c.Add(400 * time.Millisecond) },
			n:    7, // appends at 0, 400, 800 | 1200, 1600, 2000 | 2400
			check: func(t *testing.T, segs []SegmentInfo) {
				if len(segs) != 3 {
					t.Fatalf("%d segments, want 3: %+v", len(segs), segs)
				}
			},
		},
		{
			name: "by index full",
			cfg: func(c *Config) {
				c.IndexIntervalBytes = 0 // an entry per batch
				c.SegmentIndexBytes = 4 * timeEntrySize
			},
			n: 9,
			check: func(t *testing.T, segs []SegmentInfo) {
				// 4 time entries: 3 batches plus the roll entry.
				if len(segs) != 3 {
					t.Fatalf("%d segments, want 3: %+v", len(segs), segs)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.cfg(&cfg)
			clk := newClock()
			dir := t.TempDir()
			l := openT(t, dir, cfg, Options{Now: clk.Now})
			for range tc.n {
				appendT(t, l, batch, 0)
				if tc.step != nil {
					tc.step(clk)
				}
			}
			tc.check(t, l.Segments())
			segs := l.Segments()
			for i := 1; i < len(segs); i++ {
				if segs[i].BaseOffset != segs[i-1].NextOffset {
					t.Fatalf("segment %d starts at %d, previous ends at %d", i, segs[i].BaseOffset, segs[i-1].NextOffset)
				}
				for _, suf := range []string{indexSuffix, timeIndexSuffix} {
					if _, err := os.Stat(segFile(dir, segs[i-1].BaseOffset, suf)); err != nil {
						t.Fatalf("rolled segment lacks its index: %v", err)
					}
				}
			}
			if got := readAllBatches(t, l, 0); len(got) != tc.n {
				t.Fatalf("read %d batches, want %d", len(got), tc.n)
			}
		})
	}
}

func TestRetention(t *testing.T) {
	batch := simpleBatch(2, 200, 0)
	tests := []struct {
		name        string
		cfg         func(*Config)
		ts          func(i int) int64 // batch i's timestamp, relative to the clock start
		wantDeleted int
	}{
		{
			name:        "by time: segments whose newest record is older than retention.ms",
			cfg:         func(c *Config) { c.RetentionMs = 10_000 },
			ts:          func(i int) int64 { return int64(i) * 1000 }, // now is +18s
			wantDeleted: 4,                                            // segment max timestamps 1s,3s,5s,7s,9s; 18s-7s > 10s
		},
		{
			name:        "by bytes: oldest while the rest is still at least retention.bytes",
			cfg:         func(c *Config) { c.RetentionBytes = int64(5 * len(batch)) },
			ts:          func(i int) int64 { return 0 },
			wantDeleted: 3, // 10 batches in 5 segments (2 each) +1 active; keep >= 5 batches
		},
		{
			name:        "never the active segment",
			cfg:         func(c *Config) { c.RetentionMs = 0; c.RetentionBytes = 0 },
			ts:          func(i int) int64 { return 0 },
			wantDeleted: 5,
		},
		{
			name:        "nothing to delete",
			cfg:         func(c *Config) { c.RetentionMs = 1_000_000 },
			ts:          func(i int) int64 { return 0 },
			wantDeleted: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = int64(2 * len(batch))
			cfg.RetentionMs = -1
			tc.cfg(&cfg)
			clk := newClock()
			start := clk.Now().UnixMilli()
			dir := t.TempDir()
			l := openT(t, dir, cfg, Options{Now: clk.Now})
			for i := range 11 {
				b := simpleBatch(2, 200, start+tc.ts(i))
				appendT(t, l, b, 0)
			}
			segsBefore := l.Segments()
			if len(segsBefore) != 6 {
				t.Fatalf("%d segments, want 6", len(segsBefore))
			}
			clk.Add(18 * time.Second)
			n, bytes, err := l.ApplyRetention()
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.wantDeleted {
				t.Fatalf("deleted %d segments, want %d", n, tc.wantDeleted)
			}
			var wantBytes int64
			for _, s := range segsBefore[:n] {
				wantBytes += s.Size
			}
			if bytes != wantBytes {
				t.Fatalf("deleted %d bytes, want %d", bytes, wantBytes)
			}
			segs := l.Segments()
			if len(segs) != 6-n || l.LogStartOffset() != segs[0].BaseOffset {
				t.Fatalf("after: %d segments, log start %d, first base %d", len(segs), l.LogStartOffset(), segs[0].BaseOffset)
			}
			for _, s := range segsBefore[:n] {
				if _, err := os.Stat(segFile(dir, s.BaseOffset, logSuffix)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("segment %d still on disk: %v", s.BaseOffset, err)
				}
			}
			if _, err := l.Read(l.LogStartOffset()-1, 100, 1<<62, true); n > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read below the new start: %v", err)
			}
			readAllBatches(t, l, l.LogStartOffset())
			// The start survives a restart.
			l.Close()
			l2 := openT(t, dir, cfg, Options{Now: clk.Now})
			if l2.LogStartOffset() != segs[0].BaseOffset {
				t.Fatalf("reopened log start %d, want %d", l2.LogStartOffset(), segs[0].BaseOffset)
			}
		})
	}
}

func TestSetLogStartOffset(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	l := openT(t, dir, cfg, Options{})
	b := simpleBatch(5, 300, 0) // ~1.6 KiB: 2 per 4 KiB segment
	for range 10 {
		appendT(t, l, b, 0)
	}
	if err := l.SetLogStartOffset(l.LogEndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("above LEO: %v", err)
	}
	if err := l.SetLogStartOffset(23); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 23 {
		t.Fatalf("log start %d", l.LogStartOffset())
	}
	segs := l.Segments()
	if segs[0].BaseOffset > 23 || segs[0].NextOffset <= 23 {
		t.Fatalf("first segment [%d,%d) should hold 23", segs[0].BaseOffset, segs[0].NextOffset)
	}
	if _, err := l.Read(22, 1000, 1<<62, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read 22: %v", err)
	}
	data, err := l.Read(23, 1, 1<<62, true)
	if err != nil || len(data) == 0 {
		t.Fatalf("read 23: %v", err)
	}
	if err := l.SetLogStartOffset(5); err != nil || l.LogStartOffset() != 23 {
		t.Fatalf("moving back: %v, start %d", err, l.LogStartOffset())
	}
	// Crash: the checkpoint alone keeps the start.
	crash(l)
	l2 := openT(t, dir, cfg, Options{})
	if l2.LogStartOffset() != 23 {
		t.Fatalf("after crash log start %d", l2.LogStartOffset())
	}
	// Up to the LEO: every segment but the active goes.
	if err := l2.SetLogStartOffset(l2.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if n := len(l2.Segments()); n != 1 {
		t.Fatalf("%d segments", n)
	}
	if data, err := l2.Read(l2.LogEndOffset(), 100, 1<<62, true); err != nil || len(data) != 0 {
		t.Fatalf("read at LEO: %d bytes, %v", len(data), err)
	}
	if res := appendT(t, l2, b, 0); res.FirstOffset != 50 {
		t.Fatalf("append after: %+v", res)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig(), Options{})
	v := []byte("v")
	// Timestamps by offset: 0:100 1:200 2:300 | 3:250 4:260 | 5:500 | 6:400 7:600
	appendT(t, l, mkBatch(rec{100, v}, rec{200, v}, rec{300, v}), 0)
	appendT(t, l, mkBatch(rec{250, v}, rec{260, v}), 0)
	appendT(t, l, mkBatch(rec{500, v}), 0)
	appendT(t, l, mkBatch(rec{400, v}, rec{600, v}), 0)
	tests := []struct {
		ts      int64
		off, rt int64
		found   bool
	}{
		{0, 0, 100, true},
		{100, 0, 100, true},
		{101, 1, 200, true},
		{250, 2, 300, true}, // first record with ts >= 250 in offset order
		{301, 5, 500, true},
		{450, 5, 500, true},
		{550, 7, 600, true},
		{600, 7, 600, true},
		{601, -1, -1, false},
	}
	for _, tc := range tests {
		off, rt, found, err := l.OffsetForTimestamp(tc.ts)
		if err != nil || off != tc.off || rt != tc.rt || found != tc.found {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d, %v", tc.ts, off, rt, found, err, tc.off, tc.rt, tc.found)
		}
	}
	if ts, off := l.MaxTimestamp(); ts != 600 || off != 7 {
		t.Fatalf("MaxTimestamp = %d, %d", ts, off)
	}
	if err := l.SetLogStartOffset(1); err != nil {
		t.Fatal(err)
	}
	if off, _, _, _ := l.OffsetForTimestamp(0); off != 1 {
		t.Fatalf("below log start: %d", off)
	}
}

func TestOffsetForTimestampManySegments(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.IndexIntervalBytes = 64
	l := openT(t, dir, cfg, Options{})
	for i := range 400 {
		appendT(t, l, mkBatch(rec{int64(10 * i), []byte("x")}, rec{int64(10*i + 5), []byte("y")}), 0)
	}
	check := func(l *Log) {
		t.Helper()
		for i := 0; i < 400; i += 7 {
			off, ts, found, err := l.OffsetForTimestamp(int64(10*i + 3))
			if err != nil || !found || off != int64(2*i+1) || ts != int64(10*i+5) {
				t.Fatalf("ts %d: %d %d %v %v", 10*i+3, off, ts, found, err)
			}
		}
	}
	check(l)
	l.Close()
	check(openT(t, dir, cfg, Options{}))
}

func TestMaxTimestampEmpty(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig(), Options{})
	if ts, off := l.MaxTimestamp(); ts != -1 || off != -1 {
		t.Fatalf("empty: %d %d", ts, off)
	}
	if _, _, found, err := l.OffsetForTimestamp(0); found || err != nil {
		t.Fatalf("empty: %v %v", found, err)
	}
}

func TestTruncate(t *testing.T) {
	// 30 batches of 3 records, several segments; epochs 1, 2, 3 from
	// offsets 0, 30, 60.
	build := func(t *testing.T) (*Log, string) {
		dir := t.TempDir()
		l := openT(t, dir, testConfig(), Options{})
		for i := range 30 {
			appendT(t, l, simpleBatch(3, 100, int64(i)), int32(1+i/10))
		}
		return l, dir
	}
	tests := []struct {
		name      string
		to        int64
		wantLEO   int64
		wantStart int64
		wantEpoch int32
	}{
		{"at a batch boundary", 45, 45, 0, 2},
		{"inside a batch drops the whole batch", 46, 45, 0, 2},
		{"at a segment start", 0, 0, 0, -1},
		{"at an epoch start", 60, 60, 0, 2},
		{"at LEO is a no-op", 90, 90, 0, 3},
		{"beyond LEO is a no-op", 1000, 90, 0, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, dir := build(t)
			if err := l.Truncate(tc.to); err != nil {
				t.Fatal(err)
			}
			check := func(l *Log) {
				t.Helper()
				if l.LogEndOffset() != tc.wantLEO || l.LogStartOffset() != tc.wantStart || l.LatestEpoch() != tc.wantEpoch {
					t.Fatalf("LEO %d start %d epoch %d; want %d %d %d", l.LogEndOffset(), l.LogStartOffset(), l.LatestEpoch(),
						tc.wantLEO, tc.wantStart, tc.wantEpoch)
				}
				hs := readAllBatches(t, l, l.LogStartOffset())
				if len(hs) != int(tc.wantLEO/3) {
					t.Fatalf("%d batches", len(hs))
				}
			}
			check(l)
			for _, s := range l.Segments() {
				if s.NextOffset > tc.wantLEO {
					t.Fatalf("segment %+v past LEO", s)
				}
			}
			// Both a crash and a clean restart keep the truncation.
			crash(l)
			l = openT(t, dir, testConfig(), Options{})
			check(l)
			l.Close()
			l = openT(t, dir, testConfig(), Options{})
			check(l)
			res := appendT(t, l, simpleBatch(2, 10, 99), 7)
			if res.FirstOffset != tc.wantLEO {
				t.Fatalf("append after truncate at %d", res.FirstOffset)
			}
			if e, end := l.EndOffsetForEpoch(7); e != 7 || end != tc.wantLEO+2 {
				t.Fatalf("epoch 7: %d %d", e, end)
			}
		})
	}
}

func TestTruncateBelowLogStart(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{})
	for range 20 {
		appendT(t, l, simpleBatch(3, 200, 1), 1)
	}
	if err := l.SetLogStartOffset(40); err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(30); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 30 || l.LogEndOffset() != 30 || len(l.Segments()) != 1 || l.Size() != 0 {
		t.Fatalf("start %d LEO %d segs %+v", l.LogStartOffset(), l.LogEndOffset(), l.Segments())
	}
	if res := appendT(t, l, simpleBatch(1, 1, 1), 2); res.FirstOffset != 30 {
		t.Fatalf("append at %d", res.FirstOffset)
	}
	l.Close()
	l = openT(t, dir, testConfig(), Options{})
	if l.LogStartOffset() != 30 || l.LogEndOffset() != 31 {
		t.Fatalf("reopened start %d LEO %d", l.LogStartOffset(), l.LogEndOffset())
	}
}

// Reset starts an empty log at an offset beyond the log end (a follower
// far behind its leader's log start), durably: a crash right after keeps
// the new start, and appends continue from there.
func TestReset(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{})
	for range 10 {
		appendT(t, l, simpleBatch(3, 200, 1), 1)
	}
	if err := l.Reset(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.Size() != 0 || l.LatestEpoch() != -1 {
		t.Fatalf("after reset: start %d LEO %d size %d epoch %d", l.LogStartOffset(), l.LogEndOffset(), l.Size(), l.LatestEpoch())
	}
	b := simpleBatch(2, 100, 1)
	binary.BigEndian.PutUint64(b, 1000) // a follower's batch keeps the leader's offsets
	binary.BigEndian.PutUint32(b[12:], 7)
	if _, err := l.AppendWithOffsets(b); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crash(l)
	l = openT(t, dir, testConfig(), Options{})
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1002 || l.LatestEpoch() != 7 {
		t.Fatalf("after restart: start %d LEO %d epoch %d", l.LogStartOffset(), l.LogEndOffset(), l.LatestEpoch())
	}
}

func TestEndOffsetForEpoch(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{})
	if e, o := l.EndOffsetForEpoch(0); e != -1 || o != -1 {
		t.Fatalf("empty: %d %d", e, o)
	}
	// epoch 2: [0,10), epoch 4: [10,25), epoch 5: [25,30)
	for _, step := range []struct {
		epoch int32
		n     int
	}{{2, 10}, {4, 15}, {5, 5}} {
		for range step.n {
			appendT(t, l, simpleBatch(1, 10, 1), step.epoch)
		}
	}
	// A stale, lower epoch does not enter the cache.
	appendT(t, l, simpleBatch(1, 10, 1), 3)
	tests := []struct {
		req       int32
		wantEpoch int32
		wantEnd   int64
	}{
		{-1, -1, -1},
		{0, 0, 0}, // below the first epoch: Kafka answers the first start offset
		{2, 2, 10},
		{3, 2, 10},
		{4, 4, 25},
		{5, 5, 31},
		{6, -1, -1},
	}
	check := func(l *Log) {
		t.Helper()
		for _, tc := range tests {
			if e, o := l.EndOffsetForEpoch(tc.req); e != tc.wantEpoch || o != tc.wantEnd {
				t.Errorf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", tc.req, e, o, tc.wantEpoch, tc.wantEnd)
			}
		}
	}
	check(l)
	if l.LatestEpoch() != 5 {
		t.Fatal(l.LatestEpoch())
	}
	l.Close()
	check(openT(t, dir, testConfig(), Options{}))
}

func TestAppendWithOffsets(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{})
	mk := func(base int64, n int, epoch int32) []byte {
		b := simpleBatch(n, 50, 1)
		putHeader(b, base, epoch)
		return b
	}
	var in []byte
	in = append(in, mk(0, 3, 1)...)
	in = append(in, mk(5, 2, 1)...) // gap 3-4 (compacted away)
	in = append(in, mk(7, 1, 2)...)
	res, err := l.AppendWithOffsets(in)
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstOffset != 0 || res.LastOffset != 7 || l.LogEndOffset() != 8 {
		t.Fatalf("%+v LEO %d", res, l.LogEndOffset())
	}
	if e, o := l.EndOffsetForEpoch(1); e != 1 || o != 7 {
		t.Fatalf("epoch 1: %d %d", e, o)
	}
	// A read in the gap returns the next batch.
	data, err := l.Read(3, 1000, 1<<62, false)
	if err != nil || peekBase(data) != 5 {
		t.Fatalf("read in gap: %v", err)
	}
	for _, bad := range [][]byte{mk(7, 1, 2), mk(0, 1, 2), append(mk(10, 2, 2), mk(11, 1, 2)...)} {
		if _, err := l.AppendWithOffsets(bad); !errors.Is(err, ErrOffsetOrder) {
			t.Fatalf("out of order: %v", err)
		}
	}
	if l.LogEndOffset() != 8 {
		t.Fatal("failed append moved the LEO")
	}
	if _, err := l.AppendWithOffsets(mk(20, 1, 3)); err != nil || l.LogEndOffset() != 21 {
		t.Fatalf("gap append: %v LEO %d", err, l.LogEndOffset())
	}
}

func TestAppendRejectsMalformed(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig(), Options{})
	good := simpleBatch(2, 10, 1)
	badMagic := append([]byte(nil), good...)
	badMagic[offMagic] = 1
	for name, b := range map[string][]byte{
		"empty":          nil,
		"short":          good[:30],
		"torn":           good[:len(good)-1],
		"trailing":       append(append([]byte(nil), good...), 1, 2, 3),
		"magic 1":        badMagic,
		"length too big": func() []byte { b := append([]byte(nil), good...); b[offLength] = 0x7f; return b }(),
	} {
		if _, err := l.Append(b, 0); !errors.Is(err, ErrInvalidBatch) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("LEO %d size %d", l.LogEndOffset(), l.Size())
	}
}

func TestMultiBatchAppend(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig(), Options{})
	var in []byte
	for i := range 5 {
		in = append(in, simpleBatch(i+1, 10, int64(i))...)
	}
	res := appendT(t, l, in, 1)
	if res.FirstOffset != 0 || res.LastOffset != 14 || res.MaxTimestamp != 4 {
		t.Fatalf("%+v", res)
	}
	hs := readAllBatches(t, l, 0)
	if len(hs) != 5 || hs[4].BaseOffset != 10 {
		t.Fatalf("%+v", hs)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	l := openT(t, dir, cfg, Options{})
	for i := range 50 {
		appendT(t, l, simpleBatch(2, 150, int64(i*10)), int32(i/20))
	}
	if err := l.SetLogStartOffset(7); err != nil {
		t.Fatal(err)
	}
	if err := l.SaveProducerSnapshot(60, []byte("state")); err != nil {
		t.Fatal(err)
	}
	before := l.Segments()
	ts, tsOff := l.MaxTimestamp()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker: %v", err)
	}
	if _, err := l.Append(simpleBatch(1, 1, 1), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := l.Read(10, 10, 100, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	l = openT(t, dir, cfg, Options{})
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker not removed on open: %v", err)
	}
	after := l.Segments()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("segments\n%v\n%v", before, after)
	}
	if l.LogStartOffset() != 7 || l.LogEndOffset() != 100 || l.LatestEpoch() != 2 {
		t.Fatalf("start %d LEO %d epoch %d", l.LogStartOffset(), l.LogEndOffset(), l.LatestEpoch())
	}
	if ts2, off2 := l.MaxTimestamp(); ts2 != ts || off2 != tsOff {
		t.Fatalf("max ts %d@%d, was %d@%d", ts2, off2, ts, tsOff)
	}
	off, data, err := l.LoadProducerSnapshot()
	if err != nil || off != 60 || string(data) != "state" {
		t.Fatalf("snapshot %d %q %v", off, data, err)
	}
	readAllBatches(t, l, 7)
	if res := appendT(t, l, simpleBatch(1, 1, 1), 2); res.FirstOffset != 100 {
		t.Fatal(res)
	}
}

func TestProducerSnapshot(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{})
	if off, data, err := l.LoadProducerSnapshot(); off != -1 || data != nil || err != nil {
		t.Fatalf("none: %d %v %v", off, data, err)
	}
	for range 10 {
		appendT(t, l, simpleBatch(1, 10, 1), 0)
	}
	if err := l.SaveProducerSnapshot(8, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := l.SaveProducerSnapshot(9, []byte{4}); err != nil {
		t.Fatal(err)
	}
	if off, data, err := l.LoadProducerSnapshot(); off != 9 || !bytes.Equal(data, []byte{4}) || err != nil {
		t.Fatalf("%d %v %v", off, data, err)
	}
	// Corrupt: a typed error.
	p := filepath.Join(dir, producerSnapshotFile)
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 1
	os.WriteFile(p, b, 0o644)
	var ce *CorruptionError
	if _, _, err := l.LoadProducerSnapshot(); !errors.As(err, &ce) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
	// Truncation below the snapshot's offset drops it.
	if err := l.SaveProducerSnapshot(9, []byte{4}); err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if off, _, err := l.LoadProducerSnapshot(); off != -1 || err != nil {
		t.Fatalf("after truncate: %d %v", off, err)
	}
}

func TestScanBatches(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig(), Options{})
	for i := range 40 {
		b := simpleBatch(3, 100, 1)
		putProducer(b, int64(i%4), int32(i))
		appendT(t, l, b, 0)
	}
	var got []int64
	err := l.ScanBatches(50, func(h batch.Header) error {
		got = append(got, h.BaseOffset)
		if h.ProducerID != (h.BaseOffset/3)%4 {
			t.Fatalf("producer id %d at %d", h.ProducerID, h.BaseOffset)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 24 || got[0] != 48 || got[23] != 117 {
		t.Fatalf("%v", got)
	}
	stop := errors.New("stop")
	n := 0
	if err := l.ScanBatches(0, func(batch.Header) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("stop: %v %d", err, n)
	}
}

// putProducer sets the producer id and base sequence (inside the CRC, so it
// recomputes it).
func putProducer(b []byte, pid int64, seq int32) {
	be := func(p []byte, v uint64, n int) {
		for i := n - 1; i >= 0; i-- {
			p[i] = byte(v)
			v >>= 8
		}
	}
	be(b[offProducerID:], uint64(pid), 8)
	be(b[offBaseSequence:], uint64(seq), 4)
	fixCRC(b)
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Config){
		func(c *Config) { c.SegmentBytes = 0 },
		func(c *Config) { c.SegmentBytes = 1 << 31 },
		func(c *Config) { c.SegmentMs = 0 },
		func(c *Config) { c.IndexIntervalBytes = -1 },
		func(c *Config) { c.SegmentIndexBytes = 11 },
		func(c *Config) { c.RetentionMs = -2 },
		func(c *Config) { c.RetentionBytes = -2 },
	} {
		c := DefaultConfig()
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("accepted %+v", c)
		}
		if _, err := Open(t.TempDir(), c, Options{}); err == nil {
			t.Errorf("Open accepted %+v", c)
		}
	}
}

func TestSetConfig(t *testing.T) {
	l := openT(t, t.TempDir(), DefaultConfig(), Options{Logger: quietLogger()})
	b := simpleBatch(1, 100, 1)
	appendT(t, l, b, 0)
	appendT(t, l, b, 0)
	if n := len(l.Segments()); n != 1 {
		t.Fatal(n)
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(len(b))
	l.SetConfig(cfg)
	appendT(t, l, b, 0)
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("new segment.bytes ignored: %d segments", n)
	}
	cfg.SegmentBytes = 0
	l.SetConfig(cfg) // invalid: ignored
	appendT(t, l, b, 0)
	if n := len(l.Segments()); n != 3 {
		t.Fatalf("%d segments", n)
	}
}

func TestDelete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	l, err := Open(dir, testConfig(), Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	appendT(t, l, simpleBatch(1, 1, 1), 0)
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dir remains: %v", err)
	}
	if _, err := l.Append(simpleBatch(1, 1, 1), 0); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}
