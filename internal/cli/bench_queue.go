package cli

// `berth bench queue`: work-queue (KIP-932 share group) throughput and
// acknowledgement latency, measured through kgo's share consumer as a
// worker would use it.
//
// For each worker count it runs two phases, each on a fresh topic and a
// fresh share group (share.auto.offset.reset=earliest) that are deleted
// afterwards:
//
//   - throughput: --count jobs are preloaded, then the workers drain them.
//     A worker polls, accepts every record (Record.Ack(AckAccept)) and
//     polls again, so its acks ride on its next ShareFetch; when every job
//     has been seen each worker calls FlushAcks. Throughput is jobs over
//     the time from the workers' first poll to the last FlushAcks
//     returning, so every ack counted has been answered by the broker.
//   - latency: a producer paces --rate jobs/s for --latency-duration while
//     the workers poll, accept every record and call FlushAcks after each
//     poll. Ack latency is the time from Record.Ack to FlushAcks returning
//     (the broker has answered the ShareAcknowledge carrying the ack and
//     the ShareAckCallback has run); end-to-end latency is from the
//     record's produce timestamp (set by this process just before
//     Produce) to the same point.
//
// Every job carries its sequence number in its first 8 bytes, so the run
// can say whether each job was processed exactly once.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type benchQueueOptions struct {
	topic       string
	partitions  int32
	replication int16
	size        int
	count       int64
	workers     []int
	maxRecords  int32
	rate        float64
	latencyDur  time.Duration
	maxTime     time.Duration
	keep        bool
}

// queueRun is the result for one worker count.
type queueRun struct {
	Workers      int            `json:"workers"`
	Jobs         int64          `json:"jobs"`        // distinct jobs acknowledged in the throughput phase
	Deliveries   int64          `json:"deliveries"`  // records received, redeliveries included
	Redelivered  int64          `json:"redelivered"` // deliveries of a job already seen
	Missing      int64          `json:"missing"`     // preloaded jobs never received
	AckErrors    int64          `json:"ack_errors"`  // partitions the broker (or client) failed in an ack answer
	Elapsed      float64        `json:"elapsed_seconds"`
	FirstJobMs   float64        `json:"first_job_ms"` // from the workers' start to the first job received (the group join)
	JobsPerSec   float64        `json:"jobs_per_sec"`
	LatencyRate  float64        `json:"latency_rate,omitempty"` // jobs/s offered in the latency phase
	LatencyJobs  int64          `json:"latency_jobs,omitempty"` // jobs measured in the latency phase
	AckLatencyMs latencySummary `json:"ack_latency_ms"`
	E2ELatencyMs latencySummary `json:"e2e_latency_ms"`
	Interrupted  bool           `json:"interrupted,omitempty"`
	FirstError   string         `json:"first_error,omitempty"`
}

type benchQueueResult struct {
	Partitions int32      `json:"partitions"`
	JobSize    int        `json:"job_size"`
	MaxRecords int32      `json:"max_records"`
	Runs       []queueRun `json:"runs"`
}

