package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/batch"
)

// compactTestConfig rolls every few batches and groups up to 16 KiB.
func compactTestConfig() Config {
	c := testConfig()
	c.SegmentBytes = 1024
	c.IndexIntervalBytes = 128
	return c
}

// fillKeyed appends n batches of 3 records over nkeys keys, values naming
// their batch and position. Timestamps are the clock's.
func fillKeyed(t testing.TB, l *Log, clk *testClock, n, nkeys int, codec int8) {
	t.Helper()
	for i := range n {
		ts := clk.Now().UnixMilli()
		var recs []krec
		for j := range 3 {
			k := fmt.Sprintf("k%02d", (i*3+j*5)%nkeys)
			recs = append(recs, kv(k, fmt.Sprintf("v%d.%d", i, j), ts+int64(j)))
		}
		appendT(t, l, keyedBatch(t, codec, recs...), 1)
		clk.Add(time.Millisecond)
	}
}

func TestCompactKeepsLatestPerKey(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	cfg := compactTestConfig()
	l := openT(t, dir, cfg, Options{Now: clk.Now})
	fillKeyed(t, l, clk, 40, 11, 0)
	before := logRecords(t, l)
	segsBefore := l.Segments()
	active := segsBefore[len(segsBefore)-1]
	activeBytes := readFileT(t, segFile(dir, active.BaseOffset, logSuffix))
	leo := l.LogEndOffset()
	if len(segsBefore) < 5 {
		t.Fatalf("want several segments, have %d", len(segsBefore))
	}

	l.SetConfig(func() Config { c := cfg; c.SegmentBytes = 4096; return c }()) // groups of up to 4 KiB
	st := compactT(t, l, DefaultCompactConfig())
	want := latestOnly(before, active.BaseOffset)
	sameRecords(t, "after compaction", logRecords(t, l), want)
	if st.Skipped != "" || st.SegmentsCleaned != len(segsBefore)-1 || st.RecordsRemoved != int64(len(before)-len(want)) ||
		st.BytesAfter >= st.BytesBefore || st.TombstonesRemoved != 0 {
		t.Fatalf("stats %+v; %d records removed", st, len(before)-len(want))
	}
	if l.LogEndOffset() != leo || l.LogStartOffset() != 0 {
		t.Fatalf("LEO %d start %d, want %d 0", l.LogEndOffset(), l.LogStartOffset(), leo)
	}
	segsAfter := l.Segments()
	if len(segsAfter) >= len(segsBefore) {
		t.Fatalf("%d segments after, %d before: small segments not grouped", len(segsAfter), len(segsBefore))
	}
	if got := segsAfter[len(segsAfter)-1]; got != active {
		t.Fatalf("active segment %+v, was %+v", got, active)
	}
	if !bytes.Equal(readFileT(t, segFile(dir, active.BaseOffset, logSuffix)), activeBytes) {
		t.Fatal("active segment changed")
	}
	for i := 1; i < len(segsAfter); i++ {
		if segsAfter[i].BaseOffset != segsAfter[i-1].NextOffset {
			t.Fatalf("segment %d starts at %d, previous ends at %d", i, segsAfter[i].BaseOffset, segsAfter[i-1].NextOffset)
		}
	}
	// Every offset still reads: the batch holding it or the next one.
	for off := int64(0); off < leo; off++ {
		data, err := l.Read(off, 1, 1<<62, true)
		if err != nil || len(data) == 0 {
			t.Fatalf("Read(%d): %d bytes, %v", off, len(data), err)
		}
		if h, _ := ParseBatchHeader(data); h.LastOffset() < off {
			t.Fatalf("Read(%d) returned batch ending at %d", off, h.LastOffset())
		}
	}
	// OffsetForTimestamp finds the first surviving record at or after T.
	for _, r := range before {
		off, ts, ok, err := l.OffsetForTimestamp(r.ts)
		if err != nil {
			t.Fatal(err)
		}
		var w *got
		for i := range want {
			if want[i].ts >= r.ts {
				w = &want[i]
				break
			}
		}
		if !ok || off != w.off || ts != w.ts {
			t.Fatalf("OffsetForTimestamp(%d) = %d %d %v, want %v", r.ts, off, ts, ok, w)
		}
	}
	// Idempotent: nothing is dirty now.
	if st := compactT(t, l, DefaultCompactConfig()); st.Skipped == "" || st.SegmentsCleaned != 0 {
		t.Fatalf("second compaction: %+v", st)
	}
	if fd := l.cleaner.firstDirty(0, leo); fd != active.BaseOffset {
		t.Fatalf("first dirty offset %d, want %d", fd, active.BaseOffset)
	}
	// A clean reopen and a crash recovery (which re-validates every
	// batch) read the same.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openT(t, dir, cfg, Options{Now: clk.Now})
	sameRecords(t, "after reopen", logRecords(t, l2), want)
	crash(l2)
	os.Remove(filepath.Join(dir, recoveryPointFile))
	l3 := openT(t, dir, cfg, Options{Now: clk.Now})
	sameRecords(t, "after recovery", logRecords(t, l3), want)
	if l3.NeedsCompaction(CompactConfig{MaxCompactionLagMs: math.MaxInt64, MaxOffset: math.MaxInt64}) {
		t.Fatal("needs compaction after reopen: the checkpoint was lost")
	}
}

