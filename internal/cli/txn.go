package cli

// `berth txn`: list and describe transactions, with what
// kafka-transactions.sh shows, over ListTransactions (every broker) and
// DescribeTransactions (each id's coordinator) through kadm, the active
// producers of partitions over DescribeProducers (each partition's
// leader), and, as kafka-transactions.sh find-hanging and abort do
// (KIP-664), finding the open transactions no coordinator knows and
// aborting one with a WriteTxnMarkers ABORT to the partition's leader.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { clientCommands = append(clientCommands, newTxnCmd) }

func newTxnCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "txn",
		Aliases: []string{"transactions"},
		Short:   "List and describe transactions (transactional ids, their state, partitions and age) and partitions' producers; find and abort hanging transactions",
		Args:    cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newTxnListCmd(cf), newTxnDescribeCmd(cf), newTxnProducersCmd(cf), newTxnFindHangingCmd(cf), newTxnAbortCmd(cf))
	return cmd
}

// txnStates are Kafka's transaction states, for --state.
var txnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

type txnListEntry struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
	CoordinatorID   int32  `json:"coordinator_id"`
}

func newTxnListCmd(cf *clientFlags) *cobra.Command {
	var (
		states    []string
		producers []int64
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List transactional ids with their state, producer id and coordinator",
		Example: `  berth txn list
  berth txn list --state Ongoing,PrepareCommit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range states {
				if !slices.Contains(txnStates, s) {
					return fmt.Errorf("--state %q: want one of %s", s, strings.Join(txnStates, ", "))
				}
			}
			return withClients(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
				listed, err := adm.ListTransactions(ctx, producers, states)
				if err != nil {
					if len(listed) == 0 {
						return cf.explain(err)
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: some brokers did not list their transactions: %v\n", err)
				}
				entries := []txnListEntry{}
				for _, l := range listed.Sorted() {
					entries = append(entries, txnListEntry{l.TxnID, l.State, l.ProducerID, l.Coordinator})
				}
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, entries)
				}
				t := newTable(out, "transactional id", "state", "producer id", "coordinator")
				for _, e := range entries {
					t.row(e.TransactionalID, e.State, e.ProducerID, e.CoordinatorID)
				}
				return t.flush()
			})
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&states, "state", nil, "only transactions in these states (repeatable or comma-separated): "+strings.Join(txnStates, ", "))
	fs.Int64SliceVar(&producers, "producer-id", nil, "only these producer ids (repeatable or comma-separated)")
	return cmd
}

type txnDescribeEntry struct {
	TransactionalID string   `json:"transactional_id"`
	State           string   `json:"state"`
	ProducerID      int64    `json:"producer_id"`
	ProducerEpoch   int16    `json:"producer_epoch"`
	TimeoutMs       int32    `json:"timeout_ms"`
	StartTime       string   `json:"start_time,omitempty"`
	AgeMs           int64    `json:"age_ms"` // -1: no transaction open
	Partitions      []string `json:"partitions"`
	CoordinatorID   int32    `json:"coordinator_id"`
	Error           string   `json:"error,omitempty"`
}

func newTxnDescribeCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe ID...",
		Short: "Describe transactional ids: state, producer id and epoch, timeout, start, age and partitions",
		Example: `  berth txn describe orders-pipeline
  berth txn describe a b --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if slices.Contains(ids, "") {
				return errors.New("a transactional id must not be empty")
			}
			return withClients(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
				ds, err := adm.DescribeTransactions(ctx, ids...)
				if err != nil && len(ds) == 0 {
					return cf.explain(err)
				}
				now := time.Now()
				entries := []txnDescribeEntry{}
				failed := 0
				for _, id := range ids {
					d, ok := ds[id]
					e := txnDescribeEntry{TransactionalID: id, ProducerID: -1, ProducerEpoch: -1, AgeMs: -1, Partitions: []string{}}
					switch {
					case !ok:
						e.Error = "not described"
					case d.Err != nil:
						e.Error = d.Err.Error()
					default:
						e.State, e.ProducerID, e.ProducerEpoch, e.TimeoutMs = d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMillis
						e.CoordinatorID = d.Coordinator
						if d.StartTimestamp >= 0 {
							start := time.UnixMilli(d.StartTimestamp)
							e.StartTime = start.UTC().Format(time.RFC3339Nano)
							if d.State == "Ongoing" || strings.HasPrefix(d.State, "Prepare") {
								e.AgeMs = now.Sub(start).Milliseconds()
							}
						}
						for _, tp := range d.Topics.Sorted() {
							for _, p := range tp.Partitions {
								e.Partitions = append(e.Partitions, tp.Topic+"-"+strconv.Itoa(int(p)))
							}
						}
					}
					if e.Error != "" {
						failed++
					}
					entries = append(entries, e)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					if err := writeJSON(out, entries); err != nil {
						return err
					}
				} else if err := printTxnDescribe(out, entries); err != nil {
					return err
				}
				if failed > 0 {
					return fmt.Errorf("%d of %d transactional ids could not be described", failed, len(ids))
				}
				return nil
			})
		},
	}
}

