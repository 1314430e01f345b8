package cli

// `berth cluster reassign` and `berth cluster reassignments`: move
// partitions between brokers (AlterPartitionReassignments /
// ListPartitionReassignments through kadm), as kafka-reassign-partitions.sh
// does, with an optional throttle and a progress display while the new
// replicas copy the log.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// throttleConfig is the broker setting a reassignment's copying honours.
const throttleConfig = "follower.replication.throttled.rate"

// reassignPlan is kafka-reassign-partitions.sh's JSON format.
type reassignPlan struct {
	Version    int `json:"version"`
	Partitions []struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Replicas  []int32 `json:"replicas"`
	} `json:"partitions"`
}

type reassignResult struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas,omitempty"` // the target; empty for a cancel
	Result    string  `json:"result"`
	Error     string  `json:"error,omitempty"`
}

type reassignOpts struct {
	topic     string
	partition int32
	replicas  []int32
	plan      string
	cancel    bool
	throttle  int64
	wait      bool
}

func newClusterReassignCmd(cf *clientFlags) *cobra.Command {
	var o reassignOpts
	cmd := &cobra.Command{
		Use:   "reassign (--topic T --partition N --replicas 1,2,3 | --plan FILE) [--throttle BYTES] [--wait] [--cancel]",
		Short: "Move partitions to other brokers (or cancel a move)",
		Long: `Move partitions to new replica lists (AlterPartitionReassignments, as
kafka-reassign-partitions.sh --execute). The new replicas copy the log as
followers; once they are all in sync the controller switches the partition to
its new replicas (leadership moves off a leaving broker) and the leaving
brokers delete their copies. Clients are not interrupted.

--plan reads kafka-reassign-partitions.sh's JSON:
  {"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,3,4]}]}

--throttle sets follower.replication.throttled.rate (bytes per second, for
the copying only; other replication is never throttled) before starting. With
--wait the command shows progress until every move is done and then removes
the throttle it set. --cancel stops the moves named and restores the original
replicas.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			moves, err := o.moves(cmd)
			if err != nil {
				return err
			}
			return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
				return runReassign(ctx, cmd, cf, adm, o, moves)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.topic, "topic", "", "the topic of the partition to move")
	fs.Int32Var(&o.partition, "partition", -1, "the partition to move")
	fs.Int32SliceVar(&o.replicas, "replicas", nil, "the new replica list, preferred leader first (e.g. 2,3,4)")
	fs.StringVar(&o.plan, "plan", "", "a kafka-reassign-partitions.sh JSON file of moves")
	fs.BoolVar(&o.cancel, "cancel", false, "cancel the moves named (with --topic/--partition or --plan) instead of starting them")
	fs.Int64Var(&o.throttle, "throttle", 0, "limit the copying to this many bytes per second (sets "+throttleConfig+")")
	fs.BoolVar(&o.wait, "wait", false, "show progress until every move is done; then remove the throttle set with --throttle")
	return cmd
}

// move is one partition to move (replicas nil: cancel).
type move struct {
	topic     string
	partition int32
	replicas  []int32
}

func (o *reassignOpts) moves(cmd *cobra.Command) ([]move, error) {
	var out []move
	switch {
	case o.plan != "" && o.topic != "":
		return nil, errors.New("give either --plan or --topic/--partition/--replicas, not both")
	case o.plan != "":
		var b []byte
		var err error
		if o.plan == "-" {
			b, err = io.ReadAll(cmd.InOrStdin())
		} else {
			b, err = os.ReadFile(o.plan)
		}
		if err != nil {
			return nil, fmt.Errorf("--plan: %w", err)
		}
		var p reassignPlan
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("--plan %s: not a reassignment plan (%v); expected {\"version\":1,\"partitions\":[{\"topic\":...,\"partition\":0,\"replicas\":[1,2,3]}]}", o.plan, err)
		}
		for _, pp := range p.Partitions {
			if pp.Topic == "" || (!o.cancel && len(pp.Replicas) == 0) {
				return nil, fmt.Errorf("--plan %s: every entry needs a topic, a partition and replicas", o.plan)
			}
			out = append(out, move{pp.Topic, pp.Partition, pp.Replicas})
		}
	case o.topic != "":
		if o.partition < 0 {
			return nil, errors.New("--topic needs --partition")
		}
		if !o.cancel && len(o.replicas) == 0 {
			return nil, errors.New("--replicas is required (the new replica list, e.g. --replicas 2,3,4), or --cancel")
		}
		out = append(out, move{o.topic, o.partition, o.replicas})
	default:
		return nil, errors.New("name the moves: --topic T --partition N --replicas 1,2,3, or --plan FILE")
	}
	if len(out) == 0 {
		return nil, errors.New("the plan has no partitions")
	}
	if o.cancel {
		for i := range out {
			out[i].replicas = nil
		}
	}
	if o.throttle < 0 {
		return nil, errors.New("--throttle must be a positive number of bytes per second")
	}
	return out, nil
}

func runReassign(ctx context.Context, cmd *cobra.Command, cf *clientFlags, adm *kadm.Client, o reassignOpts, moves []move) error {
	if o.throttle > 0 && !o.cancel {
		if err := setThrottle(ctx, adm, strconv.FormatInt(o.throttle, 10)); err != nil {
			return cf.explain(fmt.Errorf("setting %s: %w", throttleConfig, err))
		}
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, m := range moves {
		if m.replicas == nil {
			req.CancelAssign(m.topic, m.partition)
		} else {
			req.Assign(m.topic, m.partition, m.replicas)
		}
	}
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return cf.explain(err)
	}
	var results []reassignResult
	failed := 0
	for _, r := range resps.Sorted() {
		res := reassignResult{Topic: r.Topic, Partition: r.Partition, Result: "started"}
		for _, m := range moves {
			if m.topic == r.Topic && m.partition == r.Partition {
				res.Replicas = m.replicas
			}
		}
		if o.cancel {
			res.Result = "cancelled"
		}
		if r.Err != nil {
			failed++
			res.Result, res.Error = "failed", kerrName(r.Err)
			if r.ErrMessage != "" {
				res.Error += ": " + r.ErrMessage
			}
		}
		results = append(results, res)
	}
	out := cmd.OutOrStdout()
	if cf.json {
		if err := writeJSON(out, results); err != nil {
			return err
		}
	} else {
		t := newTable(out, "topic", "partition", "replicas", "result")
		for _, r := range results {
			res := r.Result
			if r.Error != "" {
				res += " (" + r.Error + ")"
			}
			reps := "-"
			if r.Replicas != nil {
				reps = joinInt32s(r.Replicas)
			}
			t.row(r.Topic, r.Partition, reps, res)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d partitions could not be reassigned", failed, len(results))
	}
	if !o.wait || o.cancel {
		if !o.cancel && !cf.json {
			fmt.Fprintln(cmd.ErrOrStderr(), "Follow the moves with `berth cluster reassignments`.")
		}
		return nil
	}
	if err := waitReassignments(ctx, cmd, cf, adm, moves); err != nil {
		return err
	}
	if o.throttle > 0 {
		if err := setThrottle(ctx, adm, ""); err != nil {
			return cf.explain(fmt.Errorf("removing %s: %w", throttleConfig, err))
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Removed the throttle (%s).\n", throttleConfig)
	}
	return nil
}

// setThrottle sets the cluster-wide throttle, or removes it when rate is "".
func setThrottle(ctx context.Context, adm *kadm.Client, rate string) error {
	op := kadm.SetConfig
	var v *string
	if rate == "" {
		op = kadm.DeleteConfig
	} else {
		v = &rate
	}
	res, err := adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Op: op, Name: throttleConfig, Value: v}})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// waitReassignments polls until none of moves is in progress, printing
// how many remain.
func waitReassignments(ctx context.Context, cmd *cobra.Command, cf *clientFlags, adm *kadm.Client, moves []move) error {
	set := kadm.TopicsSet{}
	for _, m := range moves {
		set.Add(m.topic, m.partition)
	}
	start := time.Now()
	last := -1
	for {
		cur, err := adm.ListPartitionReassignments(context.WithoutCancel(ctx), set)
		if err != nil {
			return cf.explain(err)
		}
		n := 0
		cur.Each(func(kadm.ListPartitionReassignmentsResponse) { n++ })
		if n != last {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d of %d moves in progress\n", time.Since(start).Round(time.Second), n, len(moves))
			last = n
		}
		if n == 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "All %d moves done in %s.\n", len(moves), time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type reassignmentEntry struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	Adding    []int32 `json:"adding"`
	Removing  []int32 `json:"removing"`
}

func newClusterReassignmentsCmd(cf *clientFlags) *cobra.Command {
	var topics []string
	cmd := &cobra.Command{
		Use:   "reassignments",
		Short: "List partition moves in progress",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
				md, err := adm.Metadata(ctx, topics...)
				if err != nil {
					return cf.explain(err)
				}
				set := kadm.TopicsSet{}
				for _, td := range md.Topics {
					for _, pd := range td.Partitions {
						set.Add(td.Topic, pd.Partition)
					}
				}
				cur, err := adm.ListPartitionReassignments(ctx, set)
				if err != nil {
					return cf.explain(err)
				}
				var entries []reassignmentEntry
				for _, r := range cur.Sorted() {
					entries = append(entries, reassignmentEntry{r.Topic, r.Partition, nonNil(r.Replicas), nonNil(r.AddingReplicas), nonNil(r.RemovingReplicas)})
				}
				sort.Slice(entries, func(i, j int) bool {
					if entries[i].Topic != entries[j].Topic {
						return entries[i].Topic < entries[j].Topic
					}
					return entries[i].Partition < entries[j].Partition
				})
				out := cmd.OutOrStdout()
				if cf.json {
					if entries == nil {
						entries = []reassignmentEntry{}
					}
					return writeJSON(out, entries)
				}
				if len(entries) == 0 {
					_, err := fmt.Fprintln(out, "No partition moves in progress.")
					return err
				}
				t := newTable(out, "topic", "partition", "replicas", "adding", "removing")
				for _, e := range entries {
					t.row(e.Topic, e.Partition, joinInt32s(e.Replicas), dashIfEmpty(joinInt32s(e.Adding)), dashIfEmpty(joinInt32s(e.Removing)))
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().StringSliceVar(&topics, "topic", nil, "only these topics (repeatable)")
	return cmd
}
