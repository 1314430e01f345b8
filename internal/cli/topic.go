package cli

// `berth topic`: create, list, describe, alter and delete topics over the
// Kafka admin APIs (CreateTopics, Metadata, ListOffsets, DescribeConfigs,
// CreatePartitions, IncrementalAlterConfigs, DeleteTopics) through kadm, as
// kafka-topics.sh does.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { clientCommands = append(clientCommands, newTopicCmd) }

func newTopicCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, alter and delete topics",
		Args:  cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(
		newTopicCreateCmd(cf),
		newTopicListCmd(cf),
		newTopicDescribeCmd(cf),
		newTopicAlterCmd(cf),
		newTopicDeleteCmd(cf),
	)
	return cmd
}

// parseConfigs turns repeated --config key=value flags into a CreateTopics
// config map.
func parseConfigs(kvs []string) (map[string]*string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]*string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := cutKV(kv)
		if !ok {
			return nil, fmt.Errorf("--config %q: want key=value, e.g. --config retention.ms=86400000", kv)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("--config %s given twice", k)
		}
		m[k] = kadm.StringPtr(v)
	}
	return m, nil
}

// topicErr wraps a per-topic error from an admin response. The broker's
// error message, when there is one, replaces the code's generic description.
func topicErr(cf *clientFlags, topic string, err error, brokerMsg string) error {
	if brokerMsg = strings.TrimSpace(brokerMsg); brokerMsg != "" {
		err = withBrokerMessage(err, brokerMsg)
	}
	return cf.explain(fmt.Errorf("topic %q: %w", topic, err))
}

// topicIDString formats a topic ID as Kafka's tools do (URL-safe base64
// without padding); the all-zero ID (no IDs on this broker) is empty.
func topicIDString(id kadm.TopicID) string {
	if id == (kadm.TopicID{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// ---- create ----

type topicCreateResult struct {
	Topic             string `json:"topic"`
	ID                string `json:"id,omitempty"`
	Partitions        int32  `json:"partitions,omitempty"`         // 0: not known
	ReplicationFactor int16  `json:"replication_factor,omitempty"` // 0: not known
	// MinInsyncReplicas is the topic's effective min.insync.replicas as
	// the broker reported it (CreateTopics v5+); 0: not known.
	MinInsyncReplicas int  `json:"min_insync_replicas,omitempty"`
	Created           bool `json:"created"`
	AlreadyExisted    bool `json:"already_existed,omitempty"`
	ValidateOnly      bool `json:"validate_only,omitempty"`
}

func newTopicCreateCmd(cf *clientFlags) *cobra.Command {
	var (
		partitions   int32
		replication  int16
		configs      []string
		ifNotExists  bool
		validateOnly bool
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Example: `  berth topic create orders --partitions 6 --config retention.ms=86400000
  berth topic create orders --if-not-exists`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			cfgs, err := parseConfigs(configs)
			if err != nil {
				return err
			}
			if partitions == 0 || partitions < -1 {
				return fmt.Errorf("--partitions %d: must be at least 1 (or -1 for the broker's num.partitions)", partitions)
			}
			if replication == 0 || replication < -1 {
				return fmt.Errorf("--replication-factor %d: must be at least 1 (or -1 for the broker's default.replication.factor)", replication)
			}
			return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
				create := adm.CreateTopics
				if validateOnly {
					create = adm.ValidateCreateTopics
				}
				resps, err := create(ctx, partitions, replication, cfgs, name)
				if err != nil {
					return cf.explain(err)
				}
				r, ok := resps[name]
				if !ok {
					return fmt.Errorf("topic %q: the broker's CreateTopics response left the topic out", name)
				}
				res := topicCreateResult{
					Topic:             name,
					ID:                topicIDString(r.ID),
					Partitions:        r.NumPartitions,
					ReplicationFactor: r.ReplicationFactor,
					MinInsyncReplicas: minISR(r.Configs["min.insync.replicas"]),
					ValidateOnly:      validateOnly,
				}
				// Older brokers, and brokers answering for an existing
				// topic, may not say; fall back to what was asked, or
				// leave it out (0) when that was the broker default.
				if res.Partitions <= 0 {
					res.Partitions = max(partitions, 0)
				}
				if res.ReplicationFactor <= 0 {
					res.ReplicationFactor = max(replication, 0)
				}
				switch {
				case r.Err == nil:
					res.Created = !validateOnly
				case errors.Is(r.Err, kerr.TopicAlreadyExists) && ifNotExists:
					res.AlreadyExisted = true
				default:
					return topicErr(cf, name, r.Err, r.ErrMessage)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, res)
				}
				return printTopicCreate(out, res)
			})
		},
	}
	fs := cmd.Flags()
	fs.Int32VarP(&partitions, "partitions", "p", -1, "number of partitions (-1: the broker's num.partitions)")
	fs.Int16VarP(&replication, "replication-factor", "r", -1, "replicas per partition (-1: the broker's default.replication.factor)")
	fs.StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (repeatable), e.g. retention.ms=86400000")
	fs.BoolVar(&ifNotExists, "if-not-exists", false, "succeed if the topic already exists")
	fs.BoolVar(&validateOnly, "validate-only", false, "ask the broker to check the request without creating the topic")
	return cmd
}

