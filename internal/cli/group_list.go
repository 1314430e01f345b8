package cli

// `berth group list`: the groups with their state, type, assignor and
// member count (ListGroups, then lookupGroups for what it does not say).

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupListEntry struct {
	Group         string `json:"group"`
	State         string `json:"state"`
	Type          string `json:"type"`
	ProtocolType  string `json:"protocol_type"`
	Protocol      string `json:"protocol"`
	Members       int    `json:"members"` // -1: unknown
	CoordinatorID int32  `json:"coordinator_id"`
}

// groupStates are the states of classic and KIP-848 groups, for --state.
var groupStates = []string{"PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling", "NotReady"}

// parseGroupStates checks --state values and gives them Kafka's spelling.
func parseGroupStates(in []string) ([]string, error) {
	var out []string
	for _, s := range in {
		s = strings.TrimSpace(s)
		i := slices.IndexFunc(groupStates, func(k string) bool { return strings.EqualFold(k, s) })
		if i < 0 {
			return nil, fmt.Errorf("--state %q: want one of %s", s, strings.Join(groupStates, ", "))
		}
		if !slices.Contains(out, groupStates[i]) {
			out = append(out, groupStates[i])
		}
	}
	return out, nil
}

func parseGroupType(s string) (string, error) {
	switch t := strings.ToLower(strings.TrimSpace(s)); t {
	case "":
		return "", nil
	case groupTypeClassic, groupTypeConsumer:
		return t, nil
	}
	return "", fmt.Errorf("--type %q: want classic or consumer", s)
}

func newGroupListCmd(cf *clientFlags) *cobra.Command {
	var (
		states []string
		typ    string
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List consumer groups with their state, type, assignor and member count",
		Example: `  berth group list
  berth group list --state Stable,Empty --type classic`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wantStates, err := parseGroupStates(states)
			if err != nil {
				return err
			}
			wantType, err := parseGroupType(typ)
			if err != nil {
				return err
			}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				apis, err := fetchServedAPIs(ctx, adm)
				if err != nil {
					return cf.explain(err)
				}
				if err := apis.require(kmsg.ListGroups); err != nil {
					return err
				}
				entries, err := listGroups(ctx, cl, adm, apis, wantStates, wantType, cmd.ErrOrStderr())
				if err != nil {
					return cf.explain(err)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, entries)
				}
				return printGroupList(out, entries)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&states, "state", nil, "only groups in these states (repeatable or comma-separated): "+strings.Join(groupStates, ", "))
	fs.StringVar(&typ, "type", "", "only groups of this type: classic (JoinGroup protocol) or consumer (KIP-848)")
	return cmd
}

func listGroups(ctx context.Context, cl *kgo.Client, adm *kadm.Client, apis servedAPIs, states []string, typ string, errOut io.Writer) ([]groupListEntry, error) {
	var types []string
	if typ != "" {
		types = []string{typ}
	}
	listed, err := adm.ListGroupsByType(ctx, types, states...)
	if err != nil {
		if len(listed) == 0 {
			return nil, err
		}
		fmt.Fprintf(errOut, "warning: some brokers did not list their groups: %v\n", err)
	}
	entries := []groupListEntry{}
	if len(listed) == 0 {
		return entries, nil
	}
	var infos map[string]*groupInfo
	if apis.canDescribe() == nil {
		// Member counts and assignors are a bonus: list without them
		// if describing fails.
		infos, _ = lookupGroups(ctx, cl, adm, apis, listed.Groups())
	}
	for _, l := range listed.Sorted() {
		e := groupListEntry{
			Group:         l.Group,
			State:         l.State,
			Type:          strings.ToLower(l.GroupType),
			ProtocolType:  l.ProtocolType,
			Members:       -1,
			CoordinatorID: l.Coordinator,
		}
		if g := infos[l.Group]; g != nil && g.err == nil {
			if e.Type == "" {
				e.Type = g.typ
			}
			if e.State == "" {
				e.State = g.state
			}
			if e.ProtocolType == "" {
				e.ProtocolType = g.protocolType
			}
			e.Protocol = g.protocol
			e.Members = len(g.members)
		}
		if e.Type == "" {
			e.Type = groupTypeClassic // brokers before ListGroups v5 have only classic groups
		}
		// Older brokers ignore the filters they do not know.
		if typ != "" && e.Type != typ {
			continue
		}
		if len(states) > 0 && e.State != "" && !slices.ContainsFunc(states, func(s string) bool { return strings.EqualFold(s, e.State) }) {
			continue
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func printGroupList(w io.Writer, entries []groupListEntry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "No consumer groups.")
		return err
	}
	t := newTable(w, "group", "state", "type", "protocol", "members")
	for _, e := range entries {
		members := "-"
		if e.Members >= 0 {
			members = strconv.Itoa(e.Members)
		}
		t.row(e.Group, dashIfEmpty(e.State), e.Type, dashIfEmpty(e.Protocol), members)
	}
	return t.flush()
}