func TestCompactTombstones(t *testing.T) {
	clk := newClock()
	l := openT(t, t.TempDir(), compactTestConfig(), Options{Now: clk.Now})
	now := clk.Now().UnixMilli()
	appendT(t, l, keyedBatch(t, 0, kv("a", "1", now), kv("b", "1", now)), 0)
	// A tombstone with an ancient timestamp: a timestamp rule would drop
	// it at once; Kafka's rule keeps it delete.retention.ms after the
	// clean that first passes it.
	appendT(t, l, keyedBatch(t, 0, tomb("a", 1)), 0)
	appendT(t, l, keyedBatch(t, 0, kv("c", "1", now)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, tomb("c", now)), 0) // in the active segment: never cleaned
	cfg := DefaultCompactConfig()
	cfg.DeleteRetentionMs = time.Hour.Milliseconds()
	cfg.MinCleanableDirtyRatio = 0.99

	st := compactT(t, l, cfg)
	if st.RecordsRemoved != 1 || st.TombstonesRemoved != 0 {
		t.Fatalf("first clean: %+v", st)
	}
	want := []got{
		{off: 1, key: "b", value: "1", ts: now},
		{off: 2, key: "a", tombstone: true, ts: 1},
		{off: 3, key: "c", value: "1", ts: now},
		{off: 4, key: "c", tombstone: true, ts: now},
	}
	sameRecords(t, "first clean", logRecords(t, l), want)

	clk.Add(time.Hour - time.Millisecond)
	if l.NeedsCompaction(cfg) {
		t.Fatal("needs compaction before the delete horizon")
	}
	if st := compactT(t, l, cfg); st.Skipped == "" {
		t.Fatalf("clean before the horizon: %+v", st)
	}
	sameRecords(t, "before the horizon", logRecords(t, l), want)

	clk.Add(time.Millisecond)
	if !l.NeedsCompaction(cfg) {
		t.Fatal("no compaction asked for at the delete horizon")
	}
	st = compactT(t, l, cfg)
	if st.RecordsRemoved != 1 || st.TombstonesRemoved != 1 {
		t.Fatalf("clean at the horizon: %+v", st)
	}
	sameRecords(t, "at the horizon", logRecords(t, l), []got{want[0], want[2], want[3]})
	if l.NeedsCompaction(cfg) {
		t.Fatal("still needs compaction with no tombstone left")
	}
	// The emptied batch went: it did not end its segment.
	if hs := readAllBatches(t, l, 0); len(hs) != 3 || hs[1].BaseOffset != 3 {
		t.Fatalf("batches %+v", hs)
	}
}

func TestCompactTombstoneSupersededAndHorizonAcrossRestart(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	l := openT(t, dir, compactTestConfig(), Options{Now: clk.Now})
	now := clk.Now().UnixMilli()
	appendT(t, l, keyedBatch(t, 0, kv("a", "1", now), tomb("b", now)), 0)
	appendT(t, l, keyedBatch(t, 0, kv("z", "1", now)), 0)
	rollT(t, l)
	cfg := DefaultCompactConfig()
	cfg.DeleteRetentionMs = 1000
	compactT(t, l, cfg)

	// A later round passes more data; b's horizon stays that of the
	// first round, across a restart.
	clk.Add(600 * time.Millisecond)
	appendT(t, l, keyedBatch(t, 0, tomb("c", now), kv("z", "2", now)), 0)
	rollT(t, l)
	compactT(t, l, cfg)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, compactTestConfig(), Options{Now: clk.Now})
	clk.Add(400 * time.Millisecond) // b's horizon, not c's
	if !l.NeedsCompaction(cfg) {
		t.Fatal("no compaction asked for at b's horizon after a restart")
	}
	st := compactT(t, l, cfg)
	if st.TombstonesRemoved != 1 {
		t.Fatalf("%+v", st)
	}
	sameRecords(t, "b gone, c kept", logRecords(t, l), []got{
		{off: 0, key: "a", value: "1", ts: now},
		{off: 3, key: "c", tombstone: true, ts: now},
		{off: 4, key: "z", value: "2", ts: now},
	})
	// A new value for c supersedes its tombstone whatever the horizon.
	appendT(t, l, keyedBatch(t, 0, kv("c", "2", now)), 0)
	rollT(t, l)
	compactT(t, l, cfg)
	sameRecords(t, "c superseded", logRecords(t, l), []got{
		{off: 0, key: "a", value: "1", ts: now},
		{off: 4, key: "z", value: "2", ts: now},
		{off: 5, key: "c", value: "2", ts: now},
	})
}