func printTxnDescribe(w io.Writer, entries []txnDescribeEntry) error {
	t := newTable(w, "transactional id", "state", "producer id", "epoch", "timeout", "age", "partitions", "coordinator", "error")
	for _, e := range entries {
		age := "-"
		if e.AgeMs >= 0 {
			age = (time.Duration(e.AgeMs) * time.Millisecond).String()
		}
		parts := strings.Join(e.Partitions, ",")
		if parts == "" {
			parts = "-"
		}
		t.row(e.TransactionalID, e.State, e.ProducerID, e.ProducerEpoch, (time.Duration(e.TimeoutMs) * time.Millisecond).String(),
			age, parts, e.CoordinatorID, e.Error)
	}
	return t.flush()
}

type txnProducerEntry struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	Leader           int32  `json:"leader"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	LastSequence     int32  `json:"last_sequence"`
	LastTimestamp    string `json:"last_timestamp,omitempty"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	TxnStartOffset   int64  `json:"txn_start_offset"` // -1: no transaction open
	Error            string `json:"error,omitempty"`
}

func newTxnProducersCmd(cf *clientFlags) *cobra.Command {
	var (
		topic     string
		partition int32
	)
	cmd := &cobra.Command{
		Use:   "producers --topic T [--partition P]",
		Short: "Show the active idempotent and transactional producers of a topic's partitions, with their open transaction's start offset",
		Example: `  berth txn producers --topic orders
  berth txn producers --topic orders --partition 3 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if topic == "" {
				return errors.New("--topic is required")
			}
			if partition < -1 {
				return fmt.Errorf("--partition %d: want a partition number, or -1 for every partition", partition)
			}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				if err := checkTopic(ctx, cf, cl, topic, partition); err != nil {
					return err
				}
				set := kadm.TopicsSet{topic: {}}
				if partition >= 0 {
					set.Add(topic, partition)
				}
				ds, partial := adm.DescribeProducers(ctx, set)
				if partial != nil && len(ds) == 0 {
					return cf.explain(partial)
				}
				entries := []txnProducerEntry{}
				failed := 0
				for _, p := range ds.SortedPartitions() {
					if p.Err != nil {
						failed++
						msg := kerrName(p.Err)
						if p.ErrMessage != "" {
							msg = withBrokerMessage(p.Err, p.ErrMessage).Error()
						}
						entries = append(entries, txnProducerEntry{Topic: p.Topic, Partition: p.Partition, Leader: p.Leader,
							ProducerID: -1, ProducerEpoch: -1, LastSequence: -1, CoordinatorEpoch: -1, TxnStartOffset: -1, Error: msg})
						continue
					}
					for _, d := range p.ActiveProducers.Sorted() {
						e := txnProducerEntry{Topic: d.Topic, Partition: d.Partition, Leader: d.Leader, ProducerID: d.ProducerID,
							ProducerEpoch: d.ProducerEpoch, LastSequence: d.LastSequence, CoordinatorEpoch: d.CoordinatorEpoch,
							TxnStartOffset: d.CurrentTxnStartOffset}
						if d.LastTimestamp >= 0 {
							e.LastTimestamp = time.UnixMilli(d.LastTimestamp).UTC().Format(time.RFC3339Nano)
						}
						entries = append(entries, e)
					}
				}
				out := cmd.OutOrStdout()
				if cf.json {
					if err := writeJSON(out, entries); err != nil {
						return err
					}
				} else if err := printTxnProducers(out, entries); err != nil {
					return err
				}
				if partial != nil {
					// A leader that did not answer: its partitions are missing above.
					return fmt.Errorf("some partitions of %s were not described: %w", topic, cf.explain(partial))
				}
				if failed > 0 {
					return fmt.Errorf("%d partition(s) of %s could not be described", failed, topic)
				}
				return nil
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&topic, "topic", "", "the topic (required)")
	fs.Int32Var(&partition, "partition", -1, "only this partition (-1: every partition)")
	return cmd
}

func printTxnProducers(w io.Writer, entries []txnProducerEntry) error {
	t := newTable(w, "topic", "partition", "leader", "producer id", "epoch", "last sequence", "last timestamp", "coordinator epoch", "txn start offset", "error")
	dash := func(v int64) any { // -1: none
		if v < 0 {
			return "-"
		}
		return v
	}
	for _, e := range entries {
		ts := e.LastTimestamp
		if ts == "" {
			ts = "-"
		}
		if e.Error != "" {
			t.row(e.Topic, e.Partition, e.Leader, "-", "-", "-", "-", "-", "-", e.Error)
			continue
		}
		t.row(e.Topic, e.Partition, e.Leader, e.ProducerID, e.ProducerEpoch, dash(int64(e.LastSequence)), ts,
			dash(int64(e.CoordinatorEpoch)), dash(e.TxnStartOffset), "")
	}
	return t.flush()
}

// openTxnStates are the coordinator states in which a transaction may
// still have partitions without their marker.
var openTxnStates = []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}

type txnHangingEntry struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	Leader           int32  `json:"leader"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"` // -1: no marker yet
	StartOffset      int64  `json:"start_offset"`
	LastTimestamp    string `json:"last_timestamp"`
	// AgeMs is how long ago the partition last saw a batch or marker of
	// the producer (its LastTimestamp), as kafka-transactions.sh measures
	// a transaction's duration.
	AgeMs           int64  `json:"age_ms"`
	TransactionalID string `json:"transactional_id,omitempty"`
	Reason          string `json:"reason"`
}

func newTxnFindHangingCmd(cf *clientFlags) *cobra.Command {
	var (
		topic      string
		maxTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "find-hanging [--topic T] [--max-transaction-timeout 15m]",
		Short: "Find hanging transactions: open on a partition for longer than the maximum transaction timeout, and not ongoing at any coordinator",
		Long: `Find hanging transactions, as kafka-transactions.sh find-hanging does (KIP-664).

Every partition (or those of --topic) is asked for its producers
(DescribeProducers at its leader). A producer with an open transaction there
that the partition has not heard from for longer than
--max-transaction-timeout (the broker's transaction.max.timeout.ms, 15m by
default: no coordinator lets a transaction live longer) is a candidate.
The coordinators are then asked (ListTransactions, DescribeTransactions)
whether that producer id has an ongoing transaction including the
partition; if not, nothing will ever end it and it holds back
read_committed consumers for good: it is hanging. End one with
berth txn abort.`,
		Example: `  berth txn find-hanging
  berth txn find-hanging --topic orders --max-transaction-timeout 5m --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxTimeout < 0 {
				return fmt.Errorf("--max-transaction-timeout %s: want a duration of 0 or more", maxTimeout)
			}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				set := kadm.TopicsSet{}
				if topic != "" {
					if err := checkTopic(ctx, cf, cl, topic, -1); err != nil {
						return err
					}
					set = kadm.TopicsSet{topic: {}}
				}
				res, err := findHanging(ctx, cf, adm, set, maxTimeout, time.Now())
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if cf.json {
					if err := writeJSON(out, res.entries); err != nil {
						return err
					}
				} else if err := printTxnHanging(out, res.entries); err != nil {
					return err
				}
				if res.incomplete != nil {
					return fmt.Errorf("the search is incomplete, retry: %w", res.incomplete)
				}
				return nil
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&topic, "topic", "", "only the partitions of this topic (default: every topic)")
	fs.DurationVar(&maxTimeout, "max-transaction-timeout", 15*time.Minute,
		"the broker's transaction.max.timeout.ms: only transactions idle for longer are checked with the coordinators")
	return cmd
}

// hangingSearch is the outcome of findHanging: the hanging transactions,
// and, when some partitions could not be described, why (the entries are
// then incomplete).
type hangingSearch struct {
	entries    []txnHangingEntry
	incomplete error
}

// findHanging looks for the hanging transactions of the partitions in set
// (every partition when empty) at now. It fails when a coordinator cannot
// say whether a candidate is ongoing, rather than report a live
// transaction as hanging.
func findHanging(ctx context.Context, cf *clientFlags, adm *kadm.Client, set kadm.TopicsSet, maxTimeout time.Duration, now time.Time) (hangingSearch, error) {
	res := hangingSearch{entries: []txnHangingEntry{}}
	ds, partial := adm.DescribeProducers(ctx, set)
	if partial != nil && len(ds) == 0 {
		return res, cf.explain(partial)
	}
	var undescribed []string
	var candidates []kadm.DescribedProducer
	for _, p := range ds.SortedPartitions() {
		if p.Err != nil {
			undescribed = append(undescribed, fmt.Sprintf("%s-%d: %s", p.Topic, p.Partition, kerrName(p.Err)))
			continue
		}
		for _, d := range p.ActiveProducers.Sorted() {
			if d.CurrentTxnStartOffset >= 0 && now.Sub(time.UnixMilli(d.LastTimestamp)) > maxTimeout {
				candidates = append(candidates, d)
			}
		}
	}
	switch {
	case partial != nil:
		// A leader that did not answer: its partitions are missing.
		res.incomplete = fmt.Errorf("some partitions were not described: %w", cf.explain(partial))
	case len(undescribed) > 0:
		res.incomplete = fmt.Errorf("%d partition(s) could not be described: %s", len(undescribed), strings.Join(undescribed, ", "))
	}
	if len(candidates) == 0 {
		return res, nil
	}

	// Which transactional ids use the candidates' producer ids, and what
	// their coordinators say of them.
	var pids []int64
	for _, d := range candidates {
		if !slices.Contains(pids, d.ProducerID) {
			pids = append(pids, d.ProducerID)
		}
	}
	listed, err := adm.ListTransactions(ctx, pids, nil)
	if err != nil {
		return res, fmt.Errorf("asking the brokers which transactional ids use producer ids %v (retry; a broker that is down may coordinate one): %w", pids, cf.explain(err))
	}
	idsOf := map[int64][]string{}
	for _, l := range listed.Sorted() {
		idsOf[l.ProducerID] = append(idsOf[l.ProducerID], l.TxnID)
	}
	var described kadm.DescribedTransactions
	if ids := listed.TransactionalIDs(); len(ids) > 0 {
		described, err = adm.DescribeTransactions(ctx, ids...)
		if err != nil {
			return res, fmt.Errorf("describing transactional ids %v at their coordinators (retry): %w", ids, cf.explain(err))
		}
		for _, d := range described {
			if d.Err != nil && !errors.Is(d.Err, kerr.TransactionalIDNotFound) {
				return res, fmt.Errorf("describing transactional id %q at its coordinator (retry): %w", d.TxnID, cf.explain(d.Err))
			}
		}
	}

	for _, d := range candidates {
		e := txnHangingEntry{Topic: d.Topic, Partition: d.Partition, Leader: d.Leader, ProducerID: d.ProducerID,
			ProducerEpoch: d.ProducerEpoch, CoordinatorEpoch: d.CoordinatorEpoch, StartOffset: d.CurrentTxnStartOffset,
			LastTimestamp: time.UnixMilli(d.LastTimestamp).UTC().Format(time.RFC3339Nano),
			AgeMs:         now.Sub(time.UnixMilli(d.LastTimestamp)).Milliseconds()}
		ids := idsOf[d.ProducerID]
		if len(ids) == 0 {
			e.Reason = "no transactional id uses the producer id"
			res.entries = append(res.entries, e)
			continue
		}
		e.TransactionalID = ids[0]
		e.Reason = "its transactional id has no ongoing transaction of this producer id"
		ongoing := false
		for _, id := range ids {
			t, ok := described[id]
			if !ok || t.Err != nil || t.ProducerID != d.ProducerID || !slices.Contains(openTxnStates, t.State) {
				continue
			}
			if t.Topics.Lookup(d.Topic, d.Partition) {
				ongoing = true
				break
			}
			e.TransactionalID = id
			e.Reason = "the coordinator's ongoing transaction does not include the partition"
		}
		if !ongoing {
			res.entries = append(res.entries, e)
		}
	}
	return res, nil
}

func printTxnHanging(w io.Writer, entries []txnHangingEntry) error {
	t := newTable(w, "topic", "partition", "producer id", "epoch", "coordinator epoch", "start offset", "age", "transactional id", "reason")
	for _, e := range entries {
		ce := any(e.CoordinatorEpoch)
		if e.CoordinatorEpoch < 0 {
			ce = "-"
		}
		id := e.TransactionalID
		if id == "" {
			id = "-"
		}
		t.row(e.Topic, e.Partition, e.ProducerID, e.ProducerEpoch, ce, e.StartOffset,
			(time.Duration(e.AgeMs) * time.Millisecond).String(), id, e.Reason)
	}
	return t.flush()
}

type txnAbortEntry struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	StartOffset      int64  `json:"start_offset"` // -1: not looked up (explicit producer)
	Leader           int32  `json:"leader"`
	Aborted          bool   `json:"aborted"`
	Error            string `json:"error,omitempty"`
}

func newTxnAbortCmd(cf *clientFlags) *cobra.Command {
	var (
		topic            string
		partition        int32
		startOffset, pid int64
		producerEpoch    int16
		coordinatorEpoch int32
	)
	cmd := &cobra.Command{
		Use:   "abort --topic T --partition P (--start-offset O | --producer-id ID --producer-epoch E --coordinator-epoch C)",
		Short: "Abort a hanging transaction on one partition by writing its ABORT marker",
		Long: `Abort a hanging transaction on one partition, as kafka-transactions.sh abort
does (KIP-664): a WriteTxnMarkers ABORT is sent to the partition's leader,
which ends the producer's open transaction there (its records become
aborted and the last stable offset moves on).

With --start-offset, the producer whose open transaction on the partition
starts at that offset (see berth txn find-hanging or berth txn producers)
is looked up with DescribeProducers, with its epoch and the coordinator
epoch of its last marker. Otherwise name the producer with --producer-id,
--producer-epoch and --coordinator-epoch.

Only abort a transaction that berth txn find-hanging reports: aborting one
a coordinator still runs loses the part of it on this partition.`,
		Example: `  berth txn abort --topic orders --partition 3 --start-offset 1207
  berth txn abort --topic orders --partition 3 --producer-id 4001 --producer-epoch 0 --coordinator-epoch 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs := cmd.Flags()
			explicit := fs.Changed("producer-id") || fs.Changed("producer-epoch") || fs.Changed("coordinator-epoch")
			switch {
			case topic == "":
				return errors.New("--topic is required")
			case partition < 0:
				return errors.New("--partition is required")
			case fs.Changed("start-offset") == explicit:
				return errors.New("give either --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch")
			case !explicit && startOffset < 0:
				return fmt.Errorf("--start-offset %d: want the offset where the open transaction starts (berth txn find-hanging)", startOffset)
			case explicit && !(fs.Changed("producer-id") && fs.Changed("producer-epoch") && fs.Changed("coordinator-epoch")):
				return errors.New("--producer-id, --producer-epoch and --coordinator-epoch go together (berth txn producers shows them)")
			case explicit && (pid < 0 || producerEpoch < 0):
				return fmt.Errorf("--producer-id %d --producer-epoch %d: want the producer's id and epoch (berth txn producers shows them)", pid, producerEpoch)
			}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				if err := checkTopic(ctx, cf, cl, topic, partition); err != nil {
					return err
				}
				e := txnAbortEntry{Topic: topic, Partition: partition, ProducerID: pid, ProducerEpoch: producerEpoch,
					CoordinatorEpoch: coordinatorEpoch, StartOffset: -1, Leader: -1}
				if !explicit {
					d, err := openTxnAt(ctx, cf, adm, topic, partition, startOffset)
					if err != nil {
						return err
					}
					// As kafka-transactions.sh: the coordinator epoch of
					// the producer's last marker, 0 before any, so the
					// partition does not refuse the marker as fenced.
					e.ProducerID, e.ProducerEpoch, e.CoordinatorEpoch = d.ProducerID, d.ProducerEpoch, max(d.CoordinatorEpoch, 0)
					e.StartOffset = startOffset
				}
				resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch,
					CoordinatorEpoch: e.CoordinatorEpoch, Topics: kadm.TopicsSet{topic: {partition: {}}}})
				var perr error
				if r, ok := resp[e.ProducerID].Topics[topic].Partitions[partition]; ok {
					e.Leader, perr = r.NodeID, r.Err
				} else if err != nil {
					return fmt.Errorf("writing the ABORT marker to the leader of %s-%d: %w", topic, partition, cf.explain(err))
				} else {
					return fmt.Errorf("the leader of %s-%d did not answer for the partition; retry", topic, partition)
				}
				e.Aborted = perr == nil
				if perr != nil {
					e.Error = kerrName(perr)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					if err := writeJSON(out, e); err != nil {
						return err
					}
				} else {
					t := newTable(out, "topic", "partition", "producer id", "epoch", "coordinator epoch", "start offset", "leader", "result")
					so, result := any(e.StartOffset), "aborted"
					if e.StartOffset < 0 {
						so = "-"
					}
					if perr != nil {
						result = e.Error
					}
					t.row(e.Topic, e.Partition, e.ProducerID, e.ProducerEpoch, e.CoordinatorEpoch, so, e.Leader, result)
					if err := t.flush(); err != nil {
						return err
					}
				}
				if perr != nil {
					return abortErr(topic, partition, perr, cf)
				}
				return nil
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&topic, "topic", "", "the topic (required)")
	fs.Int32Var(&partition, "partition", -1, "the partition (required)")
	fs.Int64Var(&startOffset, "start-offset", -1, "the first offset of the open transaction to abort (berth txn find-hanging shows it)")
	fs.Int64Var(&pid, "producer-id", -1, "the producer whose transaction to abort (with --producer-epoch and --coordinator-epoch, instead of --start-offset)")
	fs.Int16Var(&producerEpoch, "producer-epoch", -1, "the producer's epoch")
	fs.Int32Var(&coordinatorEpoch, "coordinator-epoch", -1, "the coordinator epoch of the producer's last marker on the partition (0 when it has none)")
	return cmd
}

