package cli

// `berth bench produce` and `berth bench consume`: load generators in the
// manner of kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh,
// measuring through the same kgo client any application would use.
//
// Produce latency is the time from handing a record to kgo (Produce) to its
// promise being called, recorded in a small log-bucketed histogram
// (histogram below). Pacing for --throughput uses a token bucket
// (tokenBucket) that sleeps only when at least minPaceSleep of debt has built
// up, never once per record.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { clientCommands = append(clientCommands, newBenchCmd) }

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce, consume, work-queue and transaction throughput and latency",
		Args:  cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newBenchProduceCmd(cf), newBenchConsumeCmd(cf), newBenchQueueCmd(cf), newBenchTxnCmd(cf))
	return cmd
}

// ---- latency histogram ----

// histSubBits sets the histogram's precision: values below 2^histSubBits
// are exact, and every power-of-two range above is split into
// 2^(histSubBits-1) equal buckets, so a bucket's width is under 1/128 of its
// values (a relative error below 0.8%), as HdrHistogram with 2 significant
// digits. Bucket i for value v:
//
//	v < 2^s:   i = v
//	otherwise: shift = bits.Len64(v) - s, i = shift*2^(s-1) + v>>shift
const (
	histSubBits = 8
	histHalf    = 1 << (histSubBits - 1)
	histBuckets = (64-histSubBits)*histHalf + 2*histHalf
)

// histogram counts non-negative int64 values (nanoseconds, here) in
// log-spaced buckets. The zero value is empty and ready to use; it is not
// safe for concurrent use.
type histogram struct {
	counts   []uint64
	n        uint64
	min, max int64
	sum      float64
}

func histBucket(v uint64) int {
	l := bits.Len64(v)
	if l <= histSubBits {
		return int(v)
	}
	shift := l - histSubBits
	return shift*histHalf + int(v>>shift)
}

// histBucketRange returns the lowest and highest values of bucket i.
func histBucketRange(i int) (lo, hi uint64) {
	if i < 2*histHalf {
		return uint64(i), uint64(i)
	}
	shift := i/histHalf - 1
	m := uint64(i - shift*histHalf)
	return m << shift, (m+1)<<shift - 1
}

func (h *histogram) record(v int64) {
	if v < 0 {
		v = 0
	}
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	h.counts[histBucket(uint64(v))]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// count returns the number of recorded values.
func (h *histogram) count() uint64 { return h.n }

// mean returns the exact mean, or 0 when empty.
func (h *histogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// quantile returns the value at quantile q (0.99 for p99): the highest value
// of the bucket holding the ceil(q*n)-th smallest value, clamped to the
// exact minimum and maximum. It returns 0 when empty.
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := histBucketRange(i)
			return min(max(int64(hi), h.min), h.max)
		}
	}
	return h.max
}

// ---- pacing ----

// minPaceSleep is the least a paced producer sleeps at once: below it,
// timer granularity would dominate, so debt is allowed to build instead.
const minPaceSleep = time.Millisecond

// tokenBucket paces to rate events per second. Tokens refill continuously up
// to burst; take may drive the balance negative (a debt), and asks the caller
// to sleep only once the debt is worth at least minPaceSleep. Because refill
// is computed from elapsed time, oversleeping is paid back by a burst, so
// the long-run rate stays exact.
type tokenBucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(rate float64, now time.Time) *tokenBucket {
	burst := max(1, rate/10) // at most 100ms of catch-up
	return &tokenBucket{rate: rate, burst: burst, tokens: 1, last: now}
}

// take spends one token at now and returns how long to sleep before the
// next event (0: go on).
func (b *tokenBucket) take(now time.Time) time.Duration {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.burst, b.tokens+el.Seconds()*b.rate)
		b.last = now
	}
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	wait := time.Duration(-b.tokens / b.rate * float64(time.Second))
	if wait < minPaceSleep {
		return 0
	}
	return wait
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// ---- bench produce ----

type benchProduceOptions struct {
	topic         string
	partitions    int32
	replication   int16
	recordSize    int
	numRecords    int64
	duration      time.Duration
	acks          string
	compression   string
	batchMaxBytes int32
	linger        time.Duration
	throughput    float64
	maxInflight   int
	producers     int // kgo clients, each with its share of the records and the rate
	breakdown     bool
	metricsURLs   []string
	schemaID      int // > 0: values start with the registry's wire format for this id
}

