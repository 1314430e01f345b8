package log

import (
	"math/rand/v2"
	"testing"
)

// benchBatch is ~16 KiB: 16 records of 1 KiB.
func benchBatch() []byte { return simpleBatch(16, 1024, 1_700_000_000_000) }

func benchConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 64 << 20
	c.RetentionBytes = 256 << 20 // keeps the benchmark's disk use bounded
	return c
}

func benchAppend(b *testing.B, sync bool) {
	l := openT(b, b.TempDir(), benchConfig(), Options{})
	batch := benchBatch()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// Append rewrites the offset fields in place; reusing the buffer
		// is fine.
		if _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
		if sync {
			if _, err := l.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		if i%4096 == 4095 {
			if _, _, err := l.ApplyRetention(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkAppend(b *testing.B)     { benchAppend(b, false) }
func BenchmarkAppendSync(b *testing.B) { benchAppend(b, true) }

// BenchmarkRead fetches 1 MiB from random offsets of a 64 MiB log.
func BenchmarkRead(b *testing.B) {
	l := openT(b, b.TempDir(), benchConfig(), Options{})
	batch := benchBatch()
	for range (64 << 20) / len(batch) {
		if _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	r := rand.New(rand.NewPCG(1, 2))
	var n int64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		data, err := l.Read(r.Int64N(leo), 1<<20, leo, true)
		if err != nil {
			b.Fatal(err)
		}
		n += int64(len(data))
	}
	b.SetBytes(n / int64(b.N))
}

// BenchmarkReadTail is a consumer caught up with the producer: reads of
// the newest batch.
func BenchmarkReadTail(b *testing.B) {
	l := openT(b, b.TempDir(), benchConfig(), Options{})
	batch := benchBatch()
	for range 256 {
		if _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := l.Read(leo-1, 1<<20, leo, true); err != nil {
			b.Fatal(err)
		}
	}
}
