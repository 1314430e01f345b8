package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// now is the broker clock in these tests (ms).
const now = int64(1_700_000_000_000)

// rec is one record to encode: its timestamp delta, offset delta, key and value.
type rec struct {
	tsDelta int64
	offDel  int32
	key     []byte
	value   []byte
	headers []kmsg.Header
}

// seqRecords returns n records with offset deltas 0..n-1.
func seqRecords(n int) []rec {
	out := make([]rec, n)
	for i := range out {
		out[i] = rec{tsDelta: int64(i), offDel: int32(i), key: []byte(fmt.Sprintf("k%d", i)), value: []byte(fmt.Sprintf("value-%d", i))}
	}
	return out
}

// encodeRecords encodes records as they sit in a batch's records section.
func encodeRecords(rs []rec) []byte {
	var out []byte
	for _, r := range rs {
		kr := kmsg.Record{TimestampDelta64: r.tsDelta, OffsetDelta: r.offDel, Key: r.key, Value: r.value, Headers: r.headers}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // body after a one-byte zero length
		out = kr.AppendTo(out)
	}
	return out
}

// spec describes a batch to build.
type spec struct {
	records   []byte // records section (already compressed when codec != 0)
	count     int32
	lastDelta int32
	attrs     int16
	baseTS    int64
	maxTS     int64
	pid       int64
	seq       int32
}

func newSpec(rs []rec, codec int16, compress func([]byte) []byte) spec {
	raw := encodeRecords(rs)
	if compress != nil {
		raw = compress(raw)
	}
	n := int32(len(rs))
	return spec{records: raw, count: n, lastDelta: n - 1, attrs: codec, baseTS: now, maxTS: now + int64(n) - 1, pid: -1, seq: -1}
}

