package tests

// `berth bench queue` run in-process (cli.Run) against a broker with tiny
// counts: every preloaded job is processed exactly once by the share-group
// workers, the latency phase measures, the table is printed and the
// topics the run created are gone afterwards.

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/cli"
	tc "github.com/berthmq/berth/internal/testcluster"
)

type benchQueueJSON struct {
	Partitions int32 `json:"partitions"`
	JobSize    int   `json:"job_size"`
	Runs       []struct {
		Workers      int     `json:"workers"`
		Jobs         int64   `json:"jobs"`
		Deliveries   int64   `json:"deliveries"`
		Redelivered  int64   `json:"redelivered"`
		Missing      int64   `json:"missing"`
		AckErrors    int64   `json:"ack_errors"`
		JobsPerSec   float64 `json:"jobs_per_sec"`
		LatencyJobs  int64   `json:"latency_jobs"`
		AckLatencyMs struct {
			P50 float64 `json:"p50"`
			P99 float64 `json:"p99"`
		} `json:"ack_latency_ms"`
		E2ELatencyMs struct {
			P50 float64 `json:"p50"`
		} `json:"e2e_latency_ms"`
		Interrupted bool   `json:"interrupted"`
		FirstError  string `json:"first_error"`
	} `json:"runs"`
}

func runBenchQueueCLI(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if err := cli.Run(ctxT(t, 3*time.Minute), append([]string{"bench", "queue"}, args...), strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("berth bench queue %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

func TestBenchQueueEveryJobOnce(t *testing.T) {
	addr := tc.Start(t).Addr()

	out, _ := runBenchQueueCLI(t, "-b", addr, "--topic", "bq", "--partitions", "2", "--size", "256",
		"--workers", "1,3", "--count", "300", "--rate", "200", "--latency-duration", "1500ms", "--json")
	var res benchQueueJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if res.Partitions != 2 || res.JobSize != 256 || len(res.Runs) != 2 {
		t.Fatalf("result %+v: want 2 partitions, 256-byte jobs and 2 runs", res)
	}
	for i, want := range []int{1, 3} {
		r := res.Runs[i]
		if r.Workers != want {
			t.Errorf("run %d: %d workers, want %d", i, r.Workers, want)
		}
		if r.Jobs != 300 || r.Deliveries != 300 || r.Redelivered != 0 || r.Missing != 0 {
			t.Errorf("%d workers: jobs %d, deliveries %d, redelivered %d, missing %d: want every one of 300 jobs once",
				r.Workers, r.Jobs, r.Deliveries, r.Redelivered, r.Missing)
		}
		if r.AckErrors != 0 || r.FirstError != "" || r.Interrupted {
			t.Errorf("%d workers: %d ack errors, first error %q, interrupted %v", r.Workers, r.AckErrors, r.FirstError, r.Interrupted)
		}
		if r.JobsPerSec <= 0 || r.LatencyJobs == 0 || r.AckLatencyMs.P50 <= 0 || r.AckLatencyMs.P99 < r.AckLatencyMs.P50 ||
			r.E2ELatencyMs.P50 < r.AckLatencyMs.P50 {
			t.Errorf("%d workers: implausible figures %+v", r.Workers, r)
		}
	}

	// The table form, without the latency phase.
	out, stderr := runBenchQueueCLI(t, "-b", addr, "--topic", "bq-table", "--workers", "2", "--count", "100", "--latency-duration", "0")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "WORKERS") || !strings.Contains(lines[0], "ACK P99 MS") {
		t.Fatalf("table:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) != 12 || f[0] != "2" || f[1] != "100" || f[5] != "0" || f[6] != "0" || f[8] != "-" {
		t.Errorf("table row %q: want 2 workers, 100 jobs, none redelivered or missing, no latency", lines[1])
	}
	if !strings.Contains(stderr, "preloading 100 jobs") {
		t.Errorf("stderr has no progress: %q", stderr)
	}

	// Every topic the runs created was deleted.
	tds, err := tc.Admin(t, addr).ListTopics(ctxT(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range tds.Names() {
		if strings.HasPrefix(name, "bq-") {
			t.Errorf("topic %s left behind", name)
		}
	}
}