func TestCompactMinCompactionLag(t *testing.T) {
	clk := newClock()
	l := openT(t, t.TempDir(), compactTestConfig(), Options{Now: clk.Now})
	old := clk.Now().Add(-2 * time.Hour).UnixMilli()
	young := clk.Now().Add(-10 * time.Minute).UnixMilli()
	appendT(t, l, keyedBatch(t, 0, kv("k", "1", old), kv("k", "2", old)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("k", "3", young)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("x", "1", young)), 0)
	cfg := DefaultCompactConfig()
	cfg.MinCompactionLagMs = time.Hour.Milliseconds()
	cfg.MinCleanableDirtyRatio = 0

	st := compactT(t, l, cfg)
	if st.RecordsRemoved != 1 || st.SegmentsCleaned != 1 {
		t.Fatalf("%+v", st)
	}
	sameRecords(t, "young segment not mapped", logRecords(t, l), []got{
		{off: 1, key: "k", value: "2", ts: old},
		{off: 2, key: "k", value: "3", ts: young},
		{off: 3, key: "x", value: "1", ts: young},
	})
	if l.NeedsCompaction(cfg) {
		t.Fatal("needs compaction while the dirty segment is younger than the lag")
	}
	if st := compactT(t, l, cfg); st.Skipped == "" {
		t.Fatalf("%+v", st)
	}
	clk.Add(51 * time.Minute)
	if !l.NeedsCompaction(cfg) {
		t.Fatal("no compaction once the lag passed")
	}
	compactT(t, l, cfg)
	sameRecords(t, "after the lag", logRecords(t, l), []got{
		{off: 2, key: "k", value: "3", ts: young},
		{off: 3, key: "x", value: "1", ts: young},
	})
}

func TestNeedsCompactionRatioAndMaxLag(t *testing.T) {
	clk := newClock()
	l := openT(t, t.TempDir(), compactTestConfig(), Options{Now: clk.Now})
	cfg := DefaultCompactConfig()
	if l.NeedsCompaction(cfg) {
		t.Fatal("empty log needs compaction")
	}
	// 8 clean segments of distinct keys.
	for i := range 8 {
		appendT(t, l, keyedBatch(t, 0, kv(fmt.Sprint("c", i), string(make([]byte, 200)), clk.Now().UnixMilli())), 0)
		rollT(t, l)
	}
	if !l.NeedsCompaction(cfg) {
		t.Fatal("all-dirty log does not need compaction")
	}
	compactT(t, l, cfg)
	if l.NeedsCompaction(cfg) {
		t.Fatal("needs compaction right after one")
	}
	// Dirty segments, each as large as a clean one, hour-old by their
	// timestamps: the ratio passes 0.5 with the 9th.
	lagged := DefaultCompactConfig()
	lagged.MinCleanableDirtyRatio = 0.99
	lagged.MaxCompactionLagMs = time.Hour.Milliseconds()
	sizes := l.Segments()
	for i := range 9 {
		ts := clk.Now().Add(-30 * time.Minute).UnixMilli()
		appendT(t, l, keyedBatch(t, 0, kv(fmt.Sprint("d", i), string(make([]byte, 200)), ts)), 0)
		rollT(t, l)
		if got, want := l.NeedsCompaction(cfg), i >= 8; got != want {
			t.Fatalf("after %d dirty segments (clean %d segments): NeedsCompaction %v", i+1, len(sizes)-1, got)
		}
		if l.NeedsCompaction(lagged) {
			t.Fatal("max lag forced a clean before it passed")
		}
	}
	clk.Add(31 * time.Minute)
	if !l.NeedsCompaction(lagged) {
		t.Fatal("max.compaction.lag.ms passed and no compaction asked for")
	}
	if st := compactT(t, l, lagged); st.SegmentsCleaned == 0 {
		t.Fatalf("%+v", st)
	}
	if l.NeedsCompaction(lagged) {
		t.Fatal("still needs compaction")
	}
}