// build encodes a v2 batch with a correct length and CRC.
func (s spec) build() []byte {
	b := kmsg.RecordBatch{
		Magic: 2, Attributes: s.attrs, LastOffsetDelta: s.lastDelta,
		FirstTimestamp: s.baseTS, MaxTimestamp: s.maxTS,
		ProducerID: s.pid, ProducerEpoch: -1, FirstSequence: s.seq,
		NumRecords: s.count, Records: s.records,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	fixCRC(out)
	return out
}

func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func snappyRaw(b []byte) []byte { return snappy.Encode(nil, b) }

// xerial frames b as the Java client does: magic, version 1, compatible
// version 1, then int32-length-prefixed snappy blocks of at most chunk bytes.
func xerial(b []byte, chunk int) []byte {
	out := append([]byte(nil), xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for len(b) > 0 {
		n := min(chunk, len(b))
		blk := s2.EncodeSnappy(nil, b[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
		out = append(out, blk...)
		b = b[n:]
	}
	return out
}

func lz4ed(b []byte) []byte {
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zstded(b []byte) []byte {
	e, err := zstd.NewWriter(nil)
	if err != nil {
		panic(err)
	}
	defer e.Close()
	return e.EncodeAll(b, nil)
}

var codecs = []struct {
	name     string
	codec    int16
	compress func([]byte) []byte
}{
	{"none", CodecNone, nil},
	{"gzip", CodecGzip, gzipped},
	{"snappy-raw", CodecSnappy, snappyRaw},
	{"snappy-xerial", CodecSnappy, func(b []byte) []byte { return xerial(b, 40) }}, // several chunks
	{"lz4", CodecLZ4, lz4ed},
	{"zstd", CodecZstd, zstded},
}

func openLimits() Limits { return Limits{Now: now, BeforeMaxMs: -1, AfterMaxMs: -1} }

// Each codec's batch is accepted, its header parsed as sent, and its records
// read back intact; batches of different codecs may follow each other.
func TestValidateAcceptsEveryCodec(t *testing.T) {
	rs := seqRecords(7)
	rs[3].headers = []kmsg.Header{{Key: "h", Value: []byte("v")}}
	rs[4].key, rs[4].value = nil, nil // null key, tombstone
	var all []byte
	scratch := new(Scratch)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			b := newSpec(rs, c.codec, c.compress).build()
			all = append(all, b...)
			v, err := Validate(append([]byte(nil), b...), openLimits(), scratch)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if len(v.Batches) != 1 || v.Records != 7 || v.MaxTimestamp != now+6 {
				t.Fatalf("got %d batches, %d records, max ts %d", len(v.Batches), v.Records, v.MaxTimestamp)
			}
			h := v.Batches[0]
			if h.Codec() != int(c.codec) || h.RecordCount != 7 || h.Size() != len(b) || h.BaseTimestamp != now {
				t.Fatalf("header %+v", h)
			}
			got, _, err := Records(b, scratch)
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			if len(got) != len(rs) {
				t.Fatalf("%d records, want %d", len(got), len(rs))
			}
			for i, r := range got {
				w := rs[i]
				if r.OffsetDelta != int64(w.offDel) || r.TimestampDelta != w.tsDelta ||
					!bytes.Equal(r.Key, w.key) || (r.Key == nil) != (w.key == nil) ||
					!bytes.Equal(r.Value, w.value) || (r.Value == nil) != (w.value == nil) || len(r.Headers) != len(w.headers) {
					t.Fatalf("record %d: got %+v, want %+v", i, r, w)
				}
			}
			if h := got[3].Headers; h[0].Key != "h" || string(h[0].Value) != "v" {
				t.Fatalf("record 3 headers %+v", h)
			}
		})
	}
	v, err := Validate(all, openLimits(), scratch)
	if err != nil || len(v.Batches) != len(codecs) || v.Records != 7*len(codecs) {
		t.Fatalf("all codecs back to back: %d batches, %d records, %v", len(v.Batches), v.Records, err)
	}
}

// A Scratch is reused across batches: a large batch followed by a small
// one must not leak the large one's records into the small one.
func TestValidateReusesScratchSafely(t *testing.T) {
	scratch := new(Scratch)
	for _, c := range codecs[1:] {
		big := newSpec(seqRecords(50), c.codec, c.compress).build()
		small := newSpec(seqRecords(2), c.codec, c.compress).build()
		for _, b := range [][]byte{big, small, big, small} {
			v, err := Validate(append([]byte(nil), b...), openLimits(), scratch)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if want := int(binary.BigEndian.Uint32(b[57:])); v.Records != want {
				t.Fatalf("%s: %d records, want %d", c.name, v.Records, want)
			}
		}
	}
}

func TestValidateRejects(t *testing.T) {
	good := func() spec { return newSpec(seqRecords(3), CodecNone, nil) }
	withRecs := func(rs []rec) spec {
		s := good()
		s.records = encodeRecords(rs)
		return s
	}
	corruptRecord := func() []byte {
		r := encodeRecords(seqRecords(1))
		r[0] = 0x7e // varint length 63: overruns
		return r
	}
	bombSnappy := binary.AppendUvarint(nil, MaxDecompressed+1) // block header claiming 256 MiB + 1
	bombSnappy = append(bombSnappy, 0, 0)

	cases := []struct {
		name  string
		data  func() []byte
		lim   func(*Limits)
		want  error
		match string
	}{
		{name: "empty", data: func() []byte { return nil }, want: ErrInvalidRecord},
		{name: "shorter than magic", data: func() []byte { return good().build()[:16] }, want: ErrCorrupt},
		{name: "shorter than header", data: func() []byte { return good().build()[:40] }, want: ErrCorrupt},
		{name: "bad CRC", data: func() []byte {
			b := good().build()
			b[len(b)-1] ^= 1
			return b
		}, want: ErrCorrupt, match: "CRC"},
		{name: "bad CRC in header field", data: func() []byte {
			b := good().build()
			b[58] ^= 1 // record count is under the CRC
			return b
		}, want: ErrCorrupt, match: "CRC"},
		{name: "magic 1", data: func() []byte {
			b := good().build()
			b[16] = 1
			return b
		}, want: ErrUnsupportedMagic},
		{name: "magic 0 short", data: func() []byte { return append(make([]byte, 16), 0) }, want: ErrUnsupportedMagic},
		{name: "length overruns data", data: func() []byte {
			b := good().build()
			return b[:len(b)-1]
		}, want: ErrCorrupt, match: "exceeds"},
		{name: "length below header", data: func() []byte {
			b := good().build()
			binary.BigEndian.PutUint32(b[8:], 10)
			return b
		}, want: ErrCorrupt},
		{name: "negative length", data: func() []byte {
			b := good().build()
			binary.BigEndian.PutUint32(b[8:], 0xfffffff0)
			return b
		}, want: ErrCorrupt},
		{name: "count above records", data: func() []byte {
			s := good()
			s.count, s.lastDelta = 4, 3
			return s.build()
		}, want: ErrInvalidRecord, match: "found 3"},
		{name: "count below records", data: func() []byte {
			s := good()
			s.count, s.lastDelta = 2, 1
			return s.build()
		}, want: ErrInvalidRecord},
		{name: "zero count", data: func() []byte {
			s := withRecs(nil)
			s.count, s.lastDelta = 0, -1
			return s.build()
		}, want: ErrInvalidRecord},
		{name: "last offset delta disagrees with count", data: func() []byte {
			s := good()
			s.lastDelta = 5
			return s.build()
		}, want: ErrInvalidRecord, match: "last offset delta"},
		{name: "offset delta gap", data: func() []byte {
			rs := seqRecords(3)
			rs[2].offDel = 3
			return withRecs(rs).build()
		}, want: ErrInvalidRecord, match: "offset delta"},
		{name: "offset deltas not from zero", data: func() []byte {
			rs := seqRecords(3)
			for i := range rs {
				rs[i].offDel++
			}
			return withRecs(rs).build()
		}, want: ErrInvalidRecord, match: "offset delta"},
		{name: "trailing bytes in batch", data: func() []byte {
			s := good()
			s.records = append(s.records, 0)
			return s.build()
		}, want: ErrInvalidRecord},
		{name: "trailing bytes after batch", data: func() []byte {
			return append(good().build(), 1, 2, 3)
		}, want: ErrCorrupt},
		{name: "second batch bad", data: func() []byte {
			b2 := good().build()
			b2[len(b2)-1] ^= 1
			return append(good().build(), b2...)
		}, want: ErrCorrupt, match: "CRC"},
		{name: "malformed record", data: func() []byte {
			s := good()
			s.records, s.count, s.lastDelta = corruptRecord(), 1, 0
			return s.build()
		}, want: ErrInvalidRecord},
		{name: "control batch", data: func() []byte {
			s := good()
			s.attrs |= AttrControl
			return s.build()
		}, want: ErrInvalidRecord, match: "control"},
		{name: "too large", data: func() []byte { return good().build() },
			lim: func(l *Limits) { l.MaxBatchBytes = len(good().build()) - 1 }, want: ErrTooLarge},
		{name: "timestamp before max ms", data: func() []byte {
			rs := seqRecords(3)
			rs[1].tsDelta = -1001 // base is now
			return withRecs(rs).build()
		}, lim: func(l *Limits) { l.BeforeMaxMs = 1000 }, want: ErrInvalidTimestamp, match: "older"},
		{name: "timestamp after max ms", data: func() []byte {
			rs := seqRecords(3)
			rs[2].tsDelta = 1001
			return withRecs(rs).build()
		}, lim: func(l *Limits) { l.AfterMaxMs = 1000 }, want: ErrInvalidTimestamp, match: "later"},
		{name: "compressed timestamp after max ms", data: func() []byte {
			rs := seqRecords(3)
			rs[2].tsDelta = 5000
			s := newSpec(rs, CodecZstd, zstded)
			return s.build()
		}, lim: func(l *Limits) { l.AfterMaxMs = 1000 }, want: ErrInvalidTimestamp},
		{name: "unknown codec", data: func() []byte {
			s := good()
			s.attrs = 5
			return s.build()
		}, want: ErrUnsupportedCodec},
		{name: "codec 7", data: func() []byte {
			s := good()
			s.attrs = 7
			return s.build()
		}, want: ErrUnsupportedCodec},
		{name: "gzip garbage", data: func() []byte {
			s := good()
			s.attrs = CodecGzip
			return s.build()
		}, want: ErrCorrupt, match: "decompress"},
		{name: "snappy garbage", data: func() []byte {
			s := good()
			s.attrs, s.records = CodecSnappy, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			return s.build()
		}, want: ErrCorrupt},
		{name: "xerial truncated chunk", data: func() []byte {
			x := xerial(encodeRecords(seqRecords(3)), 1000)
			s := good()
			s.attrs, s.records = CodecSnappy, x[:len(x)-2]
			return s.build()
		}, want: ErrCorrupt},
		{name: "xerial short header", data: func() []byte {
			s := good()
			s.attrs, s.records = CodecSnappy, append(append([]byte(nil), xerialMagic...), 0, 0, 0)
			return s.build()
		}, want: ErrCorrupt},
		{name: "lz4 garbage", data: func() []byte {
			s := good()
			s.attrs = CodecLZ4
			return s.build()
		}, want: ErrCorrupt},
		{name: "zstd garbage", data: func() []byte {
			s := good()
			s.attrs = CodecZstd
			return s.build()
		}, want: ErrCorrupt},
		{name: "compressed record count mismatch", data: func() []byte {
			s := newSpec(seqRecords(3), CodecLZ4, lz4ed)
			s.count, s.lastDelta = 2, 1
			return s.build()
		}, want: ErrInvalidRecord},
		{name: "snappy bomb", data: func() []byte {
			s := good()
			s.attrs, s.records = CodecSnappy, bombSnappy
			return s.build()
		}, want: ErrInvalidRecord},
		{name: "xerial bomb", data: func() []byte {
			x := append([]byte(nil), xerialMagic...)
			x = binary.BigEndian.AppendUint32(x, 1)
			x = binary.BigEndian.AppendUint32(x, 1)
			x = binary.BigEndian.AppendUint32(x, uint32(len(bombSnappy)))
			s := good()
			s.attrs, s.records = CodecSnappy, append(x, bombSnappy...)
			return s.build()
		}, want: ErrInvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lim := openLimits()
			if c.lim != nil {
				c.lim(&lim)
			}
			_, err := Validate(c.data(), lim, new(Scratch))
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if c.match != "" && !bytes.Contains([]byte(err.Error()), []byte(c.match)) {
				t.Fatalf("error %q does not mention %q", err, c.match)
			}
		})
	}
}

// Timestamps exactly at the edges of the accepted range pass; -1 disables
// a bound.
func TestValidateTimestampBounds(t *testing.T) {
	rs := seqRecords(2)
	rs[0].tsDelta, rs[1].tsDelta = -1000, 1000
	b := newSpec(rs, CodecNone, nil).build()
	for _, lim := range []Limits{
		{Now: now, BeforeMaxMs: 1000, AfterMaxMs: 1000},
		{Now: now, BeforeMaxMs: -1, AfterMaxMs: 1000},
		{Now: now, BeforeMaxMs: 1000, AfterMaxMs: -1},
		{Now: now, BeforeMaxMs: 1 << 62, AfterMaxMs: 1 << 62},             // no overflow into rejection
		{Now: now, BeforeMaxMs: math.MaxInt64, AfterMaxMs: math.MaxInt64}, // the defaults' range
	} {
		if _, err := Validate(append([]byte(nil), b...), lim, nil); err != nil {
			t.Errorf("%+v: %v", lim, err)
		}
	}
	for _, lim := range []Limits{
		{Now: now, BeforeMaxMs: 999, AfterMaxMs: -1},
		{Now: now, BeforeMaxMs: -1, AfterMaxMs: 999},
		// 0 is a valid setting: nothing older (newer) than now.
		{Now: now, BeforeMaxMs: 0, AfterMaxMs: -1},
		{Now: now, BeforeMaxMs: -1, AfterMaxMs: 0},
	} {
		if _, err := Validate(append([]byte(nil), b...), lim, nil); !errors.Is(err, ErrInvalidTimestamp) {
			t.Errorf("%+v: got %v, want ErrInvalidTimestamp", lim, err)
		}
	}
	atNow := newSpec(seqRecords(1), CodecNone, nil).build() // timestamp now
	if _, err := Validate(atNow, Limits{Now: now, BeforeMaxMs: 0, AfterMaxMs: 0}, nil); err != nil {
		t.Errorf("record at now with both bounds 0: %v", err)
	}
}

// With LogAppendTime the broker's clock replaces the producer's: the
// attribute bit is set, maxTimestamp is now, the CRC still verifies and
// producer timestamps outside the CreateTime bounds do not matter.
func TestValidateLogAppendTimeRestamps(t *testing.T) {
	rs := seqRecords(3)
	rs[2].tsDelta = 1 << 40 // far future: ignored under LogAppendTime
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			one := newSpec(rs, c.codec, c.compress).build()
			b := append(append([]byte(nil), one...), one...)
			const stamp = now + 12345
			v, err := Validate(b, Limits{LogAppendTime: true, Now: stamp, BeforeMaxMs: 10, AfterMaxMs: 10}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v.MaxTimestamp != stamp {
				t.Fatalf("Validated.MaxTimestamp %d, want %d", v.MaxTimestamp, stamp)
			}
			for i, off := 0, 0; i < 2; i++ {
				h, err := ParseHeader(b[off:])
				if err != nil {
					t.Fatal(err)
				}
				if h.Attributes&AttrLogAppendTime == 0 || h.MaxTimestamp != stamp || h.Codec() != int(c.codec) {
					t.Fatalf("batch %d header %+v", i, h)
				}
				if h != v.Batches[i] {
					t.Fatalf("batch %d: returned %+v, bytes say %+v", i, v.Batches[i], h)
				}
				if got := crc32.Checksum(b[off+21:off+h.Size()], crc32.MakeTable(crc32.Castagnoli)); got != h.CRC {
					t.Fatalf("batch %d: CRC %08x, header says %08x", i, got, h.CRC)
				}
				if h.BaseTimestamp != now {
					t.Fatalf("baseTimestamp changed to %d", h.BaseTimestamp)
				}
				off += h.Size()
			}
			// The restamped bytes validate again (as a follower or a
			// consumer would check them).
			if _, err := Validate(b, openLimits(), nil); err != nil {
				t.Fatalf("restamped batch no longer validates: %v", err)
			}
		})
	}
}

