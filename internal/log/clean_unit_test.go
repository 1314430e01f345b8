package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/batch"
)

func TestOffsetMap(t *testing.T) {
	m := newOffsetMap(10*mapSlotSize, -1)
	if len(m.slots) != 10 || m.limit != 9 {
		t.Fatalf("%d slots, limit %d", len(m.slots), m.limit)
	}
	for i := range 9 {
		h := m.hash(fmt.Appendf(nil, "key-%d", i))
		if m.room() != 9-i || m.has(h) {
			t.Fatalf("key %d: room %d", i, m.room())
		}
		m.put(h, int64(i))
		m.put(h, int64(100+i)) // a later offset replaces, taking no room
	}
	if m.room() != 0 {
		t.Fatalf("room %d", m.room())
	}
	for i := range 9 {
		if off, ok := m.get(m.hash(fmt.Appendf(nil, "key-%d", i))); !ok || off != int64(100+i) {
			t.Fatalf("key %d: %d %v", i, off, ok)
		}
	}
	if _, ok := m.get(m.hash([]byte("other"))); ok {
		t.Fatal("found a key never put")
	}
	// The empty key is a key, distinct from every other.
	if m.hash([]byte{}) == m.hash([]byte("x")) {
		t.Fatal("hash collision")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("overfilled map did not panic")
			}
		}()
		m.put(m.hash([]byte("one too many")), 1)
	}()
	// Sized to the keys that can come, below the memory bound.
	if m := newOffsetMap(16<<20, 100); len(m.slots) != 113 {
		t.Fatalf("%d slots for 100 keys", len(m.slots))
	}
}

func TestThrottle(t *testing.T) {
	now := time.Unix(0, 0)
	th := &throttle{
		rate: 1000,
		now:  func() time.Time { return now },
		sleep: func(_ context.Context, d time.Duration) error {
			now = now.Add(d)
			return nil
		},
	}
	for range 100 {
		if err := th.take(t.Context(), 100); err != nil {
			t.Fatal(err)
		}
	}
	if th.slept < 9900*time.Millisecond || th.slept > 10*time.Second {
		t.Fatalf("10000 bytes at 1000 B/s slept %v", th.slept)
	}
	// Idle time does not bank more than a window's burst.
	now = now.Add(time.Hour)
	slept := th.slept
	for range 100 {
		th.take(t.Context(), 100)
	}
	if d := th.slept - slept; d < 8900*time.Millisecond {
		t.Fatalf("after an idle hour, 10000 bytes slept only %v", d)
	}
	// Unlimited never sleeps; a cancelled sleep returns the error.
	free := &throttle{now: th.now, sleep: func(context.Context, time.Duration) error { t.Fatal("slept"); return nil }}
	free.take(t.Context(), 1<<40)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	real := newThrottle(1)
	if err := real.take(ctx, 1<<20); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled take: %v", err)
	}
}

// The cleaner's I/O goes through the throttle.
func TestCompactThrottled(t *testing.T) {
	f := newCrashFixture(t, true)
	l := openT(t, f.dir, f.cfg, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	cc := DefaultCompactConfig()
	cc.IORateBytesPerSec = 1 // the first batch read must wait
	if _, err := l.Compact(ctx, cc); !errors.Is(err, context.Canceled) {
		t.Fatalf("throttled clean: %v", err)
	}
}

func TestCleanRounds(t *testing.T) {
	rs := []cleanRound{{10, 100}, {20, 200}, {30, 300}}
	for _, tc := range []struct {
		off     int64
		horizon int64
		ok      bool
	}{{0, 100, true}, {9, 100, true}, {10, 200, true}, {29, 300, true}, {30, 0, false}} {
		if h, ok := horizonAt(rs, tc.off); h != tc.horizon || ok != tc.ok {
			t.Fatalf("horizonAt(%d) = %d %v", tc.off, h, ok)
		}
	}
	// Passed horizons merge; rounds below the log start go.
	if got := addRound(rs, 40, 400, 0, 250); fmt.Sprint(got) != "[{20 200} {30 300} {40 400}]" {
		t.Fatalf("%v", got)
	}
	if got := addRound(rs, 40, 400, 20, 0); fmt.Sprint(got) != "[{30 300} {40 400}]" {
		t.Fatalf("%v", got)
	}
	if got := addRound(rs, 30, 400, 0, 0); fmt.Sprint(got) != fmt.Sprint(rs) {
		t.Fatalf("a round without progress added: %v", got)
	}
	// Past the cap, the closest horizons merge, keeping the later one.
	var many []cleanRound
	for i := range maxCleanRounds {
		many = append(many, cleanRound{int64(i + 1), int64(1000 + 10*i)})
	}
	many[50].Horizon = many[49].Horizon + 1
	got := addRound(many, 1000, 5000, 0, 0)
	if len(got) != maxCleanRounds || got[49] != (cleanRound{51, many[50].Horizon}) || got[len(got)-1].End != 1000 {
		t.Fatalf("%v", got[45:55])
	}
	// Truncation.
	if got, ok := clampRounds(rs, 25); !ok || fmt.Sprint(got) != "[{10 100} {20 200} {25 300}]" {
		t.Fatalf("%v", got)
	}
	if got, ok := clampRounds(rs, 20); !ok || fmt.Sprint(got) != "[{10 100} {20 200}]" {
		t.Fatalf("%v", got)
	}
	if _, ok := clampRounds(rs, 30); ok {
		t.Fatal("clamped at the end")
	}
	if got, err := decodeRounds(encodeRounds(rs)); err != nil || fmt.Sprint(got) != fmt.Sprint(rs) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"0\n2\n5 1\n5 2\n", "0\n1\n-1 1\n", "0\n1\n5\n", "1\n0\n"} {
		if _, err := decodeRounds([]byte(bad)); err == nil {
			t.Fatalf("decoded %q", bad)
		}
	}
}