func TestCompactMaxOffsetBound(t *testing.T) {
	clk := newClock()
	l := openT(t, t.TempDir(), compactTestConfig(), Options{Now: clk.Now})
	now := clk.Now().UnixMilli()
	appendT(t, l, keyedBatch(t, 0, kv("k", "1", now)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("k", "2", now)), 0) // above the high watermark
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("x", "1", now)), 0)
	cfg := DefaultCompactConfig()
	cfg.MaxOffset = 1
	compactT(t, l, cfg)
	if len(logRecords(t, l)) != 3 {
		t.Fatal("a record above MaxOffset superseded one below")
	}
	cfg.MaxOffset = 0
	if l.NeedsCompaction(cfg) {
		t.Fatal("MaxOffset 0 needs compaction")
	}
	cfg.MaxOffset = 2
	compactT(t, l, cfg)
	if recs := logRecords(t, l); len(recs) != 2 || recs[0].value != "2" {
		t.Fatalf("%v", recs)
	}
}

// Every codec: batches are decompressed, filtered and recompressed with
// their codec, and stay valid for the broker and for a client.
func TestCompactCompressed(t *testing.T) {
	codecs := []struct {
		name  string
		codec int8
	}{
		{"gzip", batch.CodecGzip}, {"snappy", batch.CodecSnappy}, {"snappy-xerial", codecXerial},
		{"lz4", batch.CodecLZ4}, {"zstd", batch.CodecZstd},
	}
	dec := kgo.DefaultDecompressor()
	for _, tc := range codecs {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			l := openT(t, t.TempDir(), compactTestConfig(), Options{Now: clk.Now})
			fillKeyed(t, l, clk, 12, 5, tc.codec)
			// A batch whose every record is superseded, not last in its
			// segment: dropped.
			appendT(t, l, keyedBatch(t, tc.codec, kv("gone", "1", 1), kv("gone", "2", 1)), 0)
			appendT(t, l, keyedBatch(t, tc.codec, kv("gone", "3", 1), kv("k00", "last", 1)), 0)
			rollT(t, l)
			appendT(t, l, keyedBatch(t, 0, kv("tail", "1", 1)), 0)
			before := logRecords(t, l)
			leo := l.LogEndOffset()
			compactT(t, l, DefaultCompactConfig())
			sameRecords(t, "compacted", logRecords(t, l), latestOnly(before, leo-1))
			wantCodec := int(tc.codec)
			if wantCodec == codecXerial {
				wantCodec = batch.CodecSnappy
			}
			for _, h := range readAllBatches(t, l, 0) {
				data, err := l.Read(h.BaseOffset, 1, 1<<62, true)
				if err != nil {
					t.Fatal(err)
				}
				data = data[:h.Size()]
				if _, err := CheckBatch(data); err != nil {
					t.Fatal(err)
				}
				if h.RecordCount == 0 {
					if h.Codec() != 0 {
						t.Fatalf("empty batch at %d is compressed", h.BaseOffset)
					}
					continue
				}
				if h.BaseOffset == leo-1 {
					continue // the uncompressed tail
				}
				if h.Codec() != wantCodec {
					t.Fatalf("batch at %d: codec %d, want %d", h.BaseOffset, h.Codec(), wantCodec)
				}
				if tc.codec == codecXerial && !bytes.HasPrefix(data[batch.HeaderSize:], xerialMagic) {
					t.Fatalf("batch at %d lost its xerial framing", h.BaseOffset)
				}
				// A client decompresses it too.
				raw, err := dec.Decompress(data[batch.HeaderSize:], kgo.CompressionCodecType(h.Codec()))
				if err != nil {
					t.Fatalf("client decompress batch at %d: %v", h.BaseOffset, err)
				}
				if _, err := walkRecords(raw, h.RecordCount, h.LastOffsetDelta, nil); err != nil {
					t.Fatalf("batch at %d: %v", h.BaseOffset, err)
				}
			}
		})
	}
}