// minISR reads a reported min.insync.replicas (0: not reported).
func minISR(c kadm.Config) int {
	n, _ := strconv.Atoi(c.MaybeValue())
	return n
}

func printTopicCreate(w io.Writer, r topicCreateResult) error {
	shape := fmt.Sprintf("%s, replication factor %s", plural(int(r.Partitions), "partition"), countOrDefault(int(r.ReplicationFactor)))
	if r.MinInsyncReplicas > 1 { // 1 is what a single node has: not worth a word
		shape += fmt.Sprintf(", min.insync.replicas %d", r.MinInsyncReplicas)
	}
	var err error
	switch {
	case r.AlreadyExisted:
		_, err = fmt.Fprintf(w, "Topic %s already exists.\n", r.Topic)
	case r.ValidateOnly:
		_, err = fmt.Fprintf(w, "Topic %s can be created (%s); nothing was created (--validate-only).\n", r.Topic, shape)
	default:
		_, err = fmt.Fprintf(w, "Created topic %s (%s).\n", r.Topic, shape)
	}
	return err
}

func countOrDefault(n int) string {
	if n <= 0 {
		return "default"
	}
	return fmt.Sprint(n)
}

// ---- list ----

type topicListEntry struct {
	Topic             string `json:"topic"`
	ID                string `json:"id,omitempty"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
	Error             string `json:"error,omitempty"`
}

func newTopicListCmd(cf *clientFlags) *cobra.Command {
	var internal bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
				list := adm.ListTopics
				if internal {
					list = adm.ListTopicsWithInternal
				}
				tds, err := list(ctx)
				if err != nil {
					return cf.explain(err)
				}
				entries := make([]topicListEntry, 0, len(tds))
				for _, td := range tds.Sorted() {
					e := topicListEntry{
						Topic:             td.Topic,
						ID:                topicIDString(td.ID),
						Partitions:        len(td.Partitions),
						ReplicationFactor: td.Partitions.NumReplicas(),
						Internal:          td.IsInternal,
					}
					if td.Err != nil {
						e.Error = kerrName(td.Err)
					}
					entries = append(entries, e)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, entries)
				}
				return printTopicList(out, entries, internal)
			})
		},
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics such as __consumer_offsets")
	return cmd
}

func printTopicList(w io.Writer, entries []topicListEntry, internal bool) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "No topics. Create one with `berth topic create NAME`.")
		return err
	}
	header := []string{"topic", "partitions", "replication-factor"}
	if internal {
		header = append(header, "internal")
	}
	t := newTable(w, header...)
	for _, e := range entries {
		rf := fmt.Sprint(e.ReplicationFactor)
		if e.Error != "" {
			rf = e.Error
		}
		row := []any{e.Topic, e.Partitions, rf}
		if internal {
			row = append(row, e.Internal)
		}
		t.row(row...)
	}
	return t.flush()
}

// ---- describe ----

type topicDescription struct {
	Topic             string                 `json:"topic"`
	ID                string                 `json:"id,omitempty"`
	Internal          bool                   `json:"internal"`
	ReplicationFactor int                    `json:"replication_factor"`
	MinInsyncReplicas int                    `json:"min_insync_replicas,omitempty"` // 0: not known
	Partitions        []partitionDescription `json:"partitions"`
	Configs           []configEntry          `json:"configs"`
	Error             string                 `json:"error,omitempty"`

	err error // the error behind Error, for the exit status and hint
}

type partitionDescription struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas,omitempty"`
	LogStartOffset  int64   `json:"log_start_offset"` // -1: unknown
	EndOffset       int64   `json:"end_offset"`       // -1: unknown
	Error           string  `json:"error,omitempty"`
}