func TestCleanCodecsRoundTrip(t *testing.T) {
	data := bytes.Repeat([]byte("compaction keeps the latest record per key. "), 2000)
	c := getCleanCodecs()
	defer putCleanCodecs(c)
	dec := kgo.DefaultDecompressor()
	for _, codec := range []int{batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		for _, xerial := range []bool{false, true} {
			if xerial && codec != batch.CodecSnappy {
				continue
			}
			for range 2 { // coders are reused
				z, err := c.compress(codec, xerial, data)
				if err != nil {
					t.Fatal(err)
				}
				z = bytes.Clone(z)
				if xerial != bytes.HasPrefix(z, xerialMagic) {
					t.Fatalf("codec %d xerial %v: framing wrong", codec, xerial)
				}
				out, err := c.decompress(codec, z, nil)
				if err != nil || !bytes.Equal(out, data) {
					t.Fatalf("codec %d: %d bytes, %v", codec, len(out), err)
				}
				out, err = dec.Decompress(z, kgo.CompressionCodecType(codec))
				if err != nil || !bytes.Equal(out, data) {
					t.Fatalf("codec %d: client decompress: %d bytes, %v", codec, len(out), err)
				}
			}
		}
	}
	if _, err := c.decompress(5, data, nil); !errors.Is(err, errCodec) {
		t.Fatalf("codec 5: %v", err)
	}
	if _, err := c.decompress(batch.CodecGzip, data, nil); err == nil {
		t.Fatal("decompressed garbage")
	}
}

func TestWalkRecords(t *testing.T) {
	b := keyedBatch(t, 0, kv("a", "1", 5), krec{nil, []byte("x"), 6}, tomb("b", 7), krec{[]byte{}, []byte("e"), 8})
	raw := b[batch.HeaderSize:]
	recs, err := walkRecords(raw, 4, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a 0 0 false false", " 1 1 true false", "b 2 2 false true", " 3 3 false false"}
	for i, r := range recs {
		if s := fmt.Sprintf("%s %d %d %v %v", r.key, r.tsDelta, r.offDelta, r.nullKey, r.tombstone); s != want[i] {
			t.Fatalf("record %d: %s, want %s", i, s, want[i])
		}
	}
	if recs[3].key == nil || recs[3].nullKey {
		t.Fatal("empty key read as null")
	}
	if recs[3].end != len(raw) {
		t.Fatal("records do not cover the bytes")
	}
	// Each malformation is refused.
	bad := func(name string, count, last int32, p []byte) {
		if _, err := walkRecords(p, count, last, nil); !errors.Is(err, errBadRecords) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	bad("count", 3, 3, raw)
	bad("last delta", 4, 2, raw)
	bad("truncated", 4, 3, raw[:len(raw)-1])
	bad("trailing", 4, 3, append(bytes.Clone(raw), 0))
	two := keyedBatch(t, 0, kv("a", "1", 5), kv("b", "1", 5))[batch.HeaderSize:]
	bad("offset not increasing", 2, 1, rewriteDelta(t, two, 1, 0))
}

// rewriteDelta sets record i's offset delta (a one-byte varint) to d.
func rewriteDelta(t *testing.T, p []byte, i int, d int64) []byte {
	p = bytes.Clone(p)
	recs, err := walkRecords(p, 2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := recs[i]
	_, n := binary.Varint(p[r.start:])
	at := r.start + n + 1 // attributes
	_, k := binary.Varint(p[at:])
	at += k // timestamp delta
	p[at] = byte(d << 1)
	return p
}

func FuzzCompactBatch(f *testing.F) {
	for _, codec := range []int8{0, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		f.Add(keyedBatch(f, codec, kv("a", "1", 1), tomb("b", 2), kv("a", "2", 3), krec{nil, []byte("x"), 4}), uint8(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, seed uint8) {
		if len(b) < batch.HeaderSize {
			return
		}
		b = bytes.Clone(b)
		fixCRC(b) // the scanner has checked it before the cleaner parses
		h, err := CheckBatch(b)
		if err != nil {
			return
		}
		m := newOffsetMap(1<<12, -1)
		codecs := getCleanCodecs()
		defer putCleanCodecs(codecs)
		fl := batchFilter{codecs: codecs, now: math.MaxInt64, rounds: []cleanRound{{End: 1 << 62}}}
		if ok, _, _ := fl.mapBatch(m, h, b, h.BaseOffset+int64(seed%4), nil, nil); !ok {
			return
		}
		fl.m = m
		before := fl.malformed
		out, err := fl.filter(h, b, seed&8 != 0)
		if err != nil || out == nil {
			return
		}
		oh, err := CheckBatch(out)
		if err != nil {
			t.Fatalf("filtered batch invalid: %v", err)
		}
		if oh.BaseOffset != h.BaseOffset || oh.LastOffsetDelta != h.LastOffsetDelta || oh.ProducerID != h.ProducerID ||
			oh.BaseSequence != h.BaseSequence || oh.RecordCount > h.RecordCount {
			t.Fatalf("header %+v from %+v", oh, h)
		}
		if _, _, err := batch.Records(b, nil); err == nil && fl.malformed == before {
			if _, _, err := batch.Records(out, nil); err != nil {
				t.Fatalf("filtered records do not parse: %v", err)
			}
		}
	})
}