// A rewritten batch keeps what producer state and offset math rely on.
func TestCompactKeepsBatchHeaderFields(t *testing.T) {
	l := openT(t, t.TempDir(), compactTestConfig(), Options{})
	b := keyedBatch(t, batch.CodecZstd, kv("a", "1", 100), kv("b", "1", 150), kv("a", "2", 120), kv("c", "1", 130), kv("b", "2", 110))
	binary := func(off int, v uint64, n int) {
		for i := n - 1; i >= 0; i-- {
			b[off+i] = byte(v)
			v >>= 8
		}
	}
	binary(offProducerID, 42, 8)
	binary(offProducerEpoch, 3, 2)
	binary(offBaseSequence, 7, 4)
	fixCRC(b)
	appendT(t, l, keyedBatch(t, 0, kv("pad", "x", 1)), 5)
	appendT(t, l, b, 6)
	appendT(t, l, keyedBatch(t, 0, kv("c", "2", 200)), 6)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("z", "1", 1)), 6)
	orig := readAllBatches(t, l, 0)[1]
	compactT(t, l, DefaultCompactConfig())
	var h batch.Header
	if err := l.ScanBatches(1, func(x batch.Header) error { h = x; return errStop }); !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	if h.BaseOffset != 1 || h.LeaderEpoch != 6 || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != 7 ||
		h.LastOffsetDelta != 4 || h.BaseTimestamp != 100 || h.Attributes != orig.Attributes {
		t.Fatalf("rewritten header %+v, was %+v", h, orig)
	}
	// a@3 (offset delta 2) and b@5 (delta 4) stay; maxTimestamp is theirs.
	if h.RecordCount != 2 || h.MaxTimestamp != 120 {
		t.Fatalf("rewritten header %+v", h)
	}
	data, err := l.Read(1, 1, 1<<62, true)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := batch.Records(data[:h.Size()], nil)
	if err != nil || len(recs) != 2 || recs[0].OffsetDelta != 2 || recs[1].OffsetDelta != 4 ||
		recs[0].TimestampDelta != 20 || recs[1].TimestampDelta != 10 || string(recs[1].Headers[0].Value) != "hv-4" {
		t.Fatalf("records %+v, %v", recs, err)
	}
}

// A committed transactional batch is compacted like any other, keeping
// its producer fields and transactional bit; an aborted one goes whole and
// supersedes nothing; control batches pass untouched.
func TestCompactTransactions(t *testing.T) {
	l := openT(t, t.TempDir(), compactTestConfig(), Options{})
	appendT(t, l, keyedBatch(t, 0, kv("k", "1", 1)), 0)            // 0
	committed := txnBatchT(t, 7, kv("k", "2", 2), kv("j", "a", 2)) // 1-2
	appendT(t, l, committed, 0)
	commit := appendMarkerT(t, l, 7, 1, nil)                                                                  // 3
	appendT(t, l, txnBatchT(t, 8, kv("k", "3", 3), kv("j", "b", 3)), 0)                                       // 4-5
	appendMarkerT(t, l, 8, 0, &AbortedTxn{ProducerID: 8, FirstOffset: 4, LastOffset: 6, LastStableOffset: 7}) // 6
	rollT(t, l)
	appendT(t, l, txnBatchT(t, 8, kv("k", "4", 4)), 0)                                                          // 7
	appendMarkerT(t, l, 8, 1, nil)                                                                              // 8
	appendT(t, l, txnBatchT(t, 7, kv("j", "c", 5), tomb("k", 5)), 0)                                            // 9-10
	appendMarkerT(t, l, 7, 0, &AbortedTxn{ProducerID: 7, FirstOffset: 9, LastOffset: 11, LastStableOffset: 12}) // 11
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("z", "1", 6)), 0) // 12

	visible := committedRecords(t, l)
	sameRecords(t, "read_committed before", visible, []got{
		{off: 0, key: "k", value: "1", ts: 1}, {off: 1, key: "k", value: "2", ts: 2}, {off: 2, key: "j", value: "a", ts: 2},
		{off: 7, key: "k", value: "4", ts: 4}, {off: 12, key: "z", value: "1", ts: 6},
	})
	aborted := abortedT(t, l, 0, l.LogEndOffset())
	st := compactT(t, l, DefaultCompactConfig())
	// k@0, k@1 superseded; the aborted records 4, 5, 9 and 10 gone.
	if st.RecordsRemoved != 6 {
		t.Fatalf("%+v", st)
	}
	want := latestOnly(visible, 12)
	sameRecords(t, "read_committed after", committedRecords(t, l), want)
	// The log holds nothing else but the markers.
	var data, markers []int64
	for _, h := range readAllBatches(t, l, 0) {
		if h.Control() {
			markers = append(markers, h.BaseOffset)
		} else if h.RecordCount > 0 {
			data = append(data, h.BaseOffset)
		}
	}
	if !slices.Equal(markers, []int64{3, 6, 8, 11}) || !slices.Equal(data, []int64{1, 7, 12}) {
		t.Fatalf("markers at %v, data batches at %v", markers, data)
	}
	if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, aborted) {
		t.Fatalf("aborted %+v, want %+v", got, aborted)
	}
	// The rewritten committed batch keeps its header but for the records.
	b, err := l.Read(1, 1, 1<<62, true)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseBatchHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Transactional() || h.ProducerID != 7 || h.ProducerEpoch != 0 || h.BaseSequence != 0 ||
		h.LastOffsetDelta != 1 || h.RecordCount != 1 {
		t.Fatalf("rewritten batch %+v", h)
	}
	if b, err := l.Read(commit, 1, 1<<62, true); err != nil || peekBase(b) != commit || !bytes.Contains(b, []byte{0, 0, 0, 1}) {
		t.Fatalf("COMMIT marker: %v", err)
	}
	// A second round changes nothing.
	if st := compactT(t, l, DefaultCompactConfig()); st.RecordsRemoved != 0 {
		t.Fatalf("second round %+v", st)
	}
	sameRecords(t, "read_committed after a second round", committedRecords(t, l), want)
}