type configEntry struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Source    string `json:"source"`
	Sensitive bool   `json:"sensitive,omitempty"`
}

func newTopicDescribeCmd(cf *clientFlags) *cobra.Command {
	var allConfigs bool
	cmd := &cobra.Command{
		Use:   "describe NAME...",
		Short: "Show a topic's partitions (leader, replicas, ISR, offsets) and its non-default configs",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, names []string) error {
			return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
				descs, err := describeTopics(ctx, adm, names, allConfigs)
				if err != nil {
					return cf.explain(err)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					err = writeJSON(out, descs)
				} else {
					err = printTopicDescriptions(out, descs)
				}
				if err != nil {
					return err
				}
				var errs []error
				for _, d := range descs {
					if d.err != nil {
						errs = append(errs, topicErr(cf, d.Topic, d.err, ""))
					}
				}
				return errors.Join(errs...)
			})
		},
	}
	cmd.Flags().BoolVar(&allConfigs, "all-configs", false, "list every config, defaults included")
	return cmd
}

func describeTopics(ctx context.Context, adm *kadm.Client, names []string, allConfigs bool) ([]topicDescription, error) {
	tds, err := adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return nil, err
	}
	var found []string
	descs := make([]topicDescription, 0, len(names))
	for _, name := range names {
		td, ok := tds[name]
		d := topicDescription{Topic: name, Partitions: []partitionDescription{}, Configs: []configEntry{}}
		switch {
		case !ok:
			d.err = kerr.UnknownTopicOrPartition
			d.Error = kerrName(d.err)
		case td.Err != nil:
			d.err = td.Err
			d.Error = kerrName(d.err)
		default:
			found = append(found, name)
			d.ID = topicIDString(td.ID)
			d.Internal = td.IsInternal
			d.ReplicationFactor = td.Partitions.NumReplicas()
			for _, p := range td.Partitions.Sorted() {
				pd := partitionDescription{
					Partition:       p.Partition,
					Leader:          p.Leader,
					LeaderEpoch:     p.LeaderEpoch,
					Replicas:        nonNil(p.Replicas),
					ISR:             nonNil(p.ISR),
					OfflineReplicas: p.OfflineReplicas,
					LogStartOffset:  -1,
					EndOffset:       -1,
				}
				if p.Err != nil {
					pd.Error = kerrName(p.Err)
				}
				d.Partitions = append(d.Partitions, pd)
			}
		}
		descs = append(descs, d)
	}
	if len(found) == 0 {
		return descs, nil
	}

	// Offsets and configs may be partially answered (*kadm.ShardErrors):
	// show what came back and leave the rest unknown.
	starts, serr := adm.ListStartOffsets(ctx, found...)
	ends, eerr := adm.ListEndOffsets(ctx, found...)
	configs, cerr := adm.DescribeTopicConfigs(ctx, found...)
	if starts == nil && ends == nil && configs == nil {
		return nil, errors.Join(serr, eerr, cerr)
	}
	for i := range descs {
		d := &descs[i]
		for j := range d.Partitions {
			p := &d.Partitions[j]
			if o, ok := starts.Lookup(d.Topic, p.Partition); ok && o.Err == nil {
				p.LogStartOffset = o.Offset
			}
			if o, ok := ends.Lookup(d.Topic, p.Partition); ok && o.Err == nil {
				p.EndOffset = o.Offset
			}
		}
		if rc, err := configs.On(d.Topic, nil); err == nil && rc.Err == nil {
			d.Configs = topicConfigEntries(rc.Configs, allConfigs)
			for _, c := range rc.Configs {
				if c.Key == "min.insync.replicas" {
					d.MinInsyncReplicas = minISR(c)
				}
			}
		}
	}
	return descs, nil
}

