// Command queuepeers measures work-queue throughput and acknowledgement
// latency of RabbitMQ quorum queues and NATS JetStream work-queue streams,
// the way `berth bench queue` measures Berth's share groups, so the three
// can be compared in one sitting. See README.md.
//
// For each worker count it runs two phases on a fresh queue (stream):
//
//   - throughput: --count jobs are published with publisher confirms
//     (RabbitMQ) or acknowledged async publishes (JetStream), then W
//     workers drain them, acknowledging each job as a worker normally
//     would (basic.ack; Msg.Ack). The clock runs from the workers'
//     start to the moment every worker has seen its last job and made a
//     round trip after its last ack (channel close; connection flush),
//     and for JetStream until the stream is empty (every ack applied).
//   - latency: a publisher offers --rate jobs/s for --latency-duration
//     while the workers consume. JetStream workers acknowledge with
//     AckSync (the server answers the ack), and ack latency is the AckSync
//     call; RabbitMQ has no answer to basic.ack, so there is no ack latency
//     to measure, only end-to-end latency: from the publish timestamp the
//     job carries to the ack having been confirmed (JetStream) or written
//     to the socket (RabbitMQ).
//
// Every job carries its sequence number and its publish time in its first
// 16 bytes, so the run reports jobs seen more than once or never.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

type options struct {
	peer        string
	addr        string
	workers     []int
	count       int64
	size        int
	prefetch    int
	rate        float64
	latencyDur  time.Duration
	maxTime     time.Duration
	asJSON      bool
	label       string
	natsMaxPend int
}

// latencySummary is in milliseconds, as `berth bench queue` reports it.
type latencySummary struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

type run struct {
	Workers      int             `json:"workers"`
	Jobs         int64           `json:"jobs"`
	Deliveries   int64           `json:"deliveries"`
	Redelivered  int64           `json:"redelivered"`
	Missing      int64           `json:"missing"`
	Elapsed      float64         `json:"elapsed_seconds"`
	FirstJobMs   float64         `json:"first_job_ms"`
	JobsPerSec   float64         `json:"jobs_per_sec"`
	LatencyRate  float64         `json:"latency_rate,omitempty"`
	LatencyJobs  int64           `json:"latency_jobs,omitempty"`
	AckLatencyMs *latencySummary `json:"ack_latency_ms,omitempty"` // nil: the peer does not answer acks
	E2ELatencyMs latencySummary  `json:"e2e_latency_ms"`
	Interrupted  bool            `json:"interrupted,omitempty"`
	FirstError   string          `json:"first_error,omitempty"`
}

type result struct {
	Peer     string `json:"peer"`
	Label    string `json:"label,omitempty"`
	JobSize  int    `json:"job_size"`
	Prefetch int    `json:"prefetch"`
	Runs     []run  `json:"runs"`
}

// peer is one system under test.
type peer interface {
	// setup creates the queue (stream) name, empty.
	setup(ctx context.Context, name string) error
	// teardown deletes it.
	teardown(ctx context.Context, name string) error
	// preload publishes n jobs and returns once all are confirmed.
	preload(ctx context.Context, name string, n int64, payload []byte) error
	// publisher returns a function publishing one job; close waits for
	// every confirmation.
	publisher(ctx context.Context, name string) (publish func(job []byte) error, close func() error, err error)
	// worker connects one worker; consume runs until ctx ends, calling
	// handle for each job after acknowledging it (ackDur: how long the
	// ack took to be answered, or -1 when the peer does not answer acks),
	// and returns after a round trip that follows its last ack.
	worker(ctx context.Context, name string, syncAck bool) (w worker, err error)
	// drained returns once the server has applied every ack of name (no
	// job left, none pending), or at once when the peer cannot tell.
	drained(ctx context.Context, name string) error
	close()
}

type worker interface {
	consume(ctx context.Context, handle func(job []byte, ackDur time.Duration)) error
	close()
}