// openTxnAt returns the producer whose open transaction on topic-partition
// starts at offset, or an error that lists the open transactions there.
func openTxnAt(ctx context.Context, cf *clientFlags, adm *kadm.Client, topic string, partition int32, offset int64) (kadm.DescribedProducer, error) {
	ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {partition: {}}})
	p, ok := ds[topic].Partitions[partition]
	switch {
	case !ok && err != nil:
		return kadm.DescribedProducer{}, fmt.Errorf("describing the producers of %s-%d: %w", topic, partition, cf.explain(err))
	case !ok:
		return kadm.DescribedProducer{}, fmt.Errorf("the leader of %s-%d did not describe its producers; retry", topic, partition)
	case p.Err != nil:
		if p.ErrMessage != "" {
			return kadm.DescribedProducer{}, fmt.Errorf("describing the producers of %s-%d: %w", topic, partition, cf.explain(withBrokerMessage(p.Err, p.ErrMessage)))
		}
		return kadm.DescribedProducer{}, fmt.Errorf("describing the producers of %s-%d: %w", topic, partition, cf.explain(p.Err))
	}
	var open []string
	for _, d := range p.ActiveProducers.Sorted() {
		if d.CurrentTxnStartOffset == offset {
			return d, nil
		}
		if d.CurrentTxnStartOffset >= 0 {
			open = append(open, fmt.Sprintf("%d (producer %d)", d.CurrentTxnStartOffset, d.ProducerID))
		}
	}
	there := "none is open there"
	if len(open) > 0 {
		there = "open ones start at " + strings.Join(open, ", ")
	}
	return kadm.DescribedProducer{}, fmt.Errorf("no producer has an open transaction starting at offset %d on %s-%d (%s); see berth txn find-hanging or berth txn producers --topic %s --partition %d",
		offset, topic, partition, there, topic, partition)
}

// abortErr explains a partition's refusal of the ABORT marker.
func abortErr(topic string, partition int32, err error, cf *clientFlags) error {
	hint := ""
	switch {
	case errors.Is(err, kerr.InvalidProducerEpoch):
		hint = "the partition has seen a newer epoch of this producer: check its epoch with berth txn producers"
	case errors.Is(err, kerr.TransactionCoordinatorFenced):
		hint = "the producer's last marker came from a newer coordinator: use the coordinator epoch berth txn producers shows"
	}
	if hint != "" {
		return fmt.Errorf("the leader of %s-%d refused the ABORT marker: %s (%s)", topic, partition, kerrName(err), hint)
	}
	return fmt.Errorf("the leader of %s-%d refused the ABORT marker: %w", topic, partition, cf.explain(err))
}