// topicConfigEntries keeps the configs whose value does not come from the
// built-in default (unless all), sorted by name.
func topicConfigEntries(cs []kadm.Config, all bool) []configEntry {
	out := []configEntry{}
	for _, c := range cs {
		if !all && (c.Source == kmsg.ConfigSourceDefaultConfig || c.Source == kmsg.ConfigSourceUnknown) {
			continue
		}
		e := configEntry{Name: c.Key, Value: c.MaybeValue(), Source: c.Source.String(), Sensitive: c.Sensitive}
		if c.Sensitive {
			e.Value = "(sensitive)"
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

func printTopicDescriptions(w io.Writer, descs []topicDescription) error {
	for i, d := range descs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if d.Error != "" {
			fmt.Fprintf(w, "Topic: %s  Error: %s\n", d.Topic, d.Error)
			continue
		}
		fmt.Fprintf(w, "Topic: %s", d.Topic)
		if d.ID != "" {
			fmt.Fprintf(w, "  ID: %s", d.ID)
		}
		fmt.Fprintf(w, "  Partitions: %d  Replication factor: %d", len(d.Partitions), d.ReplicationFactor)
		if d.MinInsyncReplicas > 0 {
			fmt.Fprintf(w, "  Min in-sync replicas: %d", d.MinInsyncReplicas)
		}
		if d.Internal {
			fmt.Fprint(w, "  Internal: true")
		}
		fmt.Fprintln(w)

		t := newTable(w, "partition", "leader", "epoch", "replicas", "isr", "log-start-offset", "end-offset")
		for _, p := range d.Partitions {
			leader := fmt.Sprint(p.Leader)
			if p.Leader < 0 {
				leader = "none"
			}
			if p.Error != "" {
				leader += " (" + p.Error + ")"
			}
			t.row(p.Partition, leader, p.LeaderEpoch, joinInt32s(p.Replicas), joinInt32s(p.ISR),
				offsetOrDash(p.LogStartOffset), offsetOrDash(p.EndOffset))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(d.Configs) > 0 {
			fmt.Fprintln(w)
			t := newTable(w, "config", "value", "source")
			for _, c := range d.Configs {
				t.row(c.Name, c.Value, c.Source)
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// ---- alter ----

type topicAlterResult struct {
	Topic         string            `json:"topic"`
	Partitions    int               `json:"partitions,omitempty"`
	SetConfigs    map[string]string `json:"set_configs,omitempty"`
	DeleteConfigs []string          `json:"deleted_configs,omitempty"`
}

func newTopicAlterCmd(cf *clientFlags) *cobra.Command {
	var (
		partitions int
		configs    []string
		deletes    []string
	)
	cmd := &cobra.Command{
		Use:   "alter NAME",
		Short: "Add partitions to a topic or change its configs",
		Example: `  berth topic alter orders --partitions 12
  berth topic alter orders --config retention.ms=3600000 --delete-config cleanup.policy`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			setPartitions := cmd.Flags().Changed("partitions")
			if !setPartitions && len(configs) == 0 && len(deletes) == 0 {
				return errors.New("nothing to alter: give --partitions, --config or --delete-config")
			}
			if setPartitions && partitions < 1 {
				return fmt.Errorf("--partitions %d: must be at least 1", partitions)
			}
			alters, res, err := buildAlter(name, configs, deletes)
			if err != nil {
				return err
			}
			return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
				if setPartitions {
					resps, err := adm.UpdatePartitions(ctx, partitions, name)
					if err != nil {
						return cf.explain(err)
					}
					r, err := resps.On(name, nil)
					if err == nil {
						err = r.Err
					}
					if err != nil {
						return topicErr(cf, name, err, r.ErrMessage)
					}
					res.Partitions = partitions
				}
				if len(alters) > 0 {
					resps, err := adm.AlterTopicConfigs(ctx, alters, name)
					if err != nil {
						return cf.explain(err)
					}
					r, err := resps.On(name, nil)
					if err == nil {
						err = r.Err
					}
					if err != nil {
						return topicErr(cf, name, err, r.ErrMessage)
					}
				}
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, res)
				}
				return printTopicAlter(out, res)
			})
		},
	}
	fs := cmd.Flags()
	fs.IntVarP(&partitions, "partitions", "p", 0, "new total partition count (partitions can only be added)")
	fs.StringArrayVarP(&configs, "config", "c", nil, "set a topic config key=value (repeatable)")
	fs.StringArrayVar(&deletes, "delete-config", nil, "remove a topic config override, reverting to the default (repeatable)")
	return cmd
}

// buildAlter turns --config and --delete-config into IncrementalAlterConfigs
// operations.
func buildAlter(topic string, sets, deletes []string) ([]kadm.AlterConfig, topicAlterResult, error) {
	res := topicAlterResult{Topic: topic}
	cfgs, err := parseConfigs(sets)
	if err != nil {
		return nil, res, err
	}
	var alters []kadm.AlterConfig
	if len(cfgs) > 0 {
		res.SetConfigs = make(map[string]string, len(cfgs))
	}
	keys := make([]string, 0, len(cfgs))
	for k := range cfgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: cfgs[k]})
		res.SetConfigs[k] = *cfgs[k]
	}
	for _, k := range deletes {
		k = strings.TrimSpace(k)
		if k == "" {
			return nil, res, errors.New("--delete-config: want a config name")
		}
		if _, ok := cfgs[k]; ok {
			return nil, res, fmt.Errorf("%s is in both --config and --delete-config", k)
		}
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		res.DeleteConfigs = append(res.DeleteConfigs, k)
	}
	return alters, res, nil
}

