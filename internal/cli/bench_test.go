package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/poll"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestHistBucketsAreContiguous(t *testing.T) {
	next := uint64(0) // the lowest value not yet covered
	for i := range histBuckets {
		lo, hi := histBucketRange(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		if hi < lo {
			t.Fatalf("bucket %d: hi %d < lo %d", i, hi, lo)
		}
		if histBucket(lo) != i || histBucket(hi) != i {
			t.Fatalf("bucket %d [%d, %d] maps back to %d and %d", i, lo, hi, histBucket(lo), histBucket(hi))
		}
		if i >= 2*histHalf {
			// Width relative to the bucket's values is at most 2^-(s-1).
			if w := float64(hi-lo+1) / float64(lo); w > 1.0/histHalf {
				t.Fatalf("bucket %d relative width %g", i, w)
			}
		}
		next = hi + 1
	}
	if next != 0 {
		t.Fatalf("the buckets end at %d, not at MaxUint64", next-1)
	}
}

func TestHistogramSmallValuesAreExact(t *testing.T) {
	var h histogram
	for v := int64(1); v <= 100; v++ {
		h.record(v)
	}
	for _, tc := range []struct {
		q    float64
		want int64
	}{{0, 1}, {0.01, 1}, {0.5, 50}, {0.99, 99}, {0.999, 100}, {1, 100}} {
		if got := h.quantile(tc.q); got != tc.want {
			t.Errorf("quantile(%g) = %d, want %d", tc.q, got, tc.want)
		}
	}
	if h.count() != 100 || h.mean() != 50.5 {
		t.Errorf("count %d mean %g", h.count(), h.mean())
	}
}

func TestHistogramEmptyAndClamps(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 || h.mean() != 0 {
		t.Error("empty histogram is not all zero")
	}
	h.record(-5) // clamped to 0
	if h.quantile(1) != 0 {
		t.Errorf("negative value recorded as %d", h.quantile(1))
	}
	h = histogram{}
	h.record(1_000_003) // one value: every quantile is exactly it, not its bucket's top
	for _, q := range []float64{0, 0.5, 0.999, 1} {
		if got := h.quantile(q); got != 1_000_003 {
			t.Errorf("single value: quantile(%g) = %d", q, got)
		}
	}
}

// TestHistogramQuantilesMatchExact compares against sorted exact data over
// a wide, skewed range (latencies from 10µs to 10s).
func TestHistogramQuantilesMatchExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h histogram
	vals := make([]int64, 200000)
	for i := range vals {
		v := int64(math.Exp(rng.Float64()*math.Log(1e6)) * 1e4) // 10µs .. 10s in ns, log-uniform
		vals[i] = v
		h.record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999} {
		exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := h.quantile(q)
		if got < exact {
			t.Errorf("p%g = %d below the exact %d (should report the bucket top)", q*100, got, exact)
		}
		if rel := float64(got-exact) / float64(exact); rel > 1.0/histHalf {
			t.Errorf("p%g = %d, exact %d: relative error %.4f", q*100, got, exact, rel)
		}
	}
	if h.quantile(1) != vals[len(vals)-1] || h.quantile(0) != vals[0] {
		t.Errorf("max/min %d/%d, want %d/%d", h.quantile(1), h.quantile(0), vals[len(vals)-1], vals[0])
	}
}

// simulatePacing drives a token bucket on a fake clock: each take's wait is
// slept with a fixed oversleep (timer slack), and producing costs cost.
func simulatePacing(rate float64, records int, oversleep, cost time.Duration) (elapsed time.Duration, sleeps int) {
	now := time.Unix(0, 0)
	start := now
	b := newTokenBucket(rate, now)
	for range records {
		if d := b.take(now); d > 0 {
			now = now.Add(d + oversleep)
			sleeps++
		}
		now = now.Add(cost)
	}
	return now.Sub(start), sleeps
}