func main() {
	var o options
	var workers string
	flag.StringVar(&o.peer, "peer", "", "rabbitmq or nats")
	flag.StringVar(&o.addr, "addr", "", "host:port of the peer (default 127.0.0.1:5672 or 127.0.0.1:14222)")
	flag.StringVar(&workers, "workers", "1,4,16", "worker counts, each a separate run")
	flag.Int64Var(&o.count, "count", 50000, "jobs preloaded and drained per worker count")
	flag.IntVar(&o.size, "size", 1024, "job size in bytes, at least 16")
	flag.IntVar(&o.prefetch, "prefetch", 500, "jobs a worker holds unacknowledged (RabbitMQ basic.qos prefetch; JetStream pull batch)")
	flag.Float64Var(&o.rate, "rate", 1000, "jobs/s offered in the latency phase")
	flag.DurationVar(&o.latencyDur, "latency-duration", 10*time.Second, "length of the latency phase (0: skip)")
	flag.DurationVar(&o.maxTime, "max-time", 2*time.Minute, "longest a phase may run")
	flag.BoolVar(&o.asJSON, "json", false, "print one JSON object instead of a table")
	flag.StringVar(&o.label, "label", "", "label written into the JSON result")
	flag.IntVar(&o.natsMaxPend, "nats-max-ack-pending", 20000, "JetStream consumer MaxAckPending")
	flag.Parse()
	if flag.Arg(0) == "report" {
		if err := report(flag.Arg(1)); err != nil {
			fatalf("report: %v", err)
		}
		return
	}
	for s := range strings.SplitSeq(workers, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || w < 1 {
			fatalf("--workers %q: want a comma-separated list of positive counts", workers)
		}
		o.workers = append(o.workers, w)
	}
	if o.size < 16 || o.count < 1 || o.rate <= 0 || o.prefetch < 1 {
		fatalf("--size must be at least 16, --count, --rate and --prefetch positive")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var p peer
	var err error
	switch o.peer {
	case "rabbitmq":
		if o.addr == "" {
			o.addr = "127.0.0.1:5672"
		}
		p, err = newRabbit(o)
	case "nats":
		if o.addr == "" {
			o.addr = "127.0.0.1:14222"
		}
		p, err = newNATS(o)
	default:
		fatalf("--peer %q: want rabbitmq or nats", o.peer)
	}
	if err != nil {
		fatalf("connecting to %s at %s: %v", o.peer, o.addr, err)
	}
	defer p.close()

	res := result{Peer: o.peer, Label: o.label, JobSize: o.size, Prefetch: o.prefetch}
	runID := strconv.FormatInt(time.Now().Unix()%1e6, 36)
	var runErr error
	for _, w := range o.workers {
		if ctx.Err() != nil {
			break
		}
		r, err := measure(ctx, p, o, fmt.Sprintf("qp-%s-w%d", runID, w), w)
		res.Runs = append(res.Runs, r)
		if err != nil {
			runErr = fmt.Errorf("%d workers: %w", w, err)
			break
		}
	}
	if o.asJSON {
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
	} else {
		printTable(res)
	}
	if runErr != nil {
		fatalf("%v", runErr)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "queuepeers: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// tracker counts deliveries per job and signals when every job was seen.
type tracker struct {
	mu          sync.Mutex
	seen        []uint8
	distinct    int64
	deliveries  int64
	redelivered int64
	want        int64
	done        chan struct{}
	once        sync.Once
	acks        []time.Duration
	e2e         []time.Duration
	warm        time.Time // jobs published before this are not measured
	firstAt     time.Time // first delivery
	firstErr    error
}

func newTracker(want, capacity int64) *tracker {
	return &tracker{seen: make([]uint8, capacity), want: want, done: make(chan struct{})}
}

func (t *tracker) saw(job []byte, ackDur time.Duration, now time.Time) {
	if len(job) < 16 {
		return
	}
	seq := binary.BigEndian.Uint64(job)
	pub := time.Unix(0, int64(binary.BigEndian.Uint64(job[8:])))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deliveries == 0 {
		t.firstAt = now
	}
	t.deliveries++
	if seq < uint64(len(t.seen)) {
		if t.seen[seq] > 0 {
			t.redelivered++
		} else {
			t.distinct++
		}
		if t.seen[seq] < 255 {
			t.seen[seq]++
		}
	}
	if !t.warm.IsZero() && !pub.Before(t.warm) {
		if ackDur >= 0 {
			t.acks = append(t.acks, ackDur)
		}
		t.e2e = append(t.e2e, now.Sub(pub))
	}
	if t.want > 0 && t.distinct >= t.want {
		t.once.Do(func() { close(t.done) })
	}
}

func (t *tracker) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.firstErr == nil {
		t.firstErr = err
	}
}

// job fills buf with seq and the current time.
func stamp(buf []byte, seq uint64) []byte {
	binary.BigEndian.PutUint64(buf, seq)
	binary.BigEndian.PutUint64(buf[8:], uint64(time.Now().UnixNano()))
	return buf
}

func payload(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte('A' + i%26)
	}
	return b
}

func measure(ctx context.Context, p peer, o options, name string, n int) (run, error) {
	r := run{Workers: n}
	// ---- throughput ----
	if err := p.setup(ctx, name); err != nil {
		return r, fmt.Errorf("creating %s: %w", name, err)
	}
	logf("%s %d workers: preloading %d jobs of %d bytes into %s", o.peer, n, o.count, o.size, name)
	if err := p.preload(ctx, name, o.count, payload(o.size)); err != nil {
		return r, fmt.Errorf("preloading: %w", err)
	}
	tr := newTracker(o.count, o.count)
	start, elapsed, interrupted, err := drain(ctx, p, o, name, n, tr, false)
	if !tr.firstAt.IsZero() {
		r.FirstJobMs = ms(tr.firstAt.Sub(start))
	}
	_ = p.teardown(context.WithoutCancel(ctx), name)
	r.Jobs, r.Deliveries, r.Redelivered, r.Missing = tr.distinct, tr.deliveries, tr.redelivered, o.count-tr.distinct
	r.Elapsed = round3(elapsed.Seconds())
	if s := elapsed.Seconds(); s > 0 {
		r.JobsPerSec = round3(float64(r.Jobs) / s)
	}
	r.Interrupted = interrupted
	if tr.firstErr != nil {
		r.FirstError = tr.firstErr.Error()
	}
	logf("%s %d workers: %d jobs in %.3f s, %.0f jobs/s, %d redelivered, %d missing", o.peer, n, r.Jobs, r.Elapsed, r.JobsPerSec, r.Redelivered, r.Missing)
	if err != nil || interrupted || o.latencyDur == 0 {
		return r, err
	}

	// ---- latency ----
	lname := name + "-lat"
	if err := p.setup(ctx, lname); err != nil {
		return r, fmt.Errorf("creating %s: %w", lname, err)
	}
	defer func() { _ = p.teardown(context.WithoutCancel(ctx), lname) }()
	total := int64(o.rate*o.latencyDur.Seconds()) + 1
	lt := newTracker(0, total+1)
	if err := latency(ctx, p, o, lname, n, lt, total); err != nil {
		return r, err
	}
	r.LatencyRate = o.rate
	r.LatencyJobs = int64(len(lt.e2e))
	if o.peer == "nats" {
		s := summarize(lt.acks)
		r.AckLatencyMs = &s
	}
	r.E2ELatencyMs = summarize(lt.e2e)
	if lt.firstErr != nil && r.FirstError == "" {
		r.FirstError = lt.firstErr.Error()
	}
	ack := "-"
	if r.AckLatencyMs != nil {
		ack = fmt.Sprintf("%.3f/%.3f", r.AckLatencyMs.P50, r.AckLatencyMs.P99)
	}
	logf("%s %d workers: latency at %.0f/s: ack p50/p99 %s ms, e2e p50/p99 %.3f/%.3f ms", o.peer, n, o.rate, ack, r.E2ELatencyMs.P50, r.E2ELatencyMs.P99)
	return r, nil
}

// drain runs n workers until every job was seen, and returns the time from
// their start to the last worker's final round trip.
func drain(ctx context.Context, p peer, o options, name string, n int, tr *tracker, syncAck bool) (time.Time, time.Duration, bool, error) {
	ws := make([]worker, 0, n)
	defer func() {
		for _, w := range ws {
			w.close()
		}
	}()
	for range n {
		w, err := p.worker(ctx, name, syncAck)
		if err != nil {
			return time.Time{}, 0, false, err
		}
		ws = append(ws, w)
	}
	pctx, cancel := context.WithTimeout(ctx, o.maxTime)
	defer cancel()
	wctx, stopWorkers := context.WithCancel(pctx)
	defer stopWorkers()
	go func() {
		select {
		case <-tr.done:
		case <-wctx.Done():
		}
		stopWorkers()
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			if err := w.consume(wctx, func(job []byte, ackDur time.Duration) { tr.saw(job, ackDur, time.Now()) }); err != nil && wctx.Err() == nil {
				tr.fail(err)
			}
		})
	}
	wg.Wait()
	if tr.distinct >= tr.want {
		if err := p.drained(pctx, name); err != nil {
			tr.fail(fmt.Errorf("waiting for the acks to be applied: %w", err))
		}
	}
	return start, time.Since(start), pctx.Err() != nil, nil
}

