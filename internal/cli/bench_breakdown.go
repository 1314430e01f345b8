package cli

// `berth bench produce --breakdown`: the brokers' produce stage histograms
// (berth_produce_stage_seconds in /metrics, internal/latency) read before
// and after the run, so the table shows where this run's requests spent
// their time beside the client's own latency.

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/berthmq/berth/internal/latency"
)

const stageMetric = "berth_produce_stage_seconds"

// stageHist is one stage's histogram summed over brokers.
type stageHist struct {
	bounds []float64 // upper bounds, +Inf last
	cum    []uint64
	count  uint64
	sum    float64
}

// stageRow is a line of the breakdown.
type stageRow struct {
	Stage string  `json:"stage"`
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
}

// defaultMetricsURLs guesses each bootstrap broker's /metrics on the
// default http.listener port.
func defaultMetricsURLs(bootstrap string) []string {
	var out []string
	for _, b := range strings.Split(bootstrap, ",") {
		host, _, err := net.SplitHostPort(strings.TrimSpace(b))
		if err != nil || host == "" {
			continue
		}
		out = append(out, "http://"+net.JoinHostPort(host, "8081")+"/metrics")
	}
	return out
}

// scrapeStages reads and sums the stage histograms of every URL.
func scrapeStages(ctx context.Context, urls []string) (map[string]*stageHist, error) {
	out := map[string]*stageHist{}
	cl := &http.Client{Timeout: 10 * time.Second}
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, fmt.Errorf("--metrics-url %s: %w", u, err)
		}
		resp, err := cl.Do(req)
		if err != nil {
			return nil, fmt.Errorf("reading %s for --breakdown: %w (give each broker's http.listener with --metrics-url)", u, err)
		}
		fams, err := parseMetrics(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s for --breakdown: %w", u, err)
		}
		fam := fams[stageMetric]
		if fam == nil {
			return nil, fmt.Errorf("%s has no %s: is it a Berth broker's /metrics?", u, stageMetric)
		}
		for _, m := range fam.GetMetric() {
			var stage string
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					stage = l.GetValue()
				}
			}
			h := m.GetHistogram()
			if h == nil || stage == "" {
				continue
			}
			s := out[stage]
			if s == nil {
				s = &stageHist{}
				for _, b := range h.GetBucket() {
					s.bounds = append(s.bounds, b.GetUpperBound())
				}
				if len(s.bounds) == 0 || !math.IsInf(s.bounds[len(s.bounds)-1], 1) {
					s.bounds = append(s.bounds, math.Inf(1))
				}
				s.cum = make([]uint64, len(s.bounds))
				out[stage] = s
			}
			bs := h.GetBucket()
			for i := range s.cum {
				if i < len(bs) && bs[i].GetUpperBound() == s.bounds[i] {
					s.cum[i] += bs[i].GetCumulativeCount()
				} else if i == len(s.cum)-1 {
					s.cum[i] += h.GetSampleCount() // +Inf, which the text format may leave implicit
				}
			}
			s.count += h.GetSampleCount()
			s.sum += h.GetSampleSum()
		}
	}
	return out, nil
}

func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// stageRows is after minus before, one row per stage in the path's order.
func stageRows(before, after map[string]*stageHist) []stageRow {
	var rows []stageRow
	for _, st := range latency.Stages() {
		a := after[st.String()]
		if a == nil {
			continue
		}
		d := stageHist{bounds: a.bounds, cum: append([]uint64(nil), a.cum...), count: a.count, sum: a.sum}
		if b := before[st.String()]; b != nil && len(b.cum) == len(d.cum) {
			for i := range d.cum {
				d.cum[i] -= min(d.cum[i], b.cum[i])
			}
			d.count -= min(d.count, b.count)
			d.sum -= b.sum
		}
		if d.count == 0 && st.Follower() {
			continue // no follower among the brokers scraped, or none fetched
		}
		row := stageRow{Stage: st.String(), Count: d.count}
		if d.count > 0 {
			finite := d.bounds[:len(d.bounds)-1]
			q := func(q float64) float64 { return round3(latency.Quantile(q, finite, d.cum) * 1e3) }
			row.Mean = round3(d.sum / float64(d.count) * 1e3)
			row.P50, row.P99, row.P999 = q(0.5), q(0.99), q(0.999)
		}
		rows = append(rows, row)
	}
	return rows
}

// printBreakdown prints the stage table under the client's figures.
func printBreakdown(w io.Writer, client latencySummary, rows []stageRow) error {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Where the time went (brokers' berth_produce_stage_seconds over this run; per request, or per batch for flush_wait..isr_wait, replica_* on followers):")
	t := newTable(w, "stage", "count", "mean ms", "p50 ms", "p99 ms", "p99.9 ms")
	for _, r := range rows {
		if r.Count == 0 {
			t.row(r.Stage, 0, "-", "-", "-", "-")
			continue
		}
		t.row(r.Stage, r.Count, fmtMs(r.Mean), fmtMs(r.P50), fmtMs(r.P99), fmtMs(r.P999))
	}
	t.row("client (produce to ack)", "", fmtMs(client.Mean), fmtMs(client.P50), fmtMs(client.P99), fmtMs(client.P999))
	return t.flush()
}
