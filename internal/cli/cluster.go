package cli

// `berth cluster`: the state of a cluster as its metadata describes it:
// brokers, partition leaders and in-sync replicas, under-replicated and
// offline partitions. Everything comes from one Metadata request (kadm),
// so it works against any Kafka-compatible cluster. `berth cluster elect`
// asks for leader elections (ElectLeaders), as kafka-leader-election.sh.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { clientCommands = append(clientCommands, newClusterCmd) }

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show brokers, partition leaders and replication health",
		Args:  cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newClusterStatusCmd(cf), newClusterBrokersCmd(cf), newClusterPartitionsCmd(cf), newClusterElectCmd(cf))
	cmd.AddCommand(newClusterQuorumCmd(cf))
	cmd.AddCommand(newClusterReassignCmd(cf), newClusterReassignmentsCmd(cf))
	return cmd
}

type clusterBroker struct {
	ID         int32  `json:"id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
	Leaders    int    `json:"leaders"`
	Replicas   int    `json:"replicas"`
}

type clusterPartition struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	State       string  `json:"state"` // ok, under-replicated, offline
	Error       string  `json:"error,omitempty"`
}

type clusterStatus struct {
	ClusterID       string `json:"cluster_id"`
	Controller      int32  `json:"controller"`
	Brokers         int    `json:"brokers"`
	Topics          int    `json:"topics"`
	Partitions      int    `json:"partitions"`
	UnderReplicated int    `json:"under_replicated"`
	Offline         int    `json:"offline"`
}

// clusterView is one Metadata answer in the shapes the commands print.
type clusterView struct {
	status     clusterStatus
	brokers    []clusterBroker
	partitions []clusterPartition
}

func loadCluster(ctx context.Context, adm *kadm.Client) (clusterView, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return clusterView{}, err
	}
	var v clusterView
	v.status.ClusterID = md.Cluster
	v.status.Controller = md.Controller
	byID := map[int32]*clusterBroker{}
	for _, b := range md.Brokers {
		cb := clusterBroker{ID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == md.Controller}
		if b.Rack != nil {
			cb.Rack = *b.Rack
		}
		v.brokers = append(v.brokers, cb)
	}
	sort.Slice(v.brokers, func(i, j int) bool { return v.brokers[i].ID < v.brokers[j].ID })
	for i := range v.brokers {
		byID[v.brokers[i].ID] = &v.brokers[i]
	}
	for _, td := range md.Topics.Sorted() {
		v.status.Topics++
		for _, pd := range td.Partitions.Sorted() {
			cp := clusterPartition{
				Topic: td.Topic, Partition: pd.Partition, Leader: pd.Leader, LeaderEpoch: pd.LeaderEpoch,
				Replicas: nonNil(pd.Replicas), ISR: nonNil(pd.ISR), State: "ok",
			}
			switch {
			case pd.Leader < 0:
				cp.State = "offline"
				v.status.Offline++
			case len(pd.ISR) < len(pd.Replicas):
				cp.State = "under-replicated"
				v.status.UnderReplicated++
			}
			if pd.Err != nil {
				cp.Error = kerrName(pd.Err)
			}
			if b := byID[pd.Leader]; b != nil {
				b.Leaders++
			}
			for _, r := range pd.Replicas {
				if b := byID[r]; b != nil {
					b.Replicas++
				}
			}
			v.partitions = append(v.partitions, cp)
		}
	}
	v.status.Brokers = len(v.brokers)
	v.status.Partitions = len(v.partitions)
	return v, nil
}

// withClusterView runs fn with the cluster's current view (one Metadata
// request) and the command's output.
func withClusterView(cmd *cobra.Command, cf *clientFlags, fn func(v clusterView, out io.Writer) error) error {
	return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
		v, err := loadCluster(ctx, adm)
		if err != nil {
			return cf.explain(err)
		}
		return fn(v, cmd.OutOrStdout())
	})
}

func newClusterStatusCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Summarise the cluster: controller, brokers, under-replicated and offline partitions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClusterView(cmd, cf, func(v clusterView, out io.Writer) error {
				if cf.json {
					return writeJSON(out, v.status)
				}
				return printClusterStatus(out, v.status)
			})
		},
	}
}

func printClusterStatus(w io.Writer, s clusterStatus) error {
	t := newTable(w)
	t.row("Cluster id:", s.ClusterID)
	t.row("Controller:", s.Controller)
	t.row("Brokers:", s.Brokers)
	t.row("Topics:", s.Topics)
	t.row("Partitions:", s.Partitions)
	t.row("Under-replicated:", s.UnderReplicated)
	t.row("Offline:", s.Offline)
	if err := t.flush(); err != nil {
		return err
	}
	if s.UnderReplicated > 0 || s.Offline > 0 {
		_, err := fmt.Fprintln(w, "\nSee `berth cluster partitions --unhealthy` for the partitions concerned.")
		return err
	}
	return nil
}

func newClusterBrokersCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "brokers",
		Short: "List the brokers with their racks and how many leaders and replicas each holds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClusterView(cmd, cf, func(v clusterView, out io.Writer) error {
				if cf.json {
					return writeJSON(out, v.brokers)
				}
				t := newTable(out, "id", "address", "rack", "controller", "leaders", "replicas")
				for _, b := range v.brokers {
					rack := b.Rack
					if rack == "" {
						rack = "-"
					}
					ctl := ""
					if b.Controller {
						ctl = "yes"
					}
					t.row(b.ID, fmt.Sprintf("%s:%d", b.Host, b.Port), rack, ctl, b.Leaders, b.Replicas)
				}
				return t.flush()
			})
		},
	}
}

func newClusterPartitionsCmd(cf *clientFlags) *cobra.Command {
	var unhealthy bool
	var topics []string
	cmd := &cobra.Command{
		Use:   "partitions",
		Short: "List partitions with their leader, replicas and in-sync replicas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClusterView(cmd, cf, func(v clusterView, out io.Writer) error {
				ps := v.partitions[:0:0]
				for _, p := range v.partitions {
					if unhealthy && p.State == "ok" || len(topics) > 0 && !slices.Contains(topics, p.Topic) {
						continue
					}
					ps = append(ps, p)
				}
				if cf.json {
					return writeJSON(out, ps)
				}
				if len(ps) == 0 {
					msg := "No partitions."
					if unhealthy {
						msg = "Every partition has a leader and a full in-sync replica set."
					}
					_, err := fmt.Fprintln(out, msg)
					return err
				}
				t := newTable(out, "topic", "partition", "leader", "epoch", "replicas", "isr", "state")
				for _, p := range ps {
					leader := fmt.Sprint(p.Leader)
					if p.Leader < 0 {
						leader = "none"
					}
					state := p.State
					if p.Error != "" {
						state += " (" + p.Error + ")"
					}
					t.row(p.Topic, p.Partition, leader, p.LeaderEpoch, joinInt32s(p.Replicas), joinInt32s(p.ISR), state)
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().BoolVar(&unhealthy, "unhealthy", false, "only under-replicated and offline partitions")
	cmd.Flags().StringSliceVar(&topics, "topic", nil, "only these topics (repeatable)")
	return cmd
}

// ---- elect ----

// electResult is one partition's outcome of `berth cluster elect`.
type electResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Result    string `json:"result"`            // elected, not-needed, failed
	Error     string `json:"error,omitempty"`   // the Kafka error code's name
	Message   string `json:"message,omitempty"` // the broker's explanation

	err error // the error behind Error, for the exit status
}

// electOpts are the flags of `berth cluster elect`.
type electOpts struct {
	typ        string
	topics     []string
	partitions []int32
	all        bool
}

func newClusterElectCmd(cf *clientFlags) *cobra.Command {
	var o electOpts
	cmd := &cobra.Command{
		Use:   "elect (--topic T [--partition N]... | --all) [--type preferred|unclean]",
		Short: "Elect partition leaders: back to the preferred replica, or (unclean) for partitions without one",
		Long: `Ask the cluster's active controller to elect partition leaders (ElectLeaders,
as kafka-leader-election.sh).