// An aborted batch that ends a group is kept as an empty batch, so the
// cleaned segment keeps its offset range.
func TestCompactAbortedLastBatchKeptEmpty(t *testing.T) {
	l := openT(t, t.TempDir(), compactTestConfig(), Options{})
	appendT(t, l, keyedBatch(t, 0, kv("k", "1", 1)), 0)                 // 0
	appendT(t, l, txnBatchT(t, 5, kv("k", "2", 2), kv("j", "a", 2)), 0) // 1-2
	rollT(t, l)
	appendMarkerT(t, l, 5, 0, &AbortedTxn{ProducerID: 5, FirstOffset: 1, LastOffset: 3, LastStableOffset: 4}) // 3
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("z", "1", 4)), 0) // 4
	// Each closed segment a group of its own.
	l.SetConfig(func() Config { c := compactTestConfig(); c.SegmentBytes = l.Segments()[0].Size; return c }())
	before := committedRecords(t, l)
	st := compactT(t, l, DefaultCompactConfig())
	if st.RecordsRemoved != 2 {
		t.Fatalf("%+v", st)
	}
	sameRecords(t, "read_committed", committedRecords(t, l), before)
	hs := readAllBatches(t, l, 0)
	if len(hs) != 4 || hs[1].BaseOffset != 1 || hs[1].RecordCount != 0 || !hs[1].Transactional() ||
		hs[1].ProducerID != 5 || hs[1].LastOffset() != 2 {
		t.Fatalf("batches %+v", hs)
	}
	if segs := l.Segments(); len(segs) != 3 || segs[0].NextOffset != 3 || segs[1].BaseOffset != 3 {
		t.Fatalf("segments %+v", segs)
	}
}

// txnBatchT is a transactional batch of producer pid, epoch 0, sequence 0.
func txnBatchT(t *testing.T, pid int64, recs ...krec) []byte {
	t.Helper()
	b := keyedBatch(t, 0, recs...)
	b[offAttributes+1] |= 0x10
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], 0)
	binary.BigEndian.PutUint32(b[offBaseSequence:], 0)
	fixCRC(b)
	return b
}

// appendMarkerT appends a control batch of producer pid: COMMIT (typ 1)
// or ABORT (typ 0, with its transaction index entry a). It returns its
// offset.
func appendMarkerT(t *testing.T, l *Log, pid int64, typ byte, a *AbortedTxn) int64 {
	t.Helper()
	b := keyedBatch(t, 0, krec{[]byte{0, 0, 0, typ}, []byte{0, 0, 0, 0, 0, 0}, 1})
	b[offAttributes+1] |= 0x30
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], 0)
	fixCRC(b)
	var es []AbortedTxn
	if a != nil {
		es = append(es, *a)
	}
	res, err := l.AppendTxn(b, 0, es)
	if err != nil {
		t.Fatal(err)
	}
	if a != nil && a.LastOffset != res.FirstOffset {
		t.Fatalf("ABORT marker at %d, entry says %d", res.FirstOffset, a.LastOffset)
	}
	return res.FirstOffset
}

