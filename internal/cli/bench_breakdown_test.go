package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/latency"
	"github.com/berthmq/berth/internal/testcluster"
)

// TestBenchProduceBreakdown runs bench produce --breakdown against a broker
// in durability.mode=fsync: every stage of the produce path is counted
// for this run only, and the stages a request passes one after another
// fit inside its total.
func TestBenchProduceBreakdown(t *testing.T) {
	n := testcluster.Start(t)
	addr, metrics := n.Addr(), "http://"+n.HTTPAddr()+"/metrics"
	topic := uniqueTopic(t)

	// A first run, so the second's figures must be differences.
	if _, errOut, err := runCLI(t, "", "bench", "produce", "--topic", topic, "--num-records", "300", "--linger", "0", "-b", addr); err != nil {
		t.Fatalf("bench produce: %v\n%s", err, errOut)
	}
	out, errOut, err := runCLI(t, "", "bench", "produce", "--topic", topic, "--num-records", "2000", "--record-size", "200",
		"--throughput", "4000", "--linger", "0", "--breakdown", "--metrics-url", metrics, "--json", "-b", addr)
	if err != nil {
		t.Fatalf("bench produce --breakdown: %v\n%s", err, errOut)
	}
	var res benchProduceResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Records != 2000 {
		t.Fatalf("acked %d records, want 2000", res.Records)
	}
	rows := map[string]stageRow{}
	for _, r := range res.Breakdown {
		rows[r.Stage] = r
	}
	total := rows["total"]
	// Each produce request carries at least one record; a paced run at
	// linger 0 sends many requests, and no earlier run's are counted.
	if total.Count == 0 || total.Count > 2000 {
		t.Fatalf("total counts %d requests for 2000 records", total.Count)
	}
	for _, st := range latency.Stages() {
		r, ok := rows[st.String()]
		if st.Follower() {
			if ok {
				t.Errorf("follower stage %s listed (count %d) for a single broker", st, r.Count)
			}
			continue
		}
		if !ok {
			t.Fatalf("stage %s missing from the breakdown: %+v", st, res.Breakdown)
		}
		if r.Count == 0 {
			t.Errorf("stage %s counted nothing", st)
		}
		if r.P50 > r.P99 || r.P99 > r.P999 || r.Mean < 0 {
			t.Errorf("stage %s: p50 %v p99 %v p99.9 %v mean %v out of order", st, r.P50, r.P99, r.P999, r.Mean)
		}
	}
	// total and response are counted once a response is written, which
	// the client may see (and scrape /metrics) a moment before the broker
	// counts it: allow the last few requests of the run (kgo keeps up to
	// five in flight) to be missing from them.
	const skew = 5
	near := func(n, want uint64) bool { return n <= want+skew && n+skew >= want }
	for _, s := range []string{"queue", "validate", "response"} { // per request
		if !near(rows[s].Count, total.Count) {
			t.Errorf("stage %s counted %d requests, total %d", s, rows[s].Count, total.Count)
		}
	}
	// Batches are at most requests here (one partition).
	for _, s := range []string{"flush_wait", "write", "fsync_wait", "fsync", "isr_wait"} {
		if rows[s].Count > total.Count+skew {
			t.Errorf("stage %s counted %d batches, more than the %d requests", s, rows[s].Count, total.Count)
		}
	}
	// The fsync's mean is part of every request's total (mean of a sum is
	// the sum of means); the client waits at least as long as the broker.
	if f := rows["fsync"].Mean; f <= 0 || f > total.Mean {
		t.Errorf("fsync mean %v ms against total mean %v ms", f, total.Mean)
	}
	if total.Mean > res.LatencyMs.Mean*1.05+0.05 {
		t.Errorf("brokers' total mean %v ms over the client's produce-to-ack mean %v ms", total.Mean, res.LatencyMs.Mean)
	}

	// The table form names every stage and the client's line.
	out, errOut, err = runCLI(t, "", "bench", "produce", "--topic", topic, "--num-records", "100", "--breakdown", "--metrics-url", metrics, "-b", addr)
	if err != nil {
		t.Fatalf("bench produce --breakdown: %v\n%s", err, errOut)
	}
	for _, want := range []string{"Where the time went", "flush_wait", "fsync_wait", "isr_wait", "client (produce to ack)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	// A wrong URL says what to do.
	_, _, err = runCLI(t, "", "bench", "produce", "--topic", topic, "--num-records", "10", "--breakdown", "--metrics-url", "http://"+closedPort(t)+"/metrics", "-b", addr)
	if err == nil || !strings.Contains(err.Error(), "--metrics-url") {
		t.Errorf("unreachable /metrics: %v, want a hint naming --metrics-url", err)
	}
}

func TestDefaultMetricsURLs(t *testing.T) {
	got := defaultMetricsURLs("127.0.0.1:9092, broker-2:19092,bad")
	want := []string{"http://127.0.0.1:8081/metrics", "http://broker-2:8081/metrics"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("defaultMetricsURLs = %v, want %v", got, want)
	}
}