--type preferred (the default) moves leadership back to each partition's
preferred replica (the first in its replica list) when that replica is up and
in sync. --type unclean elects a leader for partitions that have none: an
in-sync replica if one is up, else any live replica, which loses the records
only the old in-sync replicas had.

--all asks for every partition and lists only those that needed an election.
The exit status is 1 if a partition could not be elected; a partition that
needed no election is not a failure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			how, err := o.validate()
			if err != nil {
				return err
			}
			if how == kadm.ElectLiveReplica {
				fmt.Fprintln(cmd.ErrOrStderr(), "Unclean election: a partition whose in-sync replicas are all down gets any live replica as leader; records only they had are lost.")
			}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				return runElect(ctx, cmd, cf, cl, adm, how, o)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.typ, "type", "preferred", "election type: preferred or unclean")
	fs.StringSliceVar(&o.topics, "topic", nil, "elect leaders for this topic's partitions (repeatable; every partition unless --partition)")
	fs.Int32SliceVar(&o.partitions, "partition", nil, "only this partition of --topic (repeatable)")
	fs.BoolVar(&o.all, "all", false, "elect leaders for every partition of every topic")
	return cmd
}

// validate checks the flags before anything connects.
func (o electOpts) validate() (kadm.ElectLeadersHow, error) {
	var how kadm.ElectLeadersHow
	switch strings.ToLower(strings.TrimSpace(o.typ)) {
	case "preferred":
		how = kadm.ElectPreferredReplica
	case "unclean":
		how = kadm.ElectLiveReplica
	default:
		return 0, fmt.Errorf("--type %q: want preferred or unclean", o.typ)
	}
	switch {
	case o.all && len(o.topics) > 0:
		return 0, errors.New("--all and --topic do not go together: --all already covers every topic")
	case o.all && len(o.partitions) > 0:
		return 0, errors.New("--partition needs --topic, not --all")
	case !o.all && len(o.topics) == 0:
		return 0, errors.New("say which partitions: --topic T [--partition N]..., or --all")
	case len(o.partitions) > 0 && len(o.topics) != 1:
		return 0, errors.New("--partition needs exactly one --topic")
	}
	for _, t := range o.topics {
		if strings.TrimSpace(t) == "" {
			return 0, errors.New("--topic is empty")
		}
	}
	for _, p := range o.partitions {
		if p < 0 {
			return 0, fmt.Errorf("--partition %d: partitions are numbered from 0", p)
		}
	}
	return how, nil
}