// committedRecords is what a read_committed reader sees of the log: the
// records of data batches outside the aborted transactions.
func committedRecords(t *testing.T, l *Log) []got {
	t.Helper()
	aborted := abortedT(t, l, 0, l.LogEndOffset())
	ctrl := map[int64]bool{}
	for _, h := range readAllBatches(t, l, l.LogStartOffset()) {
		in := slices.ContainsFunc(aborted, func(a AbortedTxn) bool {
			return a.ProducerID == h.ProducerID && h.BaseOffset >= a.FirstOffset && h.BaseOffset < a.LastOffset
		})
		for o := h.BaseOffset; o <= h.LastOffset(); o++ {
			ctrl[o] = h.Control() || h.Transactional() && in
		}
	}
	var out []got
	for _, r := range logRecords(t, l) {
		if !ctrl[r.off] {
			out = append(out, r)
		}
	}
	return out
}

func TestCompactNullKeysKept(t *testing.T) {
	l := openT(t, t.TempDir(), compactTestConfig(), Options{})
	appendT(t, l, keyedBatch(t, 0, krec{nil, []byte("a"), 1}, kv("k", "1", 1), krec{nil, []byte("b"), 1}, kv("k", "2", 1)), 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("z", "1", 1)), 0)
	compactT(t, l, DefaultCompactConfig())
	recs := logRecords(t, l)
	if len(recs) != 4 || !recs[0].nullKey || !recs[1].nullKey || recs[2].value != "2" || !l.warnedNullKey {
		t.Fatalf("%v", recs)
	}
}

