package cli

// `berth cluster`: the state of a cluster as its metadata describes it:
// brokers, partition leaders and in-sync replicas, under-replicated and
// offline partitions. Everything comes from one Metadata request (kadm),
// so it works against any Kafka-compatible cluster.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func init() { clientCommands = append(clientCommands, newClusterCmd) }

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show brokers, partition leaders and replication health",
		Args:  cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newClusterStatusCmd(cf), newClusterBrokersCmd(cf), newClusterPartitionsCmd(cf))
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

func newClusterStatusCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Summarise the cluster: controller, brokers, under-replicated and offline partitions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
				v, err := loadCluster(ctx, adm)
				if err != nil {
					return cf.explain(err)
				}
				out := cmd.OutOrStdout()
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
			return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
				v, err := loadCluster(ctx, adm)
				if err != nil {
					return cf.explain(err)
				}
				out := cmd.OutOrStdout()
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
			return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
				v, err := loadCluster(ctx, adm)
				if err != nil {
					return cf.explain(err)
				}
				ps := v.partitions[:0:0]
				for _, p := range v.partitions {
					if unhealthy && p.State == "ok" || len(topics) > 0 && !slices.Contains(topics, p.Topic) {
						continue
					}
					ps = append(ps, p)
				}
				out := cmd.OutOrStdout()
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