// runElect sends one ElectLeaders request and prints its results. It uses
// the request directly rather than kadm's ElectLeaders, which drops the
// top-level error code: with --all, a NOT_CONTROLLER or REQUEST_TIMED_OUT
// answer would otherwise read as "nothing to do".
func runElect(ctx context.Context, cmd *cobra.Command, cf *clientFlags, cl *kgo.Client, adm *kadm.Client, how kadm.ElectLeadersHow, o electOpts) error {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = int8(how)
	req.TimeoutMillis = int32(min(cf.timeout, time.Duration(1<<31-1)*time.Millisecond).Milliseconds())
	if !o.all {
		topics, err := electTopics(ctx, cf, adm, o)
		if err != nil {
			return err
		}
		req.Topics = topics
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return cf.explain(err)
	}
	if resp.Version == 0 && how == kadm.ElectLiveReplica {
		fmt.Fprintln(cmd.ErrOrStderr(), "Warning: the cluster ran preferred elections: it does not support unclean ones (ElectLeaders v0).")
	}
	results, err := electResults(resp)
	if err != nil {
		return cf.explain(err)
	}
	out := cmd.OutOrStdout()
	if cf.json {
		err = writeJSON(out, results)
	} else {
		err = printElect(out, cmd.ErrOrStderr(), results, how, o.all)
	}
	return errors.Join(err, electFailure(cf, results))
}