func printTopicAlter(w io.Writer, r topicAlterResult) error {
	var parts []string
	if r.Partitions > 0 {
		parts = append(parts, fmt.Sprintf("partitions now %d", r.Partitions))
	}
	parts = append(parts, configChanges(r.SetConfigs, r.DeleteConfigs)...)
	_, err := fmt.Fprintf(w, "Altered topic %s: %s.\n", r.Topic, strings.Join(parts, "; "))
	return err
}

// configChanges describes set and deleted configs, the set ones sorted
// by name: "set k=v", "deleted k".
func configChanges(set map[string]string, deleted []string) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("set %s=%s", k, set[k]))
	}
	for _, k := range deleted {
		parts = append(parts, "deleted "+k)
	}
	return parts
}

// ---- delete ----

type topicDeleteResult struct {
	Topic   string `json:"topic"`
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

func newTopicDeleteCmd(cf *clientFlags) *cobra.Command {
	var ifExists bool
	cmd := &cobra.Command{
		Use:     "delete NAME...",
		Aliases: []string{"rm"},
		Short:   "Delete topics and all their records",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, names []string) error {
			return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
				resps, err := adm.DeleteTopics(ctx, names...)
				if err != nil {
					return cf.explain(err)
				}
				results := make([]topicDeleteResult, 0, len(names))
				var errs []error
				for _, name := range names {
					r, ok := resps[name]
					res := topicDeleteResult{Topic: name}
					switch {
					case !ok:
						res.Error = "missing from the DeleteTopics response"
						errs = append(errs, fmt.Errorf("topic %q: %s", name, res.Error))
					case r.Err == nil:
						res.Deleted = true
					case errors.Is(r.Err, kerr.UnknownTopicOrPartition) && ifExists:
					default:
						res.Error = kerrName(r.Err)
						errs = append(errs, topicErr(cf, name, r.Err, r.ErrMessage))
					}
					results = append(results, res)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					err = writeJSON(out, results)
				} else {
					err = printTopicDelete(out, results)
				}
				return errors.Join(append([]error{err}, errs...)...)
			})
		},
	}
	cmd.Flags().BoolVar(&ifExists, "if-exists", false, "succeed for topics that do not exist")
	return cmd
}

func printTopicDelete(w io.Writer, results []topicDeleteResult) error {
	for _, r := range results {
		var err error
		switch {
		case r.Deleted:
			_, err = fmt.Fprintf(w, "Deleted topic %s.\n", r.Topic)
		case r.Error == "":
			_, err = fmt.Fprintf(w, "Topic %s does not exist; skipped.\n", r.Topic)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
