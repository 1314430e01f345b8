package cli

// `berth txn`: list and describe transactions, with what
// kafka-transactions.sh shows, over ListTransactions (every broker) and
// DescribeTransactions (each id's coordinator) through kadm, and the
// active producers of partitions over DescribeProducers (each partition's
// leader).

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
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { clientCommands = append(clientCommands, newTxnCmd) }

func newTxnCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "txn",
		Aliases: []string{"transactions"},
		Short:   "List and describe transactions (transactional ids, their state, partitions and age) and partitions' producers",
		Args:    cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newTxnListCmd(cf), newTxnDescribeCmd(cf), newTxnProducersCmd(cf))
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
			return withGroupAdmin(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
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
			return withGroupAdmin(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
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
			return withGroupAdmin(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
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