// latencySummary is the latency part of a bench produce result, in ms.
type latencySummary struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

type benchProduceResult struct {
	Topic         string         `json:"topic"`
	Records       int64          `json:"records"` // acknowledged
	Errors        int64          `json:"errors"`
	RecordSize    int            `json:"record_size"`
	Elapsed       float64        `json:"elapsed_seconds"`
	RecordsPerSec float64        `json:"records_per_sec"`
	MiBPerSec     float64        `json:"mib_per_sec"`
	LatencyMs     latencySummary `json:"latency_ms"`
	Interrupted   bool           `json:"interrupted,omitempty"`
	FirstError    string         `json:"first_error,omitempty"`
	// Breakdown is the brokers' produce stages over the run (--breakdown).
	Breakdown []stageRow `json:"breakdown,omitempty"`
}

func newBenchProduceCmd(cf *clientFlags) *cobra.Command {
	var o benchProduceOptions
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Produce fixed-size records as fast as possible (or at --throughput) and report rate and latency",
		Long: `Produce --num-records records (or for --duration) of --record-size random
bytes to --topic, creating the topic if it is missing, as
kafka-producer-perf-test does. Progress is printed every second to stderr;
at the end, a table of records, records/s, MiB/s and produce latency
(p50/p99/p99.9/max, from handing a record to the client to its
acknowledgement) is printed, or a JSON object with --json.

With --breakdown, the brokers' per-stage produce latency histograms
(berth_produce_stage_seconds, read from each broker's /metrics before and
after the run) are printed beside the client's figures: queue, validate,
flush_wait, write, fsync_wait, fsync, isr_wait, response and total, so one
run shows where the p99 goes; with followers among the brokers given,
also replica_write, replica_fsync and replica_ack, their part of isr_wait.
Give every broker that leads a partition of the topic with --metrics-url
(and its followers, to see theirs).`,
		Example: `  berth bench produce --topic bench --num-records 1000000
  berth bench produce --topic bench --duration 30s --throughput 50000 --acks 1 --compression lz4
  berth bench produce --topic bench --duration 10s --throughput 10000 --breakdown --metrics-url http://127.0.0.1:8081/metrics`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchProduce(cmd, cf, &o)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.topic, "topic", "t", "berth-bench", "topic to produce to (created if missing)")
	fs.Int32VarP(&o.partitions, "partitions", "p", 1, "partitions when creating the topic")
	fs.Int16Var(&o.replication, "replication-factor", -1, "replication factor when creating the topic (-1: broker default)")
	fs.IntVarP(&o.recordSize, "record-size", "s", 1024, "value size of each record, in bytes")
	fs.Int64VarP(&o.numRecords, "num-records", "n", 0, "records to produce (default 100000 unless --duration is set)")
	fs.DurationVarP(&o.duration, "duration", "d", 0, "produce for this long instead of a record count")
	fs.StringVar(&o.acks, "acks", "all", "acknowledgements to wait for: all (idempotent), 1 or 0")
	fs.StringVar(&o.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	fs.Int32Var(&o.batchMaxBytes, "batch-max-bytes", 1<<20, "largest record batch, in bytes (kgo ProducerBatchMaxBytes)")
	fs.DurationVar(&o.linger, "linger", 10*time.Millisecond, "how long a partition waits to fill a batch (kgo ProducerLinger)")
	fs.Float64Var(&o.throughput, "throughput", -1, "target records per second (-1: as fast as possible)")
	fs.IntVar(&o.maxInflight, "max-inflight", 50000, "records buffered in the client before produce blocks (kgo MaxBufferedRecords)")
	fs.IntVar(&o.producers, "producers", 1, "producer clients, each with its own connections, an equal share of the records and of --throughput; one latency histogram for all")
	fs.IntVar(&o.schemaID, "schema-id", 0, "start every value with the schema registry's wire format for this schema id (magic byte 0 and the id), for a topic with confluent.value.schema.validation")
	fs.BoolVar(&o.breakdown, "breakdown", false, "also print where the brokers spent the time, per produce stage (from their /metrics)")
	fs.StringSliceVar(&o.metricsURLs, "metrics-url", nil, "a broker's /metrics URL for --breakdown, repeatable (default: each bootstrap host on port 8081)")
	return cmd
}

