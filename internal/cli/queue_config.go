package cli

// berth queue configs and berth queue alter: a share group's configs (the
// GROUP config resource, KIP-932/KIP-1191), as kafka-configs.sh
// --entity-type groups reads and changes them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// queueConfigs is one group's described configs.
type queueConfigs struct {
	Group   string        `json:"group"`
	Configs []configEntry `json:"configs"`
}

func newQueueConfigsCmd(cf *clientFlags) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "configs GROUP",
		Short: "Show a share group's configs (the group's own; --all adds the defaults from the broker)",
		Example: `  berth queue configs workers
  berth queue configs workers --all --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return errors.New("group names must not be empty")
			}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
				qc, err := describeGroupConfigs(ctx, cf, cl, args[0], all)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, qc)
				}
				return printQueueConfigs(out, qc)
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also list the configs the group takes from the broker's settings or defaults")
	return cmd
}

// describeGroupConfigs sends DescribeConfigs for group's GROUP resource.
func describeGroupConfigs(ctx context.Context, cf *clientFlags, cl *kgo.Client, group string, all bool) (queueConfigs, error) {
	qc := queueConfigs{Group: group, Configs: []configEntry{}}
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return qc, cf.explain(err)
	}
	if len(resp.Resources) != 1 {
		return qc, fmt.Errorf("group %q: the broker answered %d resources for one", group, len(resp.Resources))
	}
	res := resp.Resources[0]
	if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
		return qc, groupErr(cf, group, err, derefString(res.ErrorMessage))
	}
	for _, c := range res.Configs {
		if !all && c.Source != kmsg.ConfigSourceGroupConfig {
			continue
		}
		e := configEntry{Name: c.Name, Value: derefString(c.Value), Source: c.Source.String(), Sensitive: c.IsSensitive}
		if c.IsSensitive {
			e.Value = "(sensitive)"
		}
		qc.Configs = append(qc.Configs, e)
	}
	sort.Slice(qc.Configs, func(i, j int) bool { return qc.Configs[i].Name < qc.Configs[j].Name })
	return qc, nil
}

func printQueueConfigs(w io.Writer, qc queueConfigs) error {
	if len(qc.Configs) == 0 {
		_, err := fmt.Fprintf(w, "Group %s sets no configs of its own: it takes the broker's (berth queue configs %s --all lists them).\n", qc.Group, qc.Group)
		return err
	}
	t := newTable(w, "config", "value", "source")
	for _, c := range qc.Configs {
		t.row(c.Name, c.Value, c.Source)
	}
	return t.flush()
}

// queueAlterResult is what berth queue alter changed.
type queueAlterResult struct {
	Group         string            `json:"group"`
	SetConfigs    map[string]string `json:"set_configs,omitempty"`
	DeleteConfigs []string          `json:"deleted_configs,omitempty"`
}

func newQueueAlterCmd(cf *clientFlags) *cobra.Command {
	var configs, deletes []string
	cmd := &cobra.Command{
		Use:   "alter GROUP",
		Short: "Change a share group's configs (lease, delivery limit, retry backoff, dead-letter topic, session timeout...)",
		Long: `Change a share group's configs with IncrementalAlterConfigs on the GROUP
resource, as kafka-configs.sh --entity-type groups --alter does. The group
need not exist yet. Each config falls back to a broker setting (group.share.*)
when the group does not set it; the broker refuses values outside its bounds
with INVALID_CONFIG and says which. The configs are listed in
docs/configuration.md (Group configs).`,
		Example: `  berth queue alter shippers --config share.auto.offset.reset=earliest \
    --config errors.deadletterqueue.topic.name=dlq.shipment-jobs
  berth queue alter shippers --config share.record.lock.duration.ms=60000 --delete-config share.delivery.count.limit`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			if group == "" {
				return errors.New("group names must not be empty")
			}
			if len(configs) == 0 && len(deletes) == 0 {
				return errors.New("nothing to alter: give --config or --delete-config")
			}
			alters, tr, err := buildAlter(group, configs, deletes)
			if err != nil {
				return err
			}
			res := queueAlterResult{Group: group, SetConfigs: tr.SetConfigs, DeleteConfigs: tr.DeleteConfigs}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
				req := kmsg.NewPtrIncrementalAlterConfigsRequest()
				r := kmsg.NewIncrementalAlterConfigsRequestResource()
				r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
				for _, a := range alters {
					c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
					c.Name, c.Value = a.Name, a.Value
					c.Op = kmsg.IncrementalAlterConfigOpSet
					if a.Op == kadm.DeleteConfig {
						c.Op = kmsg.IncrementalAlterConfigOpDelete
					}
					r.Configs = append(r.Configs, c)
				}
				req.Resources = append(req.Resources, r)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return cf.explain(err)
				}
				if len(resp.Resources) != 1 {
					return fmt.Errorf("group %q: the broker answered %d resources for one", group, len(resp.Resources))
				}
				if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
					return groupErr(cf, group, err, derefString(resp.Resources[0].ErrorMessage))
				}
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, res)
				}
				return printQueueAlter(out, res)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVarP(&configs, "config", "c", nil, "set a group config key=value (repeatable)")
	fs.StringArrayVar(&deletes, "delete-config", nil, "remove a group config, reverting to the broker's setting (repeatable)")
	return cmd
}

func printQueueAlter(w io.Writer, r queueAlterResult) error {
	_, err := fmt.Fprintf(w, "Altered group %s: %s.\n", r.Group, strings.Join(configChanges(r.SetConfigs, r.DeleteConfigs), "; "))
	return err
}
