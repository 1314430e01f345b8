package latency

import (
	"math"
	"testing"
	"time"
)

func TestObserveBucketsAndQuantile(t *testing.T) {
	var h Hist
	// 1,000 values of 1 ms and 10 of 100 ms: p50 near 1 ms, p99.5 in the 100 ms bucket.
	h.ObserveN(time.Millisecond, 1000)
	for range 10 {
		h.Observe(100 * time.Millisecond)
	}
	cum, n, sum := h.Snapshot()
	if n != 1010 || cum[len(cum)-1] != 1010 {
		t.Fatalf("count %d (cumulative %d), want 1010", n, cum[len(cum)-1])
	}
	if want := 1000*0.001 + 10*0.1; math.Abs(sum-want) > 1e-9 {
		t.Fatalf("sum %v, want %v", sum, want)
	}
	b := Bounds()
	for _, c := range []struct {
		q        float64
		min, max float64
	}{{0.5, 0.0007, 0.00103}, {0.99, 0.0007, 0.00103}, {0.995, 0.07, 0.12}} {
		if got := Quantile(c.q, b, cum); got < c.min || got > c.max {
			t.Errorf("quantile %v = %v, want within [%v, %v]", c.q, got, c.min, c.max)
		}
	}
	if !math.IsNaN(Quantile(0.5, b, make([]uint64, NumBuckets+1))) {
		t.Error("an empty histogram's quantile is not NaN")
	}
}

func TestObserveEdges(t *testing.T) {
	var h Hist
	h.Observe(-time.Second) // clock steps never go negative
	h.Observe(time.Hour)    // past the last bound: +Inf
	h.ObserveN(time.Second, 0)
	cum, n, _ := h.Snapshot()
	if n != 2 || cum[0] != 1 || cum[NumBuckets-1] != 1 || cum[NumBuckets] != 2 {
		t.Fatalf("counts %v (n %d): want one in the first bucket and one in +Inf", cum, n)
	}
	b := Bounds()
	if b[0] != 1e-6 || b[NumBuckets-1] < 10 || b[NumBuckets-1] > 12 {
		t.Fatalf("bounds run %v..%v, want 1 µs to about 11.9 s", b[0], b[NumBuckets-1])
	}
	for i := 1; i < NumBuckets; i++ {
		if r := b[i] / b[i-1]; r < 1.3 || r > 1.5 {
			t.Fatalf("bucket %d is x%.2f the one before, want about 1.41", i, r)
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	var h Hist
	b.RunParallel(func(pb *testing.PB) {
		d := 3 * time.Millisecond
		for pb.Next() {
			h.Observe(d)
		}
	})
}