func (o *benchProduceOptions) validate() error {
	switch {
	case o.topic == "":
		return errors.New("--topic is empty")
	case o.recordSize < 0:
		return fmt.Errorf("--record-size %d: must be 0 or more", o.recordSize)
	case o.numRecords < 0:
		return fmt.Errorf("--num-records %d: must be positive", o.numRecords)
	case o.duration < 0:
		return fmt.Errorf("--duration %s: must be positive", o.duration)
	case o.numRecords > 0 && o.duration > 0:
		return errors.New("give --num-records or --duration, not both")
	case o.throughput == 0 || (o.throughput < 0 && o.throughput != -1):
		return fmt.Errorf("--throughput %g: want records per second, or -1 for unlimited", o.throughput)
	case o.maxInflight < 1:
		return fmt.Errorf("--max-inflight %d: must be at least 1", o.maxInflight)
	case o.batchMaxBytes < 512 || o.batchMaxBytes > 1<<30:
		return fmt.Errorf("--batch-max-bytes %d: must be between 512 and 1 GiB", o.batchMaxBytes)
	case o.linger < 0 || o.linger > time.Minute:
		return fmt.Errorf("--linger %s: must be between 0 and 1m", o.linger)
	case o.partitions < 1:
		return fmt.Errorf("--partitions %d: must be at least 1", o.partitions)
	case o.producers < 1 || o.producers > maxBenchProducers:
		return fmt.Errorf("--producers %d: must be between 1 and %d", o.producers, maxBenchProducers)
	case o.numRecords > 0 && o.numRecords < int64(o.producers):
		return fmt.Errorf("--num-records %d: fewer than --producers %d", o.numRecords, o.producers)
	}
	if o.numRecords == 0 && o.duration == 0 {
		o.numRecords = 100000
	}
	return nil
}

// maxBenchProducers bounds --producers: each is a kgo client with its own
// connections, goroutines and buffer of --max-inflight records.
const maxBenchProducers = 1000

// produceStats is what promises record and the progress printer reads.
type produceStats struct {
	mu       sync.Mutex
	hist     histogram
	acked    int64
	errors   int64
	firstErr error
}

func runBenchProduce(cmd *cobra.Command, cf *clientFlags, o *benchProduceOptions) error {
	if err := cf.resolve(cmd); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	codec, err := parseCompression(o.compression)
	if err != nil {
		return err
	}
	opts, err := acksOpts(o.acks)
	if err != nil {
		return err
	}
	opts = append(opts,
		kgo.DefaultProduceTopic(o.topic),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerBatchMaxBytes(o.batchMaxBytes),
		kgo.ProducerLinger(o.linger),
		kgo.MaxBufferedRecords(o.maxInflight),
	)

	ctx := cmd.Context()
	errOut := cmd.ErrOrStderr()
	cls := make([]*kgo.Client, 0, o.producers)
	defer func() {
		for _, cl := range cls {
			cl.Close()
		}
	}()
	for range o.producers {
		cl, err := cf.connect(ctx, opts...)
		if err != nil {
			return err
		}
		cls = append(cls, cl)
	}
	if err := ensureTopic(ctx, cf, kadm.NewClient(cls[0]), o.topic, o.partitions, o.replication, errOut); err != nil {
		return err
	}

	payload := randomPayload(o.recordSize)
	if o.schemaID > 0 {
		if len(payload) < 5 {
			return errors.New("--schema-id needs --record-size of at least 5 (the wire format's prefix)")
		}
		payload[0] = 0
		binary.BigEndian.PutUint32(payload[1:5], uint32(o.schemaID))
	}

	var stagesBefore map[string]*stageHist
	if o.breakdown {
		if len(o.metricsURLs) == 0 {
			o.metricsURLs = defaultMetricsURLs(cf.bootstrap)
		}
		if stagesBefore, err = scrapeStages(ctx, o.metricsURLs); err != nil {
			return err
		}
	}

	var st produceStats
	promise := func(r *kgo.Record, err error) {
		lat := time.Since(r.Timestamp)
		st.mu.Lock()
		defer st.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				return // cut short by Ctrl-C: neither a result nor an error
			}
			st.errors++
			if st.firstErr == nil {
				st.firstErr = err
			}
			return
		}
		st.acked++
		st.hist.record(int64(lat))
	}

	start := time.Now()
	stopProgress := startProgress(errOut, start, func() (int64, int64, string) {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.acked, st.acked * int64(o.recordSize), "p99 " + formatMillis(time.Duration(st.hist.quantile(0.99))) + " ms"
	})

	var deadline time.Time
	if o.duration > 0 {
		deadline = start.Add(o.duration)
	}
	// Each producer takes its share of the records and of the rate; the
	// first takes what the division leaves.
	var wg sync.WaitGroup
	for i, cl := range cls {
		n := o.numRecords / int64(len(cls))
		if i == 0 {
			n += o.numRecords % int64(len(cls))
		}
		var bucket *tokenBucket
		if o.throughput > 0 {
			bucket = newTokenBucket(o.throughput/float64(len(cls)), start)
		}
		wg.Go(func() { produceShare(ctx, cl, payload, n, deadline, bucket, promise) })
	}
	wg.Wait()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*cf.timeout)
	defer cancel()
	flushErrs := make([]error, len(cls))
	for i, cl := range cls {
		wg.Go(func() { flushErrs[i] = cl.Flush(fctx) })
	}
	wg.Wait()
	flushErr := errors.Join(flushErrs...)
	elapsed := time.Since(start)
	stopProgress()
	for _, cl := range cls {
		cl.Close() // fails whatever a failed flush left, so no promise runs later
	}

	st.mu.Lock()
	res := benchProduceResultOf(o, &st, elapsed)
	st.mu.Unlock()
	res.Interrupted = ctx.Err() != nil
	if o.breakdown {
		after, err := scrapeStages(context.WithoutCancel(ctx), o.metricsURLs)
		if err != nil {
			return err
		}
		res.Breakdown = stageRows(stagesBefore, after)
	}
	if err := printBenchProduce(cmd.OutOrStdout(), cf.json, res); err != nil {
		return err
	}
	if flushErr != nil {
		return fmt.Errorf("waiting for acknowledgements: %w", cf.explain(flushErr))
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d records failed; the first: %w", res.Errors, cf.explain(st.firstErr))
	}
	return nil
}