// electTopics builds the request's topic list: the partitions given, or
// every partition of each topic (looked up in the metadata).
func electTopics(ctx context.Context, cf *clientFlags, adm *kadm.Client, o electOpts) ([]kmsg.ElectLeadersRequestTopic, error) {
	if len(o.partitions) > 0 {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = o.topics[0]
		for _, p := range o.partitions {
			if !slices.Contains(rt.Partitions, p) {
				rt.Partitions = append(rt.Partitions, p)
			}
		}
		return []kmsg.ElectLeadersRequestTopic{rt}, nil
	}
	var names []string
	for _, t := range o.topics {
		if t = strings.TrimSpace(t); !slices.Contains(names, t) {
			names = append(names, t)
		}
	}
	tds, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, cf.explain(err)
	}
	var out []kmsg.ElectLeadersRequestTopic
	for _, name := range names {
		td, ok := tds[name]
		if !ok {
			return nil, topicErr(cf, name, kerr.UnknownTopicOrPartition, "")
		}
		if td.Err != nil {
			return nil, topicErr(cf, name, td.Err, "")
		}
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = name, td.Partitions.Numbers()
		out = append(out, rt)
	}
	return out, nil
}

// electResults turns a response into results, or its top-level error.
func electResults(resp *kmsg.ElectLeadersResponse) ([]electResult, error) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	results := []electResult{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			r := electResult{Topic: rt.Topic, Partition: rp.Partition, Result: "elected"}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				r.Result, r.Error = "failed", kerrName(err)
				if errors.Is(err, kerr.ElectionNotNeeded) {
					r.Result = "not-needed"
				}
				r.err = err
				if rp.ErrorMessage != nil {
					if wm, ok := withBrokerMessage(err, *rp.ErrorMessage).(*brokerMessageError); ok {
						r.Message, r.err = wm.msg, wm
					}
				}
			}
			results = append(results, r)
		}
	}
	sort.SliceStable(results, func(i, j int) bool {
		a, b := results[i], results[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return results, nil
}

// printElect writes the results table and a summary line (stderr), or
// says there was nothing to do.
func printElect(out, errOut io.Writer, results []electResult, how kadm.ElectLeadersHow, all bool) error {
	var elected, failed int
	for _, r := range results {
		switch r.Result {
		case "elected":
			elected++
		case "failed":
			failed++
		}
	}
	if elected == 0 && failed == 0 {
		what := "partition named"
		if all {
			what = "partition"
		}
		has := "its preferred replica as leader"
		if how == kadm.ElectLiveReplica {
			has = "a live leader"
		}
		_, err := fmt.Fprintf(out, "Nothing to do: every %s already has %s.\n", what, has)
		return err
	}
	t := newTable(out, "topic", "partition", "result", "detail")
	for _, r := range results {
		res := r.Result
		switch res {
		case "failed":
			res = r.Error
		case "not-needed":
			res = "not needed"
		}
		t.row(r.Topic, r.Partition, res, r.Message)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(errOut, "Elected %d of %d partitions", elected, len(results))
	if err == nil && failed > 0 {
		_, err = fmt.Fprintf(errOut, "; %d could not be elected", failed)
	}
	if err == nil {
		_, err = fmt.Fprintln(errOut, ".")
	}
	return err
}

// electFailure is the command's error when partitions could not be
// elected: how many, and the first one's reason with a hint.
func electFailure(cf *clientFlags, results []electResult) error {
	var first *electResult
	n := 0
	for i := range results {
		if results[i].Result == "failed" {
			if first == nil {
				first = &results[i]
			}
			n++
		}
	}
	if first == nil {
		return nil
	}
	err := fmt.Errorf("%d partition(s) could not be elected; %s-%d: %w", n, first.Topic, first.Partition, first.err)
	if h := electHint(first.err); h != "" {
		return fmt.Errorf("%w (%s)", err, h)
	}
	return cf.explain(err)
}

// electHint is the advice for the election error codes (kerrHint has the
// general ones).
func electHint(err error) string {
	switch {
	case errors.Is(err, kerr.PreferredLeaderNotAvailable):
		return "the preferred replica is down or not in sync; see `berth cluster partitions`"
	case errors.Is(err, kerr.EligibleLeadersNotAvailable):
		return "no replica of the partition is up; restart one of its brokers"
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return "no such topic or partition; see `berth topic describe TOPIC`"
	case errors.Is(err, kerr.InvalidUpdateVersion):
		return "the partition kept changing during the election; run the command again"
	}
	return ""
}