func TestTokenBucketHoldsTheRate(t *testing.T) {
	for _, tc := range []struct {
		rate      float64
		records   int
		oversleep time.Duration
	}{
		{10, 200, 0},
		{1000, 5000, 200 * time.Microsecond},
		{100000, 500000, time.Millisecond},
		{1e6, 2000000, 2 * time.Millisecond},
	} {
		elapsed, sleeps := simulatePacing(tc.rate, tc.records, tc.oversleep, 100*time.Nanosecond)
		got := float64(tc.records) / elapsed.Seconds()
		if math.Abs(got-tc.rate)/tc.rate > 0.02 {
			t.Errorf("rate %g: achieved %.1f/s over %s", tc.rate, got, elapsed)
		}
		// At high rates it must not sleep per record: no sleep shorter
		// than minPaceSleep is asked for.
		if maxSleeps := int(elapsed/minPaceSleep) + 1; sleeps > maxSleeps {
			t.Errorf("rate %g: %d sleeps in %s, more than one per %s", tc.rate, sleeps, elapsed, minPaceSleep)
		}
	}
}

func TestTokenBucketBurstIsBounded(t *testing.T) {
	now := time.Unix(0, 0)
	b := newTokenBucket(1000, now)
	now = now.Add(time.Hour) // idle for an hour: catch-up is capped at burst
	free := 0
	for b.take(now) == 0 {
		free++
	}
	// burst (100) plus up to minPaceSleep of debt (1 record at 1000/s).
	if free < 100 || free > 102 {
		t.Errorf("%d records went out at once after idling, want about 100", free)
	}
}