// latency offers o.rate jobs/s for o.latencyDur to n workers.
func latency(ctx context.Context, p peer, o options, name string, n int, tr *tracker, total int64) error {
	ws := make([]worker, 0, n)
	defer func() {
		for _, w := range ws {
			w.close()
		}
	}()
	for range n {
		w, err := p.worker(ctx, name, true)
		if err != nil {
			return err
		}
		ws = append(ws, w)
	}
	publish, closePub, err := p.publisher(ctx, name)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, o.latencyDur+o.maxTime)
	defer cancel()
	wctx, stopWorkers := context.WithCancel(pctx)
	defer stopWorkers()
	start := time.Now()
	tr.mu.Lock()
	tr.warm = start.Add(time.Second) // as berth bench queue: the first second is not measured
	tr.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			if err := w.consume(wctx, func(job []byte, ackDur time.Duration) { tr.saw(job, ackDur, time.Now()) }); err != nil && wctx.Err() == nil {
				tr.fail(err)
			}
		})
	}
	logf("%s %d workers: latency at %.0f jobs/s for %s", o.peer, n, o.rate, o.latencyDur)
	base := payload(o.size)
	interval := time.Duration(float64(time.Second) / o.rate)
	var produced int64
	for produced < total && pctx.Err() == nil {
		due := start.Add(time.Duration(produced) * interval)
		if d := time.Until(due); d > time.Millisecond {
			time.Sleep(d)
		}
		if time.Since(start) >= o.latencyDur {
			break
		}
		job := stamp(slices.Clone(base), uint64(produced))
		if err := publish(job); err != nil {
			tr.fail(fmt.Errorf("publishing: %w", err))
			break
		}
		produced++
	}
	if err := closePub(); err != nil {
		tr.fail(fmt.Errorf("publish confirms: %w", err))
	}
	for pctx.Err() == nil {
		tr.mu.Lock()
		got := tr.deliveries
		tr.mu.Unlock()
		if got >= produced {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopWorkers()
	wg.Wait()
	if pctx.Err() != nil && ctx.Err() == nil {
		return errors.New("latency phase: not every job was consumed within --max-time")
	}
	return nil
}

func summarize(ds []time.Duration) latencySummary {
	if len(ds) == 0 {
		return latencySummary{}
	}
	slices.Sort(ds)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		i = max(0, min(i, len(ds)-1))
		return ms(ds[i])
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return latencySummary{P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: ms(ds[len(ds)-1]), Mean: ms(sum / time.Duration(len(ds)))}
}

func ms(d time.Duration) float64 { return round3(float64(d) / 1e6) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func printTable(res result) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tWORKERS\tJOBS\tSECONDS\tFIRST JOB MS\tJOBS/S\tREDELIVERED\tMISSING\tACK P50 MS\tACK P99 MS\tE2E P50 MS\tE2E P99 MS")
	for _, r := range res.Runs {
		a50, a99 := "-", "-"
		if r.AckLatencyMs != nil {
			a50, a99 = fmt.Sprintf("%.3f", r.AckLatencyMs.P50), fmt.Sprintf("%.3f", r.AckLatencyMs.P99)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.1f\t%.1f\t%d\t%d\t%s\t%s\t%.3f\t%.3f\n", res.Peer, r.Workers, r.Jobs, r.Elapsed, r.FirstJobMs, r.JobsPerSec,
			r.Redelivered, r.Missing, a50, a99, r.E2ELatencyMs.P50, r.E2ELatencyMs.P99)
	}
	tw.Flush()
}

// report reads lines of "LABEL<TAB>JSON" (a `berth bench queue --json` or
// `queuepeers --json` result each) and prints, per label and worker count,
// the medians over the repetitions as a markdown table.
func report(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	type key struct {
		label   string
		workers int
	}
	type sample struct{ jps, a50, a99, e50, e99 []float64 }
	samples := map[key]*sample{}
	var keys []key
	for line := range strings.SplitSeq(string(data), "\n") {
		label, js, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		var res struct {
			Runs []run `json:"runs"`
		}
		if err := json.Unmarshal([]byte(js), &res); err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		for _, r := range res.Runs {
			k := key{label, r.Workers}
			s := samples[k]
			if s == nil {
				s = &sample{}
				samples[k] = s
				keys = append(keys, k)
			}
			s.jps = append(s.jps, r.JobsPerSec)
			if r.AckLatencyMs != nil && r.LatencyJobs > 0 {
				s.a50 = append(s.a50, r.AckLatencyMs.P50)
				s.a99 = append(s.a99, r.AckLatencyMs.P99)
			}
			s.e50 = append(s.e50, r.E2ELatencyMs.P50)
			s.e99 = append(s.e99, r.E2ELatencyMs.P99)
		}
	}
	med := func(v []float64) string {
		if len(v) == 0 {
			return "-"
		}
		v = slices.Clone(v)
		slices.Sort(v)
		m := v[len(v)/2]
		if len(v)%2 == 0 {
			m = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		return strconv.FormatFloat(m, 'f', 2, 64)
	}
	fmt.Println("| system | workers | reps | jobs/s (median) | all reps jobs/s | ack p50 / p99 ms | e2e p50 / p99 ms |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, k := range keys {
		s := samples[k]
		var all []string
		for _, v := range s.jps {
			all = append(all, strconv.FormatFloat(v, 'f', 0, 64))
		}
		fmt.Printf("| %s | %d | %d | %s | %s | %s / %s | %s / %s |\n", k.label, k.workers, len(s.jps), med(s.jps),
			strings.Join(all, ", "), med(s.a50), med(s.a99), med(s.e50), med(s.e99))
	}
	return nil
}
