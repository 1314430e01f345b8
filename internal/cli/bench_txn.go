package cli

// berth bench txn: a transactional producer's throughput and commit
// latency, Transactions V2 (the default) or V1.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

type benchTxnOptions struct {
	topic         string
	partitions    int32
	replication   int16
	recordSize    int
	recordsPerTxn int
	numTxns       int64
	duration      time.Duration
	abortEvery    int
	protocol      string
	id            string
}

type benchTxnResult struct {
	Topic         string         `json:"topic"`
	Protocol      string         `json:"protocol"`
	RecordsPerTxn int            `json:"records_per_transaction"`
	RecordSize    int            `json:"record_size"`
	Committed     int64          `json:"committed_transactions"`
	Aborted       int64          `json:"aborted_transactions"`
	Records       int64          `json:"committed_records"`
	Elapsed       float64        `json:"elapsed_seconds"`
	TxnsPerSec    float64        `json:"transactions_per_sec"`
	RecordsPerSec float64        `json:"records_per_sec"`
	MiBPerSec     float64        `json:"mib_per_sec"`
	LatencyMs     latencySummary `json:"transaction_latency_ms"`
	Interrupted   bool           `json:"interrupted,omitempty"`
}

func newBenchTxnCmd(cf *clientFlags) *cobra.Command {
	var o benchTxnOptions
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Run transactions back to back and report transactions/s, records/s and transaction latency",
		Long: `Run --num-transactions transactions (or for --duration) of
--records-per-txn records of --record-size bytes each to --topic (created
if missing; the records go round-robin over its partitions), one after
the other with one transactional producer, committing each (every
--abort-every-th is aborted instead). The latency of a transaction is
from its first record to the end of its EndTxn: the produce
acknowledgements and the commit decision, durable. --protocol v2 (the
default) lets the client use Transactions V2 (KIP-890) when the broker
offers it; v1 holds it to the explicit AddPartitionsToTxn protocol.
Progress is printed every second to stderr; the result is a table, or
JSON with --json.`,
		Example: `  berth bench txn --topic bench-txn --records-per-txn 100 --duration 20s
  berth bench txn --records-per-txn 1 --num-transactions 2000 --protocol v1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchTxn(cmd, cf, &o)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.topic, "topic", "t", "berth-bench-txn", "topic to produce to (created if missing)")
	fs.Int32VarP(&o.partitions, "partitions", "p", 1, "partitions when creating the topic")
	fs.Int16Var(&o.replication, "replication-factor", -1, "replication factor when creating the topic (-1: broker default)")
	fs.IntVarP(&o.recordSize, "record-size", "s", 1024, "value size of each record, in bytes")
	fs.IntVar(&o.recordsPerTxn, "records-per-txn", 100, "records in each transaction")
	fs.Int64VarP(&o.numTxns, "num-transactions", "n", 0, "transactions to run (default 1000 unless --duration is set)")
	fs.DurationVarP(&o.duration, "duration", "d", 0, "run for this long instead of a transaction count")
	fs.IntVar(&o.abortEvery, "abort-every", 0, "abort every n-th transaction instead of committing it (0: commit all)")
	fs.StringVar(&o.protocol, "protocol", "v2", "transaction protocol the client may use: v2 (KIP-890, when the broker offers it) or v1")
	fs.StringVar(&o.id, "transactional-id", "", "transactional id (default: berth-bench-txn-<random>)")
	return cmd
}

func (o *benchTxnOptions) validate() error {
	switch {
	case o.topic == "":
		return errors.New("--topic is empty")
	case o.recordSize < 0:
		return fmt.Errorf("--record-size %d: must be 0 or more", o.recordSize)
	case o.recordsPerTxn < 1:
		return fmt.Errorf("--records-per-txn %d: must be at least 1", o.recordsPerTxn)
	case o.numTxns < 0:
		return fmt.Errorf("--num-transactions %d: must be positive", o.numTxns)
	case o.duration < 0:
		return fmt.Errorf("--duration %s: must be positive", o.duration)
	case o.numTxns > 0 && o.duration > 0:
		return errors.New("give --num-transactions or --duration, not both")
	case o.abortEvery < 0:
		return fmt.Errorf("--abort-every %d: must be 0 or more", o.abortEvery)
	case o.protocol != "v1" && o.protocol != "v2":
		return fmt.Errorf("--protocol %q: want v1 or v2", o.protocol)
	case o.partitions < 1:
		return fmt.Errorf("--partitions %d: must be at least 1", o.partitions)
	}
	if o.numTxns == 0 && o.duration == 0 {
		o.numTxns = 1000
	}
	if o.id == "" {
		o.id = fmt.Sprintf("berth-bench-txn-%08x", rand.Uint32())
	}
	return nil
}

func runBenchTxn(cmd *cobra.Command, cf *clientFlags, o *benchTxnOptions) error {
	if err := cf.resolve(cmd); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	opts := []kgo.Opt{
		kgo.TransactionalID(o.id),
		kgo.DefaultProduceTopic(o.topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(0),
	}
	if o.protocol == "v1" {
		// Without EndTxn v5 the client keeps to Transactions V1.
		v := kversion.Stable()
		v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
		opts = append(opts, kgo.MaxVersions(v))
	}
	ctx := cmd.Context()
	errOut := cmd.ErrOrStderr()
	cl, err := cf.connect(ctx, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := ensureTopic(ctx, cf, kadm.NewClient(cl), o.topic, o.partitions, o.replication, errOut); err != nil {
		return err
	}
	payload := randomPayload(o.recordSize)

	var (
		mu                 sync.Mutex
		hist               histogram
		committed, aborted int64
	)
	start := time.Now()
	stopProgress := startProgress(errOut, start, func() (int64, int64, string) {
		mu.Lock()
		defer mu.Unlock()
		recs := committed * int64(o.recordsPerTxn)
		return recs, recs * int64(o.recordSize), fmt.Sprintf("%d transactions, p99 %s ms", committed, formatMillis(time.Duration(hist.quantile(0.99))))
	})
	var deadline time.Time
	if o.duration > 0 {
		deadline = start.Add(o.duration)
	}
	var runErr error
	for i := int64(0); o.numTxns == 0 || i < o.numTxns; i++ {
		if ctx.Err() != nil || (!deadline.IsZero() && !time.Now().Before(deadline)) {
			break
		}
		abort := o.abortEvery > 0 && (i+1)%int64(o.abortEvery) == 0
		t0 := time.Now()
		if runErr = oneBenchTxn(ctx, cl, o.recordsPerTxn, payload, abort); runErr != nil {
			break
		}
		lat := time.Since(t0)
		mu.Lock()
		hist.record(int64(lat))
		if abort {
			aborted++
		} else {
			committed++
		}
		mu.Unlock()
	}
	elapsed := time.Since(start)
	stopProgress()

	mu.Lock()
	res := benchTxnResultOf(o, &hist, committed, aborted, elapsed)
	mu.Unlock()
	res.Interrupted = ctx.Err() != nil
	if err := printBenchTxn(cmd.OutOrStdout(), cf.json, res); err != nil {
		return err
	}
	if runErr != nil && ctx.Err() == nil {
		return fmt.Errorf("transaction %d failed: %w", committed+aborted+1, cf.explain(runErr))
	}
	return nil
}

// oneBenchTxn produces n records in one transaction and ends it.
func oneBenchTxn(ctx context.Context, cl *kgo.Client, n int, payload []byte, abort bool) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	wg.Add(n)
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: payload}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	end := kgo.TryCommit
	if abort || firstErr != nil {
		end = kgo.TryAbort
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		return err
	}
	return firstErr
}

func benchTxnResultOf(o *benchTxnOptions, h *histogram, committed, aborted int64, elapsed time.Duration) benchTxnResult {
	secs := elapsed.Seconds()
	res := benchTxnResult{
		Topic: o.topic, Protocol: o.protocol, RecordsPerTxn: o.recordsPerTxn, RecordSize: o.recordSize,
		Committed: committed, Aborted: aborted, Records: committed * int64(o.recordsPerTxn), Elapsed: round3(secs),
		LatencyMs: summarize(h),
	}
	if secs > 0 {
		res.TxnsPerSec = round3(float64(committed+aborted) / secs)
		res.RecordsPerSec = round3(float64(res.Records) / secs)
		res.MiBPerSec = round3(mib(res.Records*int64(o.recordSize)) / secs)
	}
	return res
}

func printBenchTxn(w io.Writer, asJSON bool, r benchTxnResult) error {
	if asJSON {
		return writeJSON(w, r)
	}
	t := newTable(w, "protocol", "transactions", "aborted", "txn/s", "records/s", "MiB/s", "p50 ms", "p99 ms", "max ms")
	t.row(r.Protocol, r.Committed+r.Aborted, r.Aborted, formatRate(r.TxnsPerSec), formatRate(r.RecordsPerSec),
		fmt.Sprintf("%.2f", r.MiBPerSec), fmtMs(r.LatencyMs.P50), fmtMs(r.LatencyMs.P99), fmtMs(r.LatencyMs.Max))
	return t.flush()
}