// produceShare produces n records (with n 0, until deadline) on cl, paced
// by bucket when there is one.
func produceShare(ctx context.Context, cl *kgo.Client, payload []byte, n int64, deadline time.Time, bucket *tokenBucket, promise func(*kgo.Record, error)) {
	for i := int64(0); n == 0 || i < n; i++ {
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			return
		}
		if bucket != nil {
			if d := bucket.take(now); d > 0 {
				sleepCtx(ctx, d)
			}
		}
		cl.Produce(ctx, &kgo.Record{Value: payload, Timestamp: time.Now()}, promise)
	}
}

func benchProduceResultOf(o *benchProduceOptions, st *produceStats, elapsed time.Duration) benchProduceResult {
	secs := elapsed.Seconds()
	res := benchProduceResult{
		Topic:      o.topic,
		Records:    st.acked,
		Errors:     st.errors,
		RecordSize: o.recordSize,
		Elapsed:    round3(secs),
		LatencyMs:  summarize(&st.hist),
	}
	if st.firstErr != nil {
		res.FirstError = st.firstErr.Error()
	}
	if secs > 0 {
		res.RecordsPerSec = round3(float64(st.acked) / secs)
		res.MiBPerSec = round3(mib(st.acked*int64(o.recordSize)) / secs)
	}
	return res
}

func printBenchProduce(w io.Writer, asJSON bool, r benchProduceResult) error {
	if asJSON {
		return writeJSON(w, r)
	}
	t := newTable(w, "records", "records/s", "MiB/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "errors")
	t.row(r.Records, formatRate(r.RecordsPerSec), fmt.Sprintf("%.2f", r.MiBPerSec),
		fmtMs(r.LatencyMs.P50), fmtMs(r.LatencyMs.P99), fmtMs(r.LatencyMs.P999), fmtMs(r.LatencyMs.Max), r.Errors)
	if err := t.flush(); err != nil {
		return err
	}
	if r.Breakdown != nil {
		return printBreakdown(w, r.LatencyMs, r.Breakdown)
	}
	return nil
}

func fmtMs(ms float64) string { return formatMillis(time.Duration(ms * float64(time.Millisecond))) }

// randomPayload is n random capital letters, as kafka-producer-perf-test
// sends.
func randomPayload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte('A' + rand.IntN(26))
	}
	return p
}