func TestBenchProduceOptionsValidate(t *testing.T) {
	base := func() benchProduceOptions {
		return benchProduceOptions{topic: "t", partitions: 1, recordSize: 1024, throughput: -1, maxInflight: 1, batchMaxBytes: 1 << 20, producers: 1}
	}
	o := base()
	if err := o.validate(); err != nil || o.numRecords != 100000 {
		t.Errorf("defaults: %v, num-records %d", err, o.numRecords)
	}
	o = base()
	o.duration = time.Second
	if err := o.validate(); err != nil || o.numRecords != 0 {
		t.Errorf("--duration: %v, num-records %d", err, o.numRecords)
	}
	for name, mut := range map[string]func(*benchProduceOptions){
		"both":            func(o *benchProduceOptions) { o.numRecords, o.duration = 1, time.Second },
		"throughput 0":    func(o *benchProduceOptions) { o.throughput = 0 },
		"throughput -2":   func(o *benchProduceOptions) { o.throughput = -2 },
		"inflight 0":      func(o *benchProduceOptions) { o.maxInflight = 0 },
		"batch too small": func(o *benchProduceOptions) { o.batchMaxBytes = 100 },
		"negative size":   func(o *benchProduceOptions) { o.recordSize = -1 },
		"no topic":        func(o *benchProduceOptions) { o.topic = "" },
		"linger 2m":       func(o *benchProduceOptions) { o.linger = 2 * time.Minute },
		"no producers":    func(o *benchProduceOptions) { o.producers = 0 },
		"1001 producers":  func(o *benchProduceOptions) { o.producers = 1001 },
		"records < producers": func(o *benchProduceOptions) {
			o.numRecords, o.producers = 2, 3
		},
	} {
		o := base()
		mut(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestBenchProduceResultAndOutput(t *testing.T) {
	var st produceStats
	for i := 1; i <= 1000; i++ {
		st.hist.record(int64(i) * int64(time.Microsecond)) // 1µs .. 1ms
	}
	st.acked, st.errors = 1000, 2
	o := &benchProduceOptions{topic: "b", recordSize: 1 << 20}
	r := benchProduceResultOf(o, &st, 2*time.Second)
	if r.RecordsPerSec != 500 || r.MiBPerSec != 500 || r.Elapsed != 2 || r.Errors != 2 {
		t.Errorf("result %+v", r)
	}
	if r.LatencyMs.Max != 1 || r.LatencyMs.P50 < 0.5 || r.LatencyMs.P50 > 0.505 || r.LatencyMs.P99 < 0.99 || r.LatencyMs.P99 > 0.998 {
		t.Errorf("latency %+v", r.LatencyMs)
	}

	var b bytes.Buffer
	r.LatencyMs = latencySummary{P50: 0.5, P99: 0.99, P999: 1, Max: 1, Mean: 0.5}
	if err := printBenchProduce(&b, false, r); err != nil {
		t.Fatal(err)
	}
	want := "RECORDS  RECORDS/S  MIB/S   P50 MS  P99 MS  P99.9 MS  MAX MS  ERRORS\n" +
		"1000     500.0      500.00  0.500   0.990   1.000     1.000   2\n"
	if b.String() != want {
		t.Errorf("table\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	if err := printBenchProduce(&b, true, r); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"topic", "records", "errors", "record_size", "elapsed_seconds", "records_per_sec", "mib_per_sec", "latency_ms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON has no %q: %s", k, b.String())
		}
	}
	lat, _ := m["latency_ms"].(map[string]any)
	for _, k := range []string{"p50", "p99", "p99_9", "max", "mean"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("latency_ms has no %q", k)
		}
	}
}

func TestPrintBenchConsume(t *testing.T) {
	var b bytes.Buffer
	r := benchConsumeResult{Topic: "b", Records: 2048, Bytes: 2 << 20, Elapsed: 0.5, FirstRecordMs: 12.25, RecordsPerSec: 4096, MiBPerSec: 4}
	if err := printBenchConsume(&b, false, r); err != nil {
		t.Fatal(err)
	}
	want := "RECORDS  MIB   SECONDS  RECORDS/S  MIB/S  FIRST RECORD MS\n" +
		"2048     2.00  0.500    4,096.0    4.00   12.2\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestStartProgressPrintsAndStops(t *testing.T) {
	var buf syncBuffer
	stop := startProgress(&buf, time.Now(), func() (int64, int64, string) { return 10, 10 << 20, "p99 1.000 ms" })
	poll.Until(t, 5*time.Second, func() error {
		if !strings.Contains(buf.String(), "10 records, ") {
			return errors.New("no progress line yet")
		}
		return nil
	})
	stop()
	stop() // idempotent
	if !strings.Contains(buf.String(), "MiB/s, p99 1.000 ms\n") {
		t.Errorf("progress line %q", buf.String())
	}
}

// TestIntegrationBench runs a small bench produce and then bench consume to
// the end offsets.
func TestIntegrationBench(t *testing.T) {
	addr := integrationBootstrap(t)
	topic := uniqueTopic(t)
	t.Cleanup(func() { runCLI(t, "", "topic", "delete", topic, "-b", addr) })

	out, errOut, err := runCLI(t, "", "bench", "produce", "--topic", topic, "--partitions", "2", "--num-records", "2000", "--record-size", "100", "--json", "-b", addr)
	if err != nil {
		t.Fatalf("bench produce: %v\n%s", err, errOut)
	}
	var pr benchProduceResult
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if pr.Records != 2000 || pr.Errors != 0 || pr.RecordsPerSec <= 0 || pr.LatencyMs.Max <= 0 || pr.LatencyMs.P50 > pr.LatencyMs.P99 {
		t.Errorf("bench produce result %+v", pr)
	}
	if !strings.Contains(errOut, "Created topic "+topic) {
		t.Errorf("stderr does not report creating the topic: %q", errOut)
	}

	// Three producers share the records (1001 does not divide by three)
	// and report them in one result.
	out, errOut, err = runCLI(t, "", "bench", "produce", "--topic", topic, "--producers", "3", "--num-records", "1001", "--record-size", "100", "--json", "-b", addr)
	if err != nil {
		t.Fatalf("bench produce --producers 3: %v\n%s", err, errOut)
	}
	pr = benchProduceResult{}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if pr.Records != 1001 || pr.Errors != 0 || pr.LatencyMs.Max <= 0 {
		t.Errorf("bench produce --producers 3 result %+v", pr)
	}

	out, errOut, err = runCLI(t, "", "bench", "consume", "--topic", topic, "--json", "-b", addr)
	if err != nil {
		t.Fatalf("bench consume: %v\n%s", err, errOut)
	}
	var cr benchConsumeResult
	if err := json.Unmarshal([]byte(out), &cr); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if cr.Records != 3001 || cr.Bytes != 3001*100 {
		t.Errorf("bench consume result %+v", cr)
	}

	// Paced: 500 records at 1000/s take about half a second.
	start := time.Now()
	if _, errOut, err := runCLI(t, "", "bench", "produce", "--topic", topic, "--num-records", "500", "--throughput", "1000", "--acks", "1", "-b", addr); err != nil {
		t.Fatalf("paced bench produce: %v\n%s", err, errOut)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("500 records at 1000/s took %s", d)
	}
}