// A CreateTime batch is stored byte for byte.
func TestValidateLeavesCreateTimeBatchUnchanged(t *testing.T) {
	b := newSpec(seqRecords(3), CodecGzip, gzipped).build()
	orig := append([]byte(nil), b...)
	if _, err := Validate(b, Limits{Now: now, BeforeMaxMs: 1e9, AfterMaxMs: 1e9}, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, orig) {
		t.Fatal("Validate changed a CreateTime batch")
	}
}

// A gzip, lz4 or zstd stream that inflates past MaxDecompressed is refused
// as INVALID_RECORD (not held in memory whole, not reported as corrupt),
// like a snappy block that claims to.
func TestValidateBoundsDecompression(t *testing.T) {
	if testing.Short() {
		t.Skip("decompresses 256 MiB per codec")
	}
	// Concatenated members (gzip) and frames (lz4, zstd) of 1 MiB of zeros:
	// cheap to build, 256 MiB + 1 MiB to inflate.
	mib := make([]byte, 1<<20)
	n := MaxDecompressed/len(mib) + 1
	for _, c := range []struct {
		name  string
		codec int16
		one   []byte
	}{{"gzip", CodecGzip, gzipped(mib)}, {"lz4", CodecLZ4, lz4ed(mib)}, {"zstd", CodecZstd, zstdClaiming(mib, MaxDecompressed+1)}} {
		t.Run(c.name, func(t *testing.T) {
			s := newSpec(seqRecords(1), c.codec, nil)
			s.records = c.one
			if c.codec != CodecZstd {
				s.records = bytes.Repeat(c.one, n)
			}
			_, err := Validate(s.build(), openLimits(), new(Scratch))
			if !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("got %v, want ErrInvalidRecord", err)
			}
		})
	}
}

// zstdClaiming is the start of a zstd frame whose header declares size
// bytes of content; the decoder refuses it before inflating anything.
func zstdClaiming(b []byte, size int64) []byte {
	var buf bytes.Buffer
	e, err := zstd.NewWriter(nil)
	if err != nil {
		panic(err)
	}
	e.ResetContentSize(&buf, size)
	e.Write(b)
	e.Flush()
	return buf.Bytes()
}

// Xerial chunks each within the bound are refused once together they pass it.
func TestValidateBoundsXerialTotal(t *testing.T) {
	if testing.Short() {
		t.Skip("decompresses 128 MiB")
	}
	blk := s2.EncodeSnappy(nil, make([]byte, MaxDecompressed/2+1))
	x := append([]byte(nil), xerialMagic...)
	x = binary.BigEndian.AppendUint32(x, 1)
	x = binary.BigEndian.AppendUint32(x, 1)
	for range 2 {
		x = binary.BigEndian.AppendUint32(x, uint32(len(blk)))
		x = append(x, blk...)
	}
	s := newSpec(seqRecords(1), CodecSnappy, nil)
	s.records = x
	if _, err := Validate(s.build(), openLimits(), new(Scratch)); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("got %v, want ErrInvalidRecord", err)
	}
}