// ensureTopic creates topic if it does not exist.
func ensureTopic(ctx context.Context, cf *clientFlags, adm *kadm.Client, topic string, partitions int32, rf int16, errOut io.Writer) error {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return cf.explain(err)
	}
	if tds.Has(topic) {
		return tds[topic].Err // nil, or a load error such as an authorization failure
	}
	r, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
	switch {
	case err == nil:
		fmt.Fprintf(errOut, "Created topic %s (%s).\n", topic, plural(int(partitions), "partition"))
	case errors.Is(err, kerr.TopicAlreadyExists):
	default:
		return topicErr(cf, topic, err, r.ErrMessage)
	}
	return nil
}

// startProgress prints, every second until the returned stop is called, the
// rate over the last second from the totals that read returns.
func startProgress(w io.Writer, start time.Time, read func() (records, bytes int64, extra string)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		lastAt, lastRecs, lastBytes := start, int64(0), int64(0)
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				recs, bytes, extra := read()
				secs := now.Sub(lastAt).Seconds()
				line := fmt.Sprintf("%d records, %s records/s, %.2f MiB/s",
					recs, formatRate(float64(recs-lastRecs)/secs), mib(bytes-lastBytes)/secs)
				if extra != "" {
					line += ", " + extra
				}
				fmt.Fprintln(w, line)
				lastAt, lastRecs, lastBytes = now, recs, bytes
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// ---- bench consume ----

type benchConsumeOptions struct {
	topic         string
	numRecords    int64
	group         string
	fetchMaxBytes int32
}

type benchConsumeResult struct {
	Topic         string  `json:"topic"`
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Elapsed       float64 `json:"elapsed_seconds"`
	FirstRecordMs float64 `json:"first_record_ms"` // from start to the first record
	RecordsPerSec float64 `json:"records_per_sec"`
	MiBPerSec     float64 `json:"mib_per_sec"`
	Interrupted   bool    `json:"interrupted,omitempty"`
}

func newBenchConsumeCmd(cf *clientFlags) *cobra.Command {
	var o benchConsumeOptions
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Consume a topic as fast as possible and report the rate",
		Long: `Consume --topic from its start (or, with --group, from the group's commits)
until --num-records records, or by default until every partition reaches
the end offset it had when the benchmark started, as kafka-consumer-perf-test
does. Progress is printed every second to stderr; at the end, records,
MiB, records/s and MiB/s are printed, or a JSON object with --json. The run
fails if no record arrives for --timeout.`,
		Example: `  berth bench consume --topic bench
  berth bench consume --topic bench --num-records 500000 --group bench-readers`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchConsume(cmd, cf, &o)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.topic, "topic", "t", "berth-bench", "topic to consume")
	fs.Int64VarP(&o.numRecords, "num-records", "n", 0, "records to consume (0: up to the end offsets as of the start)")
	fs.StringVarP(&o.group, "group", "g", "", "consume as a member of this consumer group (default: no group)")
	fs.Int32Var(&o.fetchMaxBytes, "fetch-max-bytes", 50<<20, "most bytes a broker returns per fetch (kgo FetchMaxBytes)")
	return cmd
}

// endTargets are the offsets each partition must reach, and how many records
// that is in total.
type endTargets struct {
	ends  map[int32]int64
	total int64
}

// consumeTargets reads, before consuming, where each partition starts for
// this run (log start, or the group's commit) and where it ends now.
func consumeTargets(ctx context.Context, adm *kadm.Client, topic, group string) (endTargets, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return endTargets{}, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return endTargets{}, err
	}
	var committed kadm.OffsetResponses
	if group != "" {
		if committed, err = adm.FetchOffsets(ctx, group); err != nil {
			return endTargets{}, err
		}
	}
	t := endTargets{ends: make(map[int32]int64)}
	for p, e := range ends[topic] {
		from := int64(0)
		if s, ok := starts.Lookup(topic, p); ok {
			from = s.Offset
		}
		if c, ok := committed.Lookup(topic, p); ok && c.Err == nil && c.At >= 0 {
			from = max(from, c.At)
		}
		if e.Offset > from {
			t.ends[p] = e.Offset
			t.total += e.Offset - from
		}
	}
	return t, nil
}