func newBenchQueueCmd(cf *clientFlags) *cobra.Command {
	var o benchQueueOptions
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Measure work-queue (share group) job throughput and ack latency with 1..N workers",
		Long: `For each --workers count, preload --count jobs of --size bytes into a fresh
topic and drain them with that many share-group workers (each its own kgo
share consumer accepting every job), then offer --rate jobs/s for
--latency-duration to measure ack latency (Record.Ack to FlushAcks
returning) and end-to-end latency (produce timestamp to FlushAcks
returning). Topics and groups are created per run and deleted afterwards
(--keep keeps them). Progress goes to stderr; a table (or --json) to
stdout.`,
		Example: `  berth bench queue --workers 1,4,16
  berth bench queue --workers 4 --count 20000 --rate 2000 --latency-duration 5s --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchQueue(cmd, cf, &o)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.topic, "topic", "t", "berth-bench-queue", "prefix of the topics and share groups created for each run")
	fs.Int32VarP(&o.partitions, "partitions", "p", 4, "partitions of each topic")
	fs.Int16Var(&o.replication, "replication-factor", -1, "replication factor of each topic (-1: broker default)")
	fs.IntVarP(&o.size, "size", "s", 1024, "job (record value) size in bytes, at least 8")
	fs.Int64VarP(&o.count, "count", "n", 200000, "jobs preloaded and drained per worker count (large enough that joining the group, up to ~0.5 s, does not dominate)")
	fs.IntSliceVarP(&o.workers, "workers", "w", []int{1, 4, 16}, "worker counts to run, each a separate run")
	fs.Int32Var(&o.maxRecords, "max-records", 500, "records per ShareFetch (kgo ShareMaxRecords)")
	fs.Float64Var(&o.rate, "rate", 1000, "jobs/s offered in the latency phase")
	fs.DurationVar(&o.latencyDur, "latency-duration", 10*time.Second, "length of the latency phase (0: skip it)")
	fs.DurationVar(&o.maxTime, "max-time", 2*time.Minute, "longest a phase may run before it is cut short")
	fs.BoolVar(&o.keep, "keep", false, "keep the topics and groups the run created")
	return cmd
}

func (o *benchQueueOptions) validate() error {
	switch {
	case o.topic == "":
		return errors.New("--topic is empty")
	case o.partitions < 1:
		return fmt.Errorf("--partitions %d: must be at least 1", o.partitions)
	case o.size < 8:
		return fmt.Errorf("--size %d: must be at least 8 (a job carries its sequence number)", o.size)
	case o.count < 1:
		return fmt.Errorf("--count %d: must be at least 1", o.count)
	case len(o.workers) == 0:
		return errors.New("--workers is empty")
	case o.maxRecords < 1:
		return fmt.Errorf("--max-records %d: must be at least 1", o.maxRecords)
	case o.rate <= 0:
		return fmt.Errorf("--rate %g: must be positive", o.rate)
	case o.latencyDur < 0:
		return fmt.Errorf("--latency-duration %s: must be 0 or more", o.latencyDur)
	case o.maxTime <= 0:
		return fmt.Errorf("--max-time %s: must be positive", o.maxTime)
	}
	for _, w := range o.workers {
		if w < 1 || w > 1024 {
			return fmt.Errorf("--workers %d: must be between 1 and 1024", w)
		}
	}
	return nil
}

func runBenchQueue(cmd *cobra.Command, cf *clientFlags, o *benchQueueOptions) error {
	if err := cf.resolve(cmd); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	ctx := cmd.Context()
	errOut := cmd.ErrOrStderr()

	cl, adm, err := cf.clients(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	if err := requireShareGroups(ctx, cf, adm); err != nil {
		return err
	}

	b := &queueBench{cf: cf, o: o, cl: cl, adm: adm, errOut: errOut, runID: strconv.FormatInt(time.Now().Unix()%1e6, 36)}
	b.payload = randomPayload(o.size)
	res := benchQueueResult{Partitions: o.partitions, JobSize: o.size, MaxRecords: o.maxRecords}
	var runErr error
	for _, w := range o.workers {
		if ctx.Err() != nil {
			break
		}
		run, err := b.run(ctx, w)
		res.Runs = append(res.Runs, run)
		if err != nil {
			runErr = fmt.Errorf("%d workers: %w", w, err)
			break
		}
	}
	if err := printBenchQueue(cmd.OutOrStdout(), cf.json, res); err != nil {
		return err
	}
	if runErr == nil {
		for _, r := range res.Runs {
			if r.Missing > 0 && !r.Interrupted {
				runErr = fmt.Errorf("%d workers: %d of %d jobs never arrived", r.Workers, r.Missing, o.count)
				break
			}
		}
	}
	return runErr
}

// requireShareGroups fails with advice when the cluster does not serve
// share groups (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge).
func requireShareGroups(ctx context.Context, cf *clientFlags, adm *kadm.Client) error {
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return cf.explain(err)
	}
	var missing []string
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil || len(missing) > 0 {
			return
		}
		for _, k := range []kmsg.Key{kmsg.ShareGroupHeartbeat, kmsg.ShareFetch, kmsg.ShareAcknowledge} {
			if _, ok := v.KeyMaxVersion(k.Int16()); !ok {
				missing = append(missing, k.Name())
			}
		}
	})
	if len(missing) > 0 {
		return fmt.Errorf("the cluster does not serve share groups (no %v in ApiVersions)", missing)
	}
	return nil
}

type queueBench struct {
	cf      *clientFlags
	o       *benchQueueOptions
	cl      *kgo.Client
	adm     *kadm.Client
	errOut  io.Writer
	runID   string
	payload []byte
}

// queueStats is what the workers of one phase share.
type queueStats struct {
	mu          sync.Mutex
	seen        []uint8 // deliveries per sequence number, saturating
	distinct    int64
	deliveries  int64
	redelivered int64
	ackHist     histogram
	e2eHist     histogram
	measured    int64
	firstAt     time.Time // first delivery
	firstErr    error

	ackErrors atomic.Int64
	done      chan struct{} // closed once every expected job was seen
	doneOnce  sync.Once
	want      int64 // distinct jobs that end the phase (0: run until cancelled)
}

func newQueueStats(want int64, capacity int64) *queueStats {
	return &queueStats{seen: make([]uint8, capacity), done: make(chan struct{}), want: want}
}

// saw records a delivery of job seq.
func (s *queueStats) saw(seq uint64) {
	if seq >= uint64(len(s.seen)) {
		return // not one of ours
	}
	if s.deliveries == 0 {
		s.firstAt = time.Now()
	}
	s.deliveries++
	if s.seen[seq] > 0 {
		s.redelivered++
	} else {
		s.distinct++
	}
	if s.seen[seq] < 255 {
		s.seen[seq]++
	}
	if s.want > 0 && s.distinct >= s.want {
		s.doneOnce.Do(func() { close(s.done) })
	}
}

func (s *queueStats) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstErr == nil {
		s.firstErr = err
	}
}

// run measures one worker count: the throughput phase, then (unless
// --latency-duration is 0) the latency phase.
func (b *queueBench) run(ctx context.Context, workers int) (queueRun, error) {
	run := queueRun{Workers: workers}
	name := fmt.Sprintf("%s-%s-w%d", b.o.topic, b.runID, workers)

	st, start, elapsed, interrupted, err := b.throughput(ctx, name, workers)
	if st != nil {
		st.mu.Lock()
		if !st.firstAt.IsZero() {
			run.FirstJobMs = round3(float64(st.firstAt.Sub(start)) / 1e6)
		}
		run.Jobs = st.distinct
		run.Deliveries = st.deliveries
		run.Redelivered = st.redelivered
		run.Missing = b.o.count - st.distinct
		run.AckErrors = st.ackErrors.Load()
		if st.firstErr != nil {
			run.FirstError = st.firstErr.Error()
		}
		st.mu.Unlock()
	}
	run.Elapsed = round3(elapsed.Seconds())
	if s := elapsed.Seconds(); s > 0 {
		run.JobsPerSec = round3(float64(run.Jobs) / s)
	}
	run.Interrupted = interrupted
	if err != nil || interrupted || b.o.latencyDur == 0 {
		return run, err
	}

	lst, err := b.latency(ctx, name+"-lat", workers)
	if lst != nil {
		lst.mu.Lock()
		run.LatencyRate = b.o.rate
		run.LatencyJobs = lst.measured
		run.AckLatencyMs = summarize(&lst.ackHist)
		run.E2ELatencyMs = summarize(&lst.e2eHist)
		run.AckErrors += lst.ackErrors.Load()
		if lst.firstErr != nil && run.FirstError == "" {
			run.FirstError = lst.firstErr.Error()
		}
		lst.mu.Unlock()
	}
	run.Interrupted = ctx.Err() != nil
	return run, err
}

func summarize(h *histogram) latencySummary {
	ms := func(ns int64) float64 { return round3(float64(ns) / 1e6) }
	return latencySummary{
		P50:  ms(h.quantile(0.50)),
		P99:  ms(h.quantile(0.99)),
		P999: ms(h.quantile(0.999)),
		Max:  ms(h.quantile(1)),
		Mean: ms(int64(h.mean())),
	}
}

// setup creates topic and sets share.auto.offset.reset=earliest on group,
// so jobs produced before the workers join are delivered.
func (b *queueBench) setup(ctx context.Context, topic, group string) error {
	r, err := b.adm.CreateTopic(ctx, b.o.partitions, b.o.replication, nil, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return topicErr(b.cf, topic, err, r.ErrMessage)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	v := "earliest"
	c.Name, c.Op, c.Value = "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, &v
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, b.cl)
	if err != nil {
		return b.cf.explain(err)
	}
	for _, res := range resp.Resources {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			msg := ""
			if res.ErrorMessage != nil {
				msg = ": " + *res.ErrorMessage
			}
			return fmt.Errorf("setting share.auto.offset.reset on group %s: %w%s", group, err, msg)
		}
	}
	return nil
}

// cleanup deletes what setup created, unless --keep.
func (b *queueBench) cleanup(topic, group string) {
	if b.o.keep {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cf.timeout)
	defer cancel()
	if _, err := b.adm.DeleteGroup(ctx, group); err != nil {
		fmt.Fprintf(b.errOut, "Could not delete share group %s: %v\n", group, err)
	}
	if _, err := b.adm.DeleteTopic(ctx, topic); err != nil {
		fmt.Fprintf(b.errOut, "Could not delete topic %s: %v\n", topic, err)
	}
}

// producer returns a client producing to topic with acks=all, spreading
// jobs round-robin over the partitions.
func (b *queueBench) producer(ctx context.Context, topic string, linger time.Duration) (*kgo.Client, error) {
	return b.cf.connect(ctx,
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(linger),
		kgo.MaxBufferedRecords(50000),
	)
}

// job returns a record carrying seq in its first 8 bytes.
func (b *queueBench) job(seq uint64) *kgo.Record {
	v := make([]byte, len(b.payload))
	copy(v, b.payload)
	binary.BigEndian.PutUint64(v, seq)
	return &kgo.Record{Value: v, Timestamp: time.Now()}
}

// worker connects one share consumer of group.
func (b *queueBench) worker(ctx context.Context, topic, group string, st *queueStats) (*kgo.Client, error) {
	return b.cf.connect(ctx,
		kgo.ShareGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ShareMaxRecords(b.o.maxRecords),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			for _, r := range rs {
				if r.Err != nil {
					st.ackErrors.Add(1)
					st.fail(fmt.Errorf("ack %s/%d: %w", r.Topic, r.Partition, r.Err))
				}
			}
		}),
	)
}

func (b *queueBench) connectWorkers(ctx context.Context, n int, topic, group string, st *queueStats) ([]*kgo.Client, func(), error) {
	cls := make([]*kgo.Client, 0, n)
	closeAll := func() {
		var wg sync.WaitGroup
		for _, c := range cls {
			wg.Go(c.Close)
		}
		wg.Wait()
	}
	for range n {
		c, err := b.worker(ctx, topic, group, st)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cls = append(cls, c)
	}
	return cls, closeAll, nil
}

// pollErr returns the first poll error that is not the context ending.
func pollErr(cf *clientFlags, fs kgo.Fetches) error {
	var first error
	fs.EachError(func(t string, p int32, err error) {
		if first == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kgo.ErrClientClosed) {
			first = fmt.Errorf("share fetch %s/%d: %w", t, p, cf.explain(err))
		}
	})
	return first
}

// throughput preloads --count jobs and drains them with n workers.
func (b *queueBench) throughput(ctx context.Context, name string, n int) (*queueStats, time.Time, time.Duration, bool, error) {
	group := name
	if err := b.setup(ctx, name, group); err != nil {
		return nil, time.Time{}, 0, false, err
	}
	defer b.cleanup(name, group)

	fmt.Fprintf(b.errOut, "%d workers: preloading %d jobs of %d bytes into %s (%s)\n",
		n, b.o.count, b.o.size, name, plural(int(b.o.partitions), "partition"))
	prod, err := b.producer(ctx, name, 5*time.Millisecond)
	if err != nil {
		return nil, time.Time{}, 0, false, err
	}
	var perr atomic.Pointer[error]
	for seq := range uint64(b.o.count) {
		if ctx.Err() != nil {
			break
		}
		prod.Produce(ctx, b.job(seq), func(_ *kgo.Record, err error) {
			if err != nil {
				perr.CompareAndSwap(nil, &err)
			}
		})
	}
	ferr := prod.Flush(ctx)
	prod.Close()
	if p := perr.Load(); p != nil {
		return nil, time.Time{}, 0, false, fmt.Errorf("preloading: %w", b.cf.explain(*p))
	}
	if ferr != nil {
		return nil, time.Time{}, 0, ctx.Err() != nil, fmt.Errorf("preloading: %w", b.cf.explain(ferr))
	}

	st := newQueueStats(b.o.count, b.o.count)
	cls, closeAll, err := b.connectWorkers(ctx, n, name, group, st)
	if err != nil {
		return nil, time.Time{}, 0, false, err
	}
	defer closeAll()

	pctx, cancel := context.WithTimeout(ctx, b.o.maxTime)
	defer cancel()
	// Polls end when every job has been seen (or the phase is cut short).
	pollCtx, stopPolls := context.WithCancel(pctx)
	defer stopPolls()
	go func() {
		select {
		case <-st.done:
		case <-pollCtx.Done():
		}
		stopPolls()
	}()

	start := time.Now()
	stopProgress := startProgress(b.errOut, start, func() (int64, int64, string) {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.distinct, st.distinct * int64(b.o.size), fmt.Sprintf("%d workers, %d of %d jobs", n, st.distinct, b.o.count)
	})
	var wg sync.WaitGroup
	for _, c := range cls {
		wg.Go(func() {
			for pollCtx.Err() == nil {
				fs := c.PollRecords(pollCtx, -1)
				if err := pollErr(b.cf, fs); err != nil {
					st.fail(err)
				}
				st.mu.Lock()
				for r := range fs.RecordsAll() {
					if len(r.Value) >= 8 {
						st.saw(binary.BigEndian.Uint64(r.Value))
					}
				}
				st.mu.Unlock()
				for r := range fs.RecordsAll() {
					r.Ack(kgo.AckAccept)
				}
			}
			// Every ack this worker gave is answered before the clock stops.
			fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*b.cf.timeout)
			defer fcancel()
			if err := c.FlushAcks(fctx); err != nil {
				st.fail(fmt.Errorf("flushing acks: %w", err))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	return st, start, elapsed, pctx.Err() != nil, nil
}

// latency offers --rate jobs/s for --latency-duration to n workers that
// flush their acks after every poll.
func (b *queueBench) latency(ctx context.Context, name string, n int) (*queueStats, error) {
	group := name
	if err := b.setup(ctx, name, group); err != nil {
		return nil, err
	}
	defer b.cleanup(name, group)

	total := int64(b.o.rate*b.o.latencyDur.Seconds()) + 1
	st := newQueueStats(0, 0)
	cls, closeAll, err := b.connectWorkers(ctx, n, name, group, st)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	prod, err := b.producer(ctx, name, 0)
	if err != nil {
		return nil, err
	}
	defer prod.Close()

	fmt.Fprintf(b.errOut, "%d workers: latency at %s jobs/s for %s (%s)\n", n, formatRate(b.o.rate), b.o.latencyDur, name)
	pctx, cancel := context.WithTimeout(ctx, b.o.latencyDur+b.o.maxTime)
	defer cancel()
	pollCtx, stopPolls := context.WithCancel(pctx)
	defer stopPolls()

	// The workers join while the first jobs are produced; jobs produced in
	// the first second (the group's assignment settling) are not measured.
	start := time.Now()
	warm := start.Add(time.Second)
	var acked atomic.Int64
	stopProgress := startProgress(b.errOut, start, func() (int64, int64, string) {
		st.mu.Lock()
		defer st.mu.Unlock()
		return acked.Load(), acked.Load() * int64(b.o.size),
			fmt.Sprintf("%d workers, ack p99 %s ms", n, formatMillis(time.Duration(st.ackHist.quantile(0.99))))
	})
	var wg sync.WaitGroup
	for _, c := range cls {
		wg.Go(func() {
			var acks []time.Time
			var stamps []time.Time
			for pollCtx.Err() == nil {
				fs := c.PollRecords(pollCtx, -1)
				if err := pollErr(b.cf, fs); err != nil {
					st.fail(err)
				}
				acks, stamps = acks[:0], stamps[:0]
				for r := range fs.RecordsAll() {
					stamps = append(stamps, r.Timestamp)
					acks = append(acks, time.Now())
					r.Ack(kgo.AckAccept)
				}
				if len(acks) == 0 {
					continue
				}
				if err := c.FlushAcks(pollCtx); err != nil {
					if pollCtx.Err() == nil {
						st.fail(fmt.Errorf("flushing acks: %w", err))
					}
					continue
				}
				done := time.Now()
				acked.Add(int64(len(acks)))
				st.mu.Lock()
				for i, at := range acks {
					if stamps[i].Before(warm) {
						continue
					}
					st.ackHist.record(int64(done.Sub(at)))
					st.e2eHist.record(int64(done.Sub(stamps[i])))
					st.measured++
				}
				st.mu.Unlock()
			}
		})
	}

	bucket := newTokenBucket(b.o.rate, start)
	end := start.Add(b.o.latencyDur)
	var produced int64
	for produced < total && ctx.Err() == nil {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		if d := bucket.take(now); d > 0 {
			sleepCtx(ctx, d)
		}
		prod.Produce(ctx, b.job(uint64(produced)), func(_ *kgo.Record, err error) {
			if err != nil && ctx.Err() == nil {
				st.fail(fmt.Errorf("producing: %w", err))
			}
		})
		produced++
	}
	if err := prod.Flush(pctx); err != nil && ctx.Err() == nil {
		st.fail(fmt.Errorf("producing: %w", err))
	}
	// Let the workers finish what was produced (bounded by --max-time).
	for pctx.Err() == nil && acked.Load() < produced {
		sleepCtx(pctx, 10*time.Millisecond)
	}
	stopPolls()
	wg.Wait()
	stopProgress()
	return st, nil
}

func printBenchQueue(w io.Writer, asJSON bool, r benchQueueResult) error {
	if asJSON {
		return writeJSON(w, r)
	}
	t := newTable(w, "workers", "jobs", "seconds", "first job ms", "jobs/s", "redelivered", "missing", "ack errors",
		"ack p50 ms", "ack p99 ms", "e2e p50 ms", "e2e p99 ms")
	for _, run := range r.Runs {
		lat := func(v float64) string {
			if run.LatencyJobs == 0 {
				return "-"
			}
			return fmtMs(v)
		}
		t.row(run.Workers, run.Jobs, fmt.Sprintf("%.3f", run.Elapsed), fmt.Sprintf("%.1f", run.FirstJobMs), formatRate(run.JobsPerSec),
			run.Redelivered, run.Missing, run.AckErrors,
			lat(run.AckLatencyMs.P50), lat(run.AckLatencyMs.P99), lat(run.E2ELatencyMs.P50), lat(run.E2ELatencyMs.P99))
	}
	return t.flush()
}
