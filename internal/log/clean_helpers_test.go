package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/batch"
)

// krec is a test record with a key: nil key is a null key, nil value a
// tombstone.
type krec struct {
	key, value []byte
	ts         int64
}

func kv(k, v string, ts int64) krec { return krec{[]byte(k), []byte(v), ts} }
func tomb(k string, ts int64) krec  { return krec{[]byte(k), nil, ts} }

// codecXerial asks keyedBatch for snappy in the Java client's framing.
const codecXerial = 8

// keyedBatch builds a v2 batch of recs (offset deltas 0..n-1), compressed
// with codec by franz-go's compressor, not the cleaner's, so tests check
// the cleaner against an independent encoder.
func keyedBatch(t testing.TB, codec int8, recs ...krec) []byte {
	t.Helper()
	var body []byte
	baseTS, maxTS := recs[0].ts, recs[0].ts
	for _, r := range recs {
		maxTS = max(maxTS, r.ts)
	}
	for i, r := range recs {
		var rb []byte
		rb = append(rb, 0)
		rb = binary.AppendVarint(rb, r.ts-baseTS)
		rb = binary.AppendVarint(rb, int64(i))
		rb = appendVarBytes(rb, r.key)
		rb = appendVarBytes(rb, r.value)
		rb = binary.AppendVarint(rb, 1) // one header
		rb = appendVarBytes(rb, []byte("h"))
		rb = appendVarBytes(rb, fmt.Appendf(nil, "hv-%d", i))
		body = binary.AppendVarint(body, int64(len(rb)))
		body = append(body, rb...)
	}
	attrs := uint16(codec)
	switch codec {
	case 0:
	case codecXerial:
		attrs = batch.CodecSnappy
		body = xerialFrame(body)
	default:
		out, used := testCompressors()[codec].Compress(new(bytes.Buffer), body)
		if int8(used) != codec {
			t.Fatalf("compressor used codec %d, want %d", used, codec)
		}
		body = append([]byte(nil), out...)
	}
	b := make([]byte, batch.HeaderSize, batch.HeaderSize+len(body))
	binary.BigEndian.PutUint32(b[offLength:], uint32(batch.HeaderSize-batchOverhead+len(body)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
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

// testCompressors are franz-go's, one per codec, made once: a zstd
// encoder is costly to build.
var testCompressors = sync.OnceValue(func() map[int8]kgo.Compressor {
	out := map[int8]kgo.Compressor{}
	for codec, c := range map[int8]kgo.CompressionCodec{
		batch.CodecGzip: kgo.GzipCompression(), batch.CodecSnappy: kgo.SnappyCompression(),
		batch.CodecZstd: kgo.ZstdCompression(),
	} {
		var err error
		if out[codec], err = kgo.DefaultCompressor(c); err != nil {
			panic(err)
		}
	}
	// franz-go writes lz4 frames of 4 MiB blocks, and every reader of one
	// allocates such a block: costly under -race. Java's 64 KiB blocks.
	out[batch.CodecLZ4] = lz4Compressor{}
	return out
})

type lz4Compressor struct{}

func (lz4Compressor) Compress(dst *bytes.Buffer, src []byte, _ ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	w := lz4.NewWriter(dst)
	if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
		panic(err)
	}
	if _, err := w.Write(src); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return dst.Bytes(), kgo.CodecLz4
}

func appendVarBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	return append(binary.AppendVarint(b, int64(len(v))), v...)
}

// xerialFrame frames data as the Java client does, in 100-byte blocks so
// tests see several.
func xerialFrame(data []byte) []byte {
	out := append([]byte(nil), xerialHeader...)
	for len(data) > 0 {
		n := min(100, len(data))
		blk := s2.EncodeSnappy(nil, data[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
		out = append(out, blk...)
		data = data[n:]
	}
	return out
}

// got is a record read back from the log.
type got struct {
	off        int64
	key, value string
	nullKey    bool
	tombstone  bool
	ts         int64
}

func (g got) String() string {
	v := g.value
	if g.tombstone {
		v = "<tombstone>"
	}
	return fmt.Sprintf("%d:%s=%s@%d", g.off, g.key, v, g.ts)
}

// logRecords reads every record of the log through Read, checking each
// batch (CRC, header) and parsing records with internal/batch, an
// independent parser.
func logRecords(t testing.TB, l *Log) []got {
	t.Helper()
	var out []got
	scratch := new(batch.Scratch) // reused: decoders are costly to build
	for _, h := range readAllBatches(t, l, l.LogStartOffset()) {
		data, err := l.Read(h.BaseOffset, 1, 1<<62, true)
		if err != nil {
			t.Fatal(err)
		}
		data = data[:h.Size()]
		recs, bh, err := batch.Records(data, scratch)
		if err != nil {
			t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		if int(bh.RecordCount) != len(recs) {
			t.Fatalf("batch at %d: header says %d records, has %d", h.BaseOffset, bh.RecordCount, len(recs))
		}
		for _, r := range recs {
			ts := h.BaseTimestamp + r.TimestampDelta
			if h.Attributes&batch.AttrLogAppendTime != 0 {
				ts = h.MaxTimestamp
			}
			out = append(out, got{
				off: h.BaseOffset + r.OffsetDelta, key: string(r.Key), value: string(r.Value),
				nullKey: r.Key == nil, tombstone: r.Value == nil, ts: ts,
			})
		}
	}
	return out
}

// latestOnly is what a clean up to end keeps of recs: records at or past
// end, and below it the last record of each key (and every null-key one).
func latestOnly(recs []got, end int64) []got {
	latest := map[string]int64{}
	for _, r := range recs {
		if r.off < end && !r.nullKey {
			latest[r.key] = r.off
		}
	}
	var out []got
	for _, r := range recs {
		if r.off >= end || r.nullKey || latest[r.key] == r.off {
			out = append(out, r)
		}
	}
	return out
}

func sameRecords(t testing.TB, what string, have, want []got) {
	t.Helper()
	if !slices.Equal(have, want) {
		t.Fatalf("%s:\nhave %v\nwant %v", what, have, want)
	}
}

// rollT closes the active segment, so what was appended becomes cleanable.
func rollT(t testing.TB, l *Log) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active.size.Load() == 0 {
		return
	}
	if err := l.rollLocked(l.leo.Load()); err != nil {
		t.Fatal(err)
	}
}

func compactT(t testing.TB, l *Log, cfg CompactConfig) CompactStats {
	t.Helper()
	st, err := l.Compact(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	return st
}

// copyDir copies a closed (or crashed) log directory.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}

// leftovers lists cleaner files in dir.
func leftovers(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func readFileT(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