func runBenchConsume(cmd *cobra.Command, cf *clientFlags, o *benchConsumeOptions) error {
	if err := cf.resolve(cmd); err != nil {
		return err
	}
	switch {
	case o.topic == "":
		return errors.New("--topic is empty")
	case o.numRecords < 0:
		return fmt.Errorf("--num-records %d: must be 0 (to the end) or more", o.numRecords)
	case o.fetchMaxBytes < 1:
		return fmt.Errorf("--fetch-max-bytes %d: must be positive", o.fetchMaxBytes)
	}
	ctx := cmd.Context()
	errOut := cmd.ErrOrStderr()

	adm, err := cf.admin(ctx)
	if err != nil {
		return err
	}
	tds, err := adm.ListTopics(ctx, o.topic)
	if err == nil && !tds.Has(o.topic) {
		err = topicErr(cf, o.topic, kerr.UnknownTopicOrPartition, "")
	}
	var targets endTargets
	if err == nil && o.numRecords == 0 {
		targets, err = consumeTargets(ctx, adm, o.topic, o.group)
	}
	adm.Close()
	if err != nil {
		return cf.explain(err)
	}
	if o.numRecords == 0 && targets.total == 0 {
		fmt.Fprintf(errOut, "Nothing to consume: %s has no records past the starting offsets; produce some with `berth bench produce --topic %s`.\n", o.topic, o.topic)
	}

	opts := []kgo.Opt{
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(o.fetchMaxBytes),
		kgo.BrokerMaxReadBytes(int32(max(100<<20, min(1<<30, 2*int64(o.fetchMaxBytes))))), // room for a full fetch
	}
	if o.group != "" {
		opts = append(opts, kgo.ConsumerGroup(o.group))
	}

	start := time.Now()
	cl, err := cf.connect(ctx, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if o.group != "" {
		if err := cf.requireGroups(ctx, cl, o.group); err != nil {
			return err
		}
	}

	var records, bytes atomic.Int64
	stopProgress := startProgress(errOut, start, func() (int64, int64, string) { return records.Load(), bytes.Load(), "" })
	defer stopProgress()

	var firstAt time.Time
	remaining := len(targets.ends)
	var loopErr error
	for (o.numRecords > 0 && records.Load() < o.numRecords) || (o.numRecords == 0 && remaining > 0) {
		pctx, cancel := context.WithTimeout(ctx, cf.timeout)
		want := -1
		if o.numRecords > 0 {
			want = int(o.numRecords - records.Load())
		}
		fetches := cl.PollRecords(pctx, want)
		stalled := pctx.Err() != nil
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			var ke *kerr.Error
			if errors.As(err, &ke) && !ke.Retriable && loopErr == nil {
				loopErr = fmt.Errorf("topic %q partition %d: %w", t, p, cf.explain(err))
			}
		})
		if loopErr != nil {
			break
		}
		n, b := int64(0), int64(0)
		for r := range fetches.RecordsAll() {
			n++
			b += int64(len(r.Key) + len(r.Value))
			if end, ok := targets.ends[r.Partition]; ok && r.Offset+1 >= end {
				delete(targets.ends, r.Partition)
				remaining--
			}
		}
		if n > 0 && firstAt.IsZero() {
			firstAt = time.Now()
		}
		records.Add(n)
		bytes.Add(b)
		if n == 0 && stalled {
			loopErr = fmt.Errorf("no records for %s (--timeout): consumed %d so far", cf.timeout, records.Load())
			break
		}
	}
	elapsed := time.Since(start)
	stopProgress()

	res := benchConsumeResult{
		Topic:       o.topic,
		Records:     records.Load(),
		Bytes:       bytes.Load(),
		Elapsed:     round3(elapsed.Seconds()),
		Interrupted: ctx.Err() != nil,
	}
	if !firstAt.IsZero() {
		res.FirstRecordMs = round3(float64(firstAt.Sub(start)) / 1e6)
	}
	if s := elapsed.Seconds(); s > 0 {
		res.RecordsPerSec = round3(float64(res.Records) / s)
		res.MiBPerSec = round3(mib(res.Bytes) / s)
	}
	if err := printBenchConsume(cmd.OutOrStdout(), cf.json, res); err != nil {
		return err
	}
	return loopErr
}

func printBenchConsume(w io.Writer, asJSON bool, r benchConsumeResult) error {
	if asJSON {
		return writeJSON(w, r)
	}
	t := newTable(w, "records", "MiB", "seconds", "records/s", "MiB/s", "first record ms")
	t.row(r.Records, fmt.Sprintf("%.2f", mib(r.Bytes)), fmt.Sprintf("%.3f", r.Elapsed),
		formatRate(r.RecordsPerSec), fmt.Sprintf("%.2f", r.MiBPerSec), fmt.Sprintf("%.1f", r.FirstRecordMs))
	return t.flush()
}