// With a map of a few keys the clean takes several rounds and ends where
// one big round does.
func TestCompactBoundedMap(t *testing.T) {
	clk := newClock()
	dir, ref := t.TempDir(), t.TempDir()
	cfg := compactTestConfig()
	l := openT(t, dir, cfg, Options{Now: clk.Now})
	fillKeyed(t, l, clk, 60, 40, 0)
	rollT(t, l)
	appendT(t, l, keyedBatch(t, 0, kv("tail", "1", 1)), 0)
	before := logRecords(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	copyDir(t, dir, ref)

	big := openT(t, ref, cfg, Options{Now: clk.Now})
	compactT(t, big, DefaultCompactConfig())
	want := logRecords(t, big)
	sameRecords(t, "one round", want, latestOnly(before, l.LogEndOffset()-1))

	l = openT(t, dir, cfg, Options{Now: clk.Now})
	small := DefaultCompactConfig()
	small.MaxMemoryBytes = 12 * mapSlotSize // 10 keys
	small.MinCleanableDirtyRatio = 0
	rounds := 0
	for l.NeedsCompaction(small) {
		if rounds++; rounds > 40 {
			t.Fatal("no progress")
		}
		prev := l.cleaner.firstDirty(0, l.LogEndOffset())
		st := compactT(t, l, small)
		if fd := l.cleaner.firstDirty(0, l.LogEndOffset()); fd <= prev || st.Skipped != "" {
			t.Fatalf("round %d: first dirty %d -> %d, %+v", rounds, prev, fd, st)
		}
	}
	if rounds < 4 {
		t.Fatalf("%d rounds: the map was not bounded", rounds)
	}
	sameRecords(t, "many rounds", logRecords(t, l), want)

	tiny := small
	tiny.MaxMemoryBytes = 2 * mapSlotSize // 1 key
	appendT(t, l, keyedBatch(t, 0, kv("x", "1", 1), kv("y", "1", 1)), 0)
	rollT(t, l)
	compactT(t, l, tiny) // maps the 1-key tail batch, stops before x, y
	if st, err := l.Compact(t.Context(), tiny); !errors.Is(err, ErrCompactMapTooSmall) {
		t.Fatalf("tiny map: %+v %v", st, err)
	}
}

func TestCompactCheckpoint(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	cfg := compactTestConfig()
	l := openT(t, dir, cfg, Options{Now: clk.Now})
	fillKeyed(t, l, clk, 20, 7, 0)
	rollT(t, l)
	end := l.LogEndOffset()
	appendT(t, l, keyedBatch(t, 0, kv("k00", "tail", 1)), 0)
	cc := DefaultCompactConfig()
	cc.MinCleanableDirtyRatio = 0
	compactT(t, l, cc)
	b := readFileT(t, filepath.Join(dir, cleanerCheckpointFile))
	if want := fmt.Sprintf("0\n1\n%d %d\n", end, clk.Now().UnixMilli()+cc.DeleteRetentionMs); string(b) != want {
		t.Fatalf("checkpoint %q, want %q", b, want)
	}
	// Truncation below the first dirty offset lowers it.
	if err := l.Truncate(end - 5); err != nil {
		t.Fatal(err)
	}
	if fd := l.cleaner.firstDirty(0, l.LogEndOffset()); fd != l.LogEndOffset() {
		t.Fatalf("first dirty %d after truncating to %d", fd, l.LogEndOffset())
	}
	if rounds, err := decodeRounds(readFileT(t, filepath.Join(dir, cleanerCheckpointFile))); err != nil ||
		rounds[len(rounds)-1].End != l.LogEndOffset() {
		t.Fatalf("checkpoint after truncation: %v %v", rounds, err)
	}
	// New data there is dirty.
	appendT(t, l, keyedBatch(t, 0, kv("k00", "new", 1)), 0)
	rollT(t, l)
	if !l.NeedsCompaction(cc) {
		t.Fatal("data written after a truncation is not dirty")
	}
	crash(l)
	// A malformed checkpoint is ignored: everything is dirty again.
	if err := os.WriteFile(filepath.Join(dir, cleanerCheckpointFile), []byte("0\n2\n5 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, cfg, Options{Now: clk.Now})
	if fd := l.cleaner.firstDirty(0, l.LogEndOffset()); fd != 0 {
		t.Fatalf("first dirty %d with a malformed checkpoint", fd)
	}
}

func TestCompactPreconditions(t *testing.T) {
	l := openT(t, t.TempDir(), compactTestConfig(), Options{})
	for _, bad := range []func(*CompactConfig){
		func(c *CompactConfig) { c.DeleteRetentionMs = -1 },
		func(c *CompactConfig) { c.MinCompactionLagMs = -1 },
		func(c *CompactConfig) { c.MaxCompactionLagMs = 0 },
		func(c *CompactConfig) { c.MinCleanableDirtyRatio = 1.5 },
		func(c *CompactConfig) { c.MinCleanableDirtyRatio = math.NaN() },
		func(c *CompactConfig) { c.MaxMemoryBytes = -1 },
		func(c *CompactConfig) { c.IORateBytesPerSec = -1 },
		func(c *CompactConfig) { c.MaxOffset = -1 },
	} {
		cfg := DefaultCompactConfig()
		bad(&cfg)
		if _, err := l.Compact(t.Context(), cfg); err == nil {
			t.Fatalf("accepted %+v", cfg)
		}
		if l.NeedsCompaction(cfg) {
			t.Fatalf("NeedsCompaction with %+v", cfg)
		}
	}
	if err := DefaultCompactConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if st := compactT(t, l, DefaultCompactConfig()); st.Skipped == "" {
		t.Fatalf("empty log: %+v", st)
	}
	appendT(t, l, keyedBatch(t, 0, kv("a", "1", 1), kv("a", "2", 1)), 0)
	rollT(t, l)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.Compact(ctx, DefaultCompactConfig()); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if left := leftovers(t, l.Dir()); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
	l.Close()
	if _, err := l.Compact(t.Context(), DefaultCompactConfig()); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// BenchmarkCompact cleans a 32 MiB log of 1 KiB values under 8192 random
// keys in 64-record batches: about 75% of the records are superseded. The
// bytes are those of the log cleaned; after/before is what remains.
func BenchmarkCompact(b *testing.B) {
	for _, codec := range []struct {
		name  string
		codec int8
	}{{"none", 0}, {"lz4", batch.CodecLZ4}, {"zstd", batch.CodecZstd}} {
		b.Run(codec.name, func(b *testing.B) { benchCompact(b, codec.codec) })
	}
}

func benchCompact(b *testing.B, codec int8) {
	const keys, perBatch, valueSize = 8192, 64, 1024
	r := rand.New(rand.NewPCG(1, 2))
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 20
	tmpl := b.TempDir()
	l, err := Open(tmpl, cfg, Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; l.Size() < 32<<20; i++ {
		recs := make([]krec, perBatch)
		for j := range recs {
			val := make([]byte, valueSize) // random words: compressible, not trivially
			for k := 0; k < len(val); k += 8 {
				copy(val[k:], fmt.Sprintf("%-8d", r.IntN(1000)))
			}
			recs[j] = krec{fmt.Appendf(nil, "key-%05d", r.IntN(keys)), val, int64(i)}
		}
		if _, err := l.Append(keyedBatch(b, codec, recs...), 0); err != nil {
			b.Fatal(err)
		}
	}
	rollT(b, l)
	size := l.Size()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "log")
		copyDir(b, tmpl, dir)
		l, err := Open(dir, cfg, Options{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		st, err := l.Compact(context.Background(), DefaultCompactConfig())
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if i == 0 {
			b.ReportMetric(float64(st.BytesAfter)/float64(size), "after/before")
		}
		l.Close()
		b.StartTimer()
	}
}
