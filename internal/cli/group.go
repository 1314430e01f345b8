package cli

// `berth group`: list, describe and delete consumer groups and reset their
// committed offsets, with the semantics of kafka-consumer-groups.sh, over the
// Kafka group APIs (ListGroups, DescribeGroups, ConsumerGroupDescribe,
// OffsetFetch, OffsetCommit, DeleteGroups) through kadm.
//
// KIP-848 groups are described with ConsumerGroupDescribe when the cluster
// serves it, classic groups (JoinGroup/SyncGroup) with DescribeGroups; see
// lookupGroups.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { clientCommands = append(clientCommands, newGroupCmd) }

func newGroupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "group",
		Aliases: []string{"groups"},
		Short:   "List, describe and delete consumer groups, and reset their offsets",
		Args:    cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(
		newGroupListCmd(cf),
		newGroupDescribeCmd(cf),
		newGroupDeleteCmd(cf),
		newGroupResetOffsetsCmd(cf),
	)
	return cmd
}

// ---- shared: served APIs, errors, looking groups up ----

// groupAPIKeys are the APIs the group commands may use.
var groupAPIKeys = []kmsg.Key{
	kmsg.FindCoordinator, kmsg.ListGroups, kmsg.DescribeGroups, kmsg.ConsumerGroupDescribe,
	kmsg.OffsetFetch, kmsg.OffsetCommit, kmsg.DeleteGroups,
}

// servedAPIs are the group APIs that every broker answering ApiVersions
// serves (a group's coordinator may be any of them).
type servedAPIs map[kmsg.Key]bool

func fetchServedAPIs(ctx context.Context, adm *kadm.Client) (servedAPIs, error) {
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return nil, err
	}
	var (
		served  servedAPIs
		lastErr error
	)
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			lastErr = v.Err
			return
		}
		mine := servedAPIs{}
		for _, k := range groupAPIKeys {
			if _, ok := v.KeyMaxVersion(k.Int16()); ok {
				mine[k] = true
			}
		}
		if served == nil {
			served = mine
			return
		}
		for k := range served {
			if !mine[k] {
				delete(served, k)
			}
		}
	})
	if served == nil {
		if lastErr == nil {
			lastErr = errors.New("no broker answered ApiVersions")
		}
		return nil, lastErr
	}
	return served, nil
}

// require fails, naming what is missing, unless every key is served.
func (s servedAPIs) require(keys ...kmsg.Key) error {
	var missing []string
	for _, k := range keys {
		if !s[k] {
			missing = append(missing, k.Name())
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the cluster does not serve consumer groups: %s missing from its ApiVersions", strings.Join(missing, ", "))
}

// canDescribe fails unless the cluster can describe some kind of group.
func (s servedAPIs) canDescribe() error {
	if s[kmsg.DescribeGroups] || s[kmsg.ConsumerGroupDescribe] {
		return nil
	}
	return s.require(kmsg.DescribeGroups)
}

// groupHint is the advice for the Kafka errors of the group APIs; other
// codes get client.go's kerrHint through clientFlags.explain.
func groupHint(err error) string {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return ""
	}
	switch ke {
	case kerr.GroupIDNotFound:
		return "no such group; see berth group list"
	case kerr.NonEmptyGroup:
		return "stop the group's consumers first"
	case kerr.RebalanceInProgress, kerr.UnknownMemberID, kerr.IllegalGeneration,
		kerr.StaleMemberEpoch, kerr.FencedMemberEpoch:
		return "the group has active members; stop its consumers first"
	case kerr.GroupSubscribedToTopic:
		return "the group still consumes this topic; stop its consumers first"
	case kerr.InvalidGroupID:
		return "group names must not be empty"
	}
	return ""
}

// hintedError is an error with advice after it.
type hintedError struct {
	err  error
	hint string
}

func (e *hintedError) Error() string { return e.err.Error() + " (" + e.hint + ")" }
func (e *hintedError) Unwrap() error { return e.err }

// groupErr wraps an error about one group, with the broker's message when
// there is one and a hint on what to do.
func groupErr(cf *clientFlags, group string, err error, brokerMsg string) error {
	if brokerMsg = strings.TrimSpace(brokerMsg); brokerMsg != "" {
		err = withBrokerMessage(err, brokerMsg)
	}
	err = fmt.Errorf("group %q: %w", group, err)
	if h := groupHint(err); h != "" {
		return &hintedError{err: err, hint: h}
	}
	return cf.explain(err)
}

// checkGroupNames rejects empty names and drops repeats, keeping the order.
func checkGroupNames(names []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" {
			return nil, errors.New("group names must not be empty")
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

const (
	groupTypeClassic  = "classic"
	groupTypeConsumer = "consumer"
)

// groupInfo is what is known of one group, from DescribeGroups (classic) or
// ConsumerGroupDescribe (KIP-848).
type groupInfo struct {
	name         string
	typ          string // groupTypeClassic or groupTypeConsumer
	state        string
	protocolType string
	protocol     string // the assignor
	coordinator  kadm.BrokerDetail
	hasEpoch     bool // KIP-848 groups report epochs; DescribeGroups has no generation
	epoch        int32
	assignEpoch  int32
	members      []groupMember
	classic      *kadm.DescribedGroup // for kadm.CalculateGroupLag
	subscribed   []string             // topics the members want
	err          error                // GROUP_ID_NOT_FOUND for an unknown (Dead) group
	errMsg       string
}

// notFound reports whether the group does not exist (Kafka's Dead state).
func (g *groupInfo) notFound() bool { return errors.Is(g.err, kerr.GroupIDNotFound) }

type groupMember struct {
	ConsumerID string                 `json:"consumer_id"`
	InstanceID string                 `json:"instance_id,omitempty"`
	Host       string                 `json:"host"`
	ClientID   string                 `json:"client_id"`
	Assignment []groupTopicPartitions `json:"assignment"`
}

type groupTopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func topicsSetList(s kadm.TopicsSet) []groupTopicPartitions {
	out := []groupTopicPartitions{}
	for _, tp := range s.Sorted() {
		ps := slices.Clone(tp.Partitions)
		slices.Sort(ps)
		out = append(out, groupTopicPartitions{Topic: tp.Topic, Partitions: ps})
	}
	return out
}

func (m groupMember) partitions() int {
	n := 0
	for _, a := range m.Assignment {
		n += len(a.Partitions)
	}
	return n
}

// isDeadState reports whether a group state is Kafka's Dead (no group).
func isDeadState(s string) bool { return strings.EqualFold(s, "Dead") }

// lookupGroups describes groups of either kind. When the cluster serves
// ConsumerGroupDescribe, the groups are looked up with it first: it answers
// GROUP_ID_NOT_FOUND for classic groups, while DescribeGroups is not reliable
// for KIP-848 groups (Kafka answers Dead or GROUP_ID_NOT_FOUND, other brokers
// describe them without members). The rest go to DescribeGroups. A group
// neither API knows gets err GROUP_ID_NOT_FOUND and state Dead. The error is
// for a failure of the whole lookup.
func lookupGroups(ctx context.Context, cl *kgo.Client, adm *kadm.Client, apis servedAPIs, names []string) (map[string]*groupInfo, error) {
	infos := make(map[string]*groupInfo, len(names))
	rest := names
	if apis[kmsg.ConsumerGroupDescribe] {
		// A cluster that lists the API but fails it (an older or partial
		// implementation) leaves the groups to DescribeGroups.
		described := describeConsumerGroups(ctx, cl, adm, names)
		rest = nil
		for _, name := range names {
			if g, ok := described[name]; ok {
				infos[name] = g
			} else {
				rest = append(rest, name)
			}
		}
	}
	if len(rest) > 0 && apis[kmsg.DescribeGroups] {
		described, err := adm.DescribeGroups(ctx, rest...)
		var ae *kadm.AuthError
		if errors.As(err, &ae) || (err != nil && len(described) == 0) {
			return nil, err
		}
		for _, name := range rest {
			d, ok := described[name]
			switch {
			case !ok:
				if err == nil {
					err = errors.New("missing from the DescribeGroups response")
				}
				infos[name] = &groupInfo{name: name, err: err}
			case d.Err == nil && !isDeadState(d.State):
				infos[name] = classicInfo(d)
			case d.Err == nil || errors.Is(d.Err, kerr.GroupIDNotFound):
				infos[name] = &groupInfo{name: name, state: "Dead", err: kerr.GroupIDNotFound, errMsg: d.ErrMessage}
			default:
				infos[name] = &groupInfo{name: name, state: d.State, err: d.Err, errMsg: d.ErrMessage}
			}
		}
	}
	for _, name := range rest {
		if infos[name] == nil {
			infos[name] = &groupInfo{name: name, state: "Dead", err: kerr.GroupIDNotFound}
		}
	}
	return infos, nil
}

func classicInfo(d kadm.DescribedGroup) *groupInfo {
	g := &groupInfo{
		name:         d.Group,
		typ:          groupTypeClassic,
		state:        d.State,
		protocolType: d.ProtocolType,
		protocol:     d.Protocol,
		coordinator:  d.Coordinator,
		classic:      &d,
		subscribed:   d.JoinTopics(),
		members:      []groupMember{},
	}
	for _, m := range d.Members {
		assigned := kadm.TopicsSet{}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				assigned.Add(t.Topic, t.Partitions...)
			}
		}
		g.members = append(g.members, groupMember{
			ConsumerID: m.MemberID,
			InstanceID: derefString(m.InstanceID),
			Host:       m.ClientHost,
			ClientID:   m.ClientID,
			Assignment: topicsSetList(assigned),
		})
	}
	return g
}

// describeConsumerGroups describes KIP-848 groups as
// kadm.Client.DescribeConsumerGroups does, but keeps the topic IDs of the
// assignments: a broker may name assigned topics by ID alone, which kadm
// files under "". It returns the groups found; failures are left out.
func describeConsumerGroups(ctx context.Context, cl *kgo.Client, adm *kadm.Client, names []string) map[string]*groupInfo {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = names
	type described struct {
		g     kmsg.ConsumerGroupDescribeResponseGroup
		coord kadm.BrokerDetail
	}
	var found []described
	unnamed := false
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			continue
		}
		for _, g := range shard.Resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
			if g.ErrorCode != 0 || isDeadState(g.State) {
				continue
			}
			found = append(found, described{g, shard.Meta})
			for _, m := range g.Members {
				for _, tp := range m.Assignment.TopicPartitions {
					unnamed = unnamed || tp.Topic == ""
				}
			}
		}
	}
	idNames := map[[16]byte]string{}
	if unnamed {
		if tds, err := adm.ListTopicsWithInternal(ctx); err == nil {
			for _, td := range tds {
				idNames[[16]byte(td.ID)] = td.Topic
			}
		}
	}
	out := map[string]*groupInfo{}
	for _, d := range found {
		g := &groupInfo{
			name:         d.g.Group,
			typ:          groupTypeConsumer,
			state:        d.g.State,
			protocolType: "consumer",
			protocol:     d.g.AssignorName,
			coordinator:  d.coord,
			hasEpoch:     true,
			epoch:        d.g.Epoch,
			assignEpoch:  d.g.AssignmentEpoch,
			members:      []groupMember{},
		}
		subscribed := map[string]bool{}
		for _, m := range d.g.Members {
			assigned := kadm.TopicsSet{}
			for _, tp := range m.Assignment.TopicPartitions {
				topic := tp.Topic
				if topic == "" {
					topic = idNames[tp.TopicID]
				}
				if topic != "" { // an ID no topic has: nothing to show it under
					assigned.Add(topic, tp.Partitions...)
				}
			}
			for _, t := range m.SubscribedTopics {
				subscribed[t] = true
			}
			g.members = append(g.members, groupMember{
				ConsumerID: m.MemberID,
				InstanceID: derefString(m.InstanceID),
				Host:       m.ClientHost,
				ClientID:   m.ClientID,
				Assignment: topicsSetList(assigned),
			})
		}
		for t := range subscribed {
			g.subscribed = append(g.subscribed, t)
		}
		sort.Strings(g.subscribed)
		sort.Slice(g.members, func(i, j int) bool { return g.members[i].ConsumerID < g.members[j].ConsumerID })
		out[g.name] = g
	}
	return out
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func brokerAddr(b kadm.BrokerDetail) string {
	if b.Host == "" {
		return ""
	}
	return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
}

// withGroupAdmin is withAdmin handing fn the kgo client as well, for the
// requests kadm does not make as the group commands need them.
func withGroupAdmin(cmd *cobra.Command, cf *clientFlags, fn func(context.Context, *kgo.Client, *kadm.Client) error) error {
	if err := cf.resolve(cmd); err != nil {
		return err
	}
	ctx := cmd.Context()
	cl, adm, err := cf.clients(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	return fn(ctx, cl, adm)
}

// ---- list ----

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
			return withGroupAdmin(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
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

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ---- describe ----

type groupDescription struct {
	Group           string           `json:"group"`
	Type            string           `json:"type,omitempty"`
	State           string           `json:"state,omitempty"`
	ProtocolType    string           `json:"protocol_type,omitempty"`
	Protocol        string           `json:"protocol,omitempty"`
	Epoch           *int32           `json:"epoch,omitempty"`            // KIP-848 groups only
	AssignmentEpoch *int32           `json:"assignment_epoch,omitempty"` // KIP-848 groups only
	CoordinatorID   int32            `json:"coordinator_id"`             // -1: unknown
	Coordinator     string           `json:"coordinator,omitempty"`      // host:port
	Members         []groupMember    `json:"members"`
	Offsets         []groupOffsetRow `json:"offsets"`
	TotalLag        int64            `json:"total_lag"` // the sum of the known lags
	Error           string           `json:"error,omitempty"`

	err error
}

// groupOffsetRow is one partition of `group describe`.
type groupOffsetRow struct {
	Topic                 string `json:"topic"`
	Partition             int32  `json:"partition"`
	CurrentOffset         int64  `json:"current_offset"`           // -1: no commit
	LogEndOffset          int64  `json:"log_end_offset"`           // -1: unknown
	Lag                   int64  `json:"lag"`                      // -1: unknown
	OldestUnconsumedAgeMs int64  `json:"oldest_unconsumed_age_ms"` // 0: caught up; -1: unknown
	ConsumerID            string `json:"consumer_id,omitempty"`
	Host                  string `json:"host,omitempty"`
	ClientID              string `json:"client_id,omitempty"`
	Error                 string `json:"error,omitempty"`
}

func newGroupDescribeCmd(cf *clientFlags) *cobra.Command {
	var members bool
	cmd := &cobra.Command{
		Use:   "describe GROUP...",
		Short: "Show a group's state, and per partition its committed offset, lag and the age of the oldest unconsumed record",
		Example: `  berth group describe billing
  berth group describe billing --members`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := checkGroupNames(args)
			if err != nil {
				return err
			}
			return withGroupAdmin(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				apis, err := fetchServedAPIs(ctx, adm)
				if err != nil {
					return cf.explain(err)
				}
				if err := apis.require(kmsg.FindCoordinator, kmsg.OffsetFetch); err != nil {
					return err
				}
				if err := apis.canDescribe(); err != nil {
					return err
				}
				descs, err := describeGroups(ctx, cf, cl, adm, apis, names)
				if err != nil {
					return cf.explain(err)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					err = writeJSON(out, descs)
				} else {
					err = printGroupDescriptions(out, descs, members)
				}
				if err != nil {
					return err
				}
				var errs []error
				for _, d := range descs {
					if d.err != nil {
						errs = append(errs, d.err)
					}
				}
				return errors.Join(errs...)
			})
		},
	}
	cmd.Flags().BoolVar(&members, "members", false, "show the members and their assignments instead of the partitions")
	return cmd
}

func describeGroups(ctx context.Context, cf *clientFlags, cl *kgo.Client, adm *kadm.Client, apis servedAPIs, names []string) ([]groupDescription, error) {
	infos, err := lookupGroups(ctx, cl, adm, apis, names)
	if err != nil {
		return nil, err
	}
	descs := make([]groupDescription, 0, len(names))
	for _, name := range names {
		g := infos[name]
		d := groupDescription{Group: name, CoordinatorID: -1, Members: []groupMember{}, Offsets: []groupOffsetRow{}}
		if g.err != nil {
			d.State = g.state
			d.Error = kerrName(g.err)
			d.err = groupErr(cf, name, g.err, g.errMsg)
			descs = append(descs, d)
			continue
		}
		d.Type, d.State, d.ProtocolType, d.Protocol = g.typ, g.state, g.protocolType, g.protocol
		d.CoordinatorID, d.Coordinator = g.coordinator.NodeID, brokerAddr(g.coordinator)
		if g.hasEpoch {
			d.Epoch, d.AssignmentEpoch = &g.epoch, &g.assignEpoch
		}
		d.Members = g.members
		lag, err := groupLag(ctx, adm, g)
		if err != nil {
			d.Error = kerrName(err)
			d.err = groupErr(cf, name, err, "")
			descs = append(descs, d)
			continue
		}
		d.Offsets = groupOffsetRows(g, lag)
		fillOldestAges(ctx, cf, d.Offsets, time.Now)
		for _, r := range d.Offsets {
			if r.Lag > 0 {
				d.TotalLag += r.Lag
			}
		}
		descs = append(descs, d)
	}
	return descs, nil
}

// groupLag fetches a group's commits and the start and end offsets of the
// topics it commits to, is assigned or subscribes to, and computes the lag
// with kadm.CalculateGroupLagWithStartOffsets.
func groupLag(ctx context.Context, adm *kadm.Client, g *groupInfo) (kadm.GroupLag, error) {
	commits, err := adm.FetchOffsets(ctx, g.name)
	if err != nil {
		return nil, err
	}
	// Some brokers answer -1 for partitions without a commit; the lag
	// functions treat a missing commit the same way.
	commits.DeleteFunc(func(o kadm.OffsetResponse) bool { return o.Err == nil && o.At < 0 })

	assigned := kadm.TopicsSet{}
	for _, m := range g.members {
		for _, a := range m.Assignment {
			assigned.Add(a.Topic, a.Partitions...)
		}
	}
	want := kadm.TopicsSet{}
	want.Merge(assigned)
	want.MergeTopics(g.subscribed)
	want.Merge(commits.Partitions())

	starts, ends, err := listBounds(ctx, adm, want)
	if err != nil {
		return nil, err
	}
	if g.classic != nil {
		return kadm.CalculateGroupLagWithStartOffsets(*g.classic, commits, starts, ends), nil
	}
	// KIP-848 members carry no kadm assignment to compute with: compute the
	// committed partitions as for an Empty group, then add the partitions of
	// the assigned and subscribed topics that have no commit.
	lag := kadm.CalculateGroupLagWithStartOffsets(kadm.DescribedGroup{Group: g.name, State: g.state}, commits, starts, ends)
	for _, t := range want.Topics() {
		if _, ok := lag[t]; ok {
			continue
		}
		lt := map[int32]kadm.GroupMemberLag{}
		for p, end := range ends[t] {
			start, ok := starts.Lookup(t, p)
			l := kadm.GroupMemberLag{Topic: t, Partition: p, Commit: kadm.Offset{Topic: t, Partition: p, At: -1, LeaderEpoch: -1}, Start: start, End: end, Lag: -1, Err: end.Err}
			if end.Err == nil {
				l.Lag = end.Offset
				if ok && start.Err == nil {
					l.Lag = max(end.Offset-start.Offset, 0)
				}
			}
			lt[p] = l
		}
		lag[t] = lt
	}
	return lag, nil
}

// listBounds lists the start and end offsets of the topics in want. A topic
// that does not exist gets UNKNOWN_TOPIC_OR_PARTITION on the partitions of
// want (kadm marks it with a -1 partition), as kadm.Client.Lag does.
func listBounds(ctx context.Context, adm *kadm.Client, want kadm.TopicsSet) (starts, ends kadm.ListedOffsets, err error) {
	topics := want.Topics()
	if len(topics) == 0 {
		return nil, nil, nil
	}
	for _, l := range []struct {
		fn  func(context.Context, ...string) (kadm.ListedOffsets, error)
		dst *kadm.ListedOffsets
	}{{adm.ListStartOffsets, &starts}, {adm.ListEndOffsets, &ends}} {
		listed, err := l.fn(ctx, topics...)
		var se *kadm.ShardErrors
		if err != nil && !errors.As(err, &se) {
			return nil, nil, err
		}
		// On shard errors, what is missing shows as a per-partition error.
		for t, ps := range listed {
			if _, ok := ps[-1]; !ok || len(ps) != 1 {
				continue
			}
			delete(ps, -1)
			for p := range want[t] {
				ps[p] = kadm.ListedOffset{Topic: t, Partition: p, Offset: -1, Err: kerr.UnknownTopicOrPartition}
			}
		}
		*l.dst = listed
	}
	return starts, ends, nil
}

// groupOffsetRows turns the lag into sorted rows, with the member that
// consumes each partition.
func groupOffsetRows(g *groupInfo, lag kadm.GroupLag) []groupOffsetRow {
	owner := map[string]map[int32]*groupMember{}
	for i := range g.members {
		m := &g.members[i]
		for _, a := range m.Assignment {
			if owner[a.Topic] == nil {
				owner[a.Topic] = map[int32]*groupMember{}
			}
			for _, p := range a.Partitions {
				owner[a.Topic][p] = m
			}
		}
	}
	rows := []groupOffsetRow{}
	for _, l := range lag.Sorted() {
		r := groupOffsetRow{
			Topic:                 l.Topic,
			Partition:             l.Partition,
			CurrentOffset:         l.Commit.At,
			LogEndOffset:          -1,
			Lag:                   l.Lag,
			OldestUnconsumedAgeMs: -1,
		}
		if r.CurrentOffset < 0 {
			r.CurrentOffset = -1
		}
		if l.End.Err == nil {
			r.LogEndOffset = l.End.Offset
		}
		if l.Err != nil {
			r.Error = kerrName(l.Err)
			r.Lag = -1
		}
		if m := owner[l.Topic][l.Partition]; m != nil {
			r.ConsumerID, r.Host, r.ClientID = m.ConsumerID, m.Host, m.ClientID
		}
		rows = append(rows, r)
	}
	return rows
}

// fillOldestAges sets OldestUnconsumedAgeMs: 0 where the group is caught up,
// now minus the timestamp of the record at the committed offset where it
// lags, and -1 where that is unknown (no commit, or no record fetched within
// --timeout).
func fillOldestAges(ctx context.Context, cf *clientFlags, rows []groupOffsetRow, now func() time.Time) {
	want := map[string]map[int32]int64{}
	for i := range rows {
		r := &rows[i]
		switch {
		case r.Lag == 0:
			r.OldestUnconsumedAgeMs = 0
		case r.Lag > 0 && r.CurrentOffset >= 0:
			if want[r.Topic] == nil {
				want[r.Topic] = map[int32]int64{}
			}
			want[r.Topic][r.Partition] = r.CurrentOffset
		}
	}
	if len(want) == 0 {
		return
	}
	stamps := recordTimestamps(ctx, cf, want)
	t := now()
	for i := range rows {
		r := &rows[i]
		if ts, ok := stamps[r.Topic][r.Partition]; ok {
			r.OldestUnconsumedAgeMs = max(t.Sub(ts).Milliseconds(), 0)
		}
	}
}

// recordTimestamps reads, with a direct partition consumer, the first record
// at or after each offset in want, and returns their timestamps. It gives up
// after --timeout, returning what it has.
func recordTimestamps(ctx context.Context, cf *clientFlags, want map[string]map[int32]int64) map[string]map[int32]time.Time {
	got := map[string]map[int32]time.Time{}
	for t, ps := range firstRecords(ctx, cf, want) {
		got[t] = map[int32]time.Time{}
		for p, r := range ps {
			got[t][p] = r.Timestamp
		}
	}
	return got
}

// firstRecords is recordTimestamps with the whole records.
func firstRecords(ctx context.Context, cf *clientFlags, want map[string]map[int32]int64) map[string]map[int32]*kgo.Record {
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	offsets := map[string]map[int32]kgo.Offset{}
	remaining := 0
	for t, ps := range want {
		offsets[t] = map[int32]kgo.Offset{}
		for p, o := range ps {
			offsets[t][p] = kgo.NewOffset().At(o)
			remaining++
		}
	}
	got := map[string]map[int32]*kgo.Record{}
	cl, err := cf.connect(ctx,
		kgo.ConsumePartitions(offsets),
		kgo.FetchMaxPartitionBytes(64<<10), // one record is all we need
		kgo.FetchMaxWait(time.Second),
	)
	if err != nil {
		return got
	}
	defer cl.Close()
	for remaining > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			break
		}
		var done map[string][]int32
		for r := range fetches.RecordsAll() {
			at, ok := want[r.Topic][r.Partition]
			if !ok || r.Offset < at {
				continue
			}
			if _, seen := got[r.Topic][r.Partition]; seen {
				continue
			}
			if got[r.Topic] == nil {
				got[r.Topic] = map[int32]*kgo.Record{}
			}
			got[r.Topic][r.Partition] = r
			remaining--
			if done == nil {
				done = map[string][]int32{}
			}
			done[r.Topic] = append(done[r.Topic], r.Partition)
		}
		if done != nil {
			cl.PauseFetchPartitions(done)
		}
	}
	return got
}

// formatAge formats OldestUnconsumedAgeMs: "-" unknown, "0s" caught up, then
// 850ms, 4.2s, 42s, 4m12s, 3h4m, 2d3h.
func formatAge(ms int64) string {
	if ms < 0 {
		return "-"
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case ms == 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int64(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int64(d/time.Minute), int64(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int64(d/time.Hour), int64(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int64(d/(24*time.Hour)), int64(d%(24*time.Hour)/time.Hour))
}

func printGroupDescriptions(w io.Writer, descs []groupDescription, members bool) error {
	for i, d := range descs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if d.Error != "" && d.Type == "" {
			fmt.Fprintf(w, "Group: %s  Error: %s\n", d.Group, d.Error)
			continue
		}
		fmt.Fprintf(w, "Group: %s  Type: %s  State: %s  Protocol: %s", d.Group, d.Type, dashIfEmpty(d.State), dashIfEmpty(d.Protocol))
		if d.Epoch != nil {
			fmt.Fprintf(w, "  Epoch: %d  Assignment epoch: %d", *d.Epoch, *d.AssignmentEpoch)
		}
		if d.CoordinatorID >= 0 {
			fmt.Fprintf(w, "  Coordinator: %d", d.CoordinatorID)
			if d.Coordinator != "" {
				fmt.Fprintf(w, " (%s)", d.Coordinator)
			}
		}
		fmt.Fprintf(w, "  Members: %d\n", len(d.Members))
		if d.Error != "" {
			fmt.Fprintf(w, "Error: %s\n", d.Error)
			continue
		}
		if members {
			if err := printGroupMembers(w, d.Members); err != nil {
				return err
			}
			continue
		}
		if len(d.Offsets) == 0 {
			fmt.Fprintln(w, "No committed offsets and no assigned partitions.")
			continue
		}
		t := newTable(w, "topic", "partition", "current-offset", "log-end-offset", "lag", "oldest-unconsumed-age", "consumer-id", "host", "client-id")
		for _, r := range d.Offsets {
			lag := offsetOrDash(r.Lag)
			if r.Error != "" {
				lag = "- (" + r.Error + ")"
			}
			t.row(r.Topic, r.Partition, offsetOrDash(r.CurrentOffset), offsetOrDash(r.LogEndOffset), lag,
				formatAge(r.OldestUnconsumedAgeMs), dashIfEmpty(r.ConsumerID), dashIfEmpty(r.Host), dashIfEmpty(r.ClientID))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

func printGroupMembers(w io.Writer, members []groupMember) error {
	if len(members) == 0 {
		_, err := fmt.Fprintln(w, "No active members.")
		return err
	}
	t := newTable(w, "consumer-id", "host", "client-id", "#partitions", "assignment")
	for _, m := range members {
		var parts []string
		for _, a := range m.Assignment {
			parts = append(parts, a.Topic+"("+joinInt32s(a.Partitions)+")")
		}
		t.row(m.ConsumerID, dashIfEmpty(m.Host), dashIfEmpty(m.ClientID), m.partitions(), dashIfEmpty(strings.Join(parts, " ")))
	}
	return t.flush()
}

// ---- delete ----

type groupDeleteResult struct {
	Group   string `json:"group"`
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

// stdinIsTerminal reports whether r is an interactive terminal: a character
// device other than /dev/null. Tests replace it.
var stdinIsTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// deleteQuestion is what `group delete` asks before deleting.
func deleteQuestion(names []string) string {
	if len(names) == 1 {
		return fmt.Sprintf("Delete group %s and its committed offsets?", names[0])
	}
	return fmt.Sprintf("Delete %d groups (%s) and their committed offsets?", len(names), strings.Join(names, ", "))
}

// confirm asks question on stderr and reads y/yes from stdin.
func confirm(cmd *cobra.Command, question string) bool {
	fmt.Fprint(cmd.ErrOrStderr(), question+" [y/N] ")
	line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

func newGroupDeleteCmd(cf *clientFlags) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "delete GROUP...",
		Aliases: []string{"rm"},
		Short:   "Delete empty consumer groups and their committed offsets",
		Example: `  berth group delete billing --yes`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := checkGroupNames(args)
			if err != nil {
				return err
			}
			if !yes {
				if !stdinIsTerminal(cmd.InOrStdin()) {
					return errors.New("refusing to delete groups without confirmation: stdin is not a terminal (pass --yes)")
				}
				if !confirm(cmd, deleteQuestion(names)) {
					return errors.New("aborted: nothing was deleted")
				}
			}
			return withGroupAdmin(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				apis, err := fetchServedAPIs(ctx, adm)
				if err != nil {
					return cf.explain(err)
				}
				if err := apis.require(kmsg.FindCoordinator, kmsg.DeleteGroups); err != nil {
					return err
				}
				resps, rerr := adm.DeleteGroups(ctx, names...)
				if rerr != nil && len(resps) == 0 {
					return cf.explain(rerr)
				}
				results := make([]groupDeleteResult, 0, len(names))
				var errs []error
				for _, name := range names {
					res := groupDeleteResult{Group: name}
					r, ok := resps[name]
					switch {
					case !ok:
						e := rerr
						if e == nil {
							e = errors.New("missing from the DeleteGroups response")
						}
						res.Error = kerrName(e)
						errs = append(errs, groupErr(cf, name, e, ""))
					case r.Err == nil:
						res.Deleted = true
					default:
						res.Error = kerrName(r.Err)
						errs = append(errs, groupErr(cf, name, r.Err, r.ErrMessage))
					}
					results = append(results, res)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					err = writeJSON(out, results)
				} else {
					for _, r := range results {
						if r.Deleted {
							if _, err = fmt.Fprintf(out, "Deleted group %s.\n", r.Group); err != nil {
								break
							}
						}
					}
				}
				return errors.Join(append([]error{err}, errs...)...)
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// ---- reset-offsets ----

type resetKind int

const (
	resetEarliest resetKind = iota + 1
	resetLatest
	resetToOffset
	resetShiftBy
	resetToDatetime
)

// resetSpec is the one reset mode chosen by the flags.
type resetSpec struct {
	kind   resetKind
	offset int64 // --to-offset
	shift  int64 // --shift-by
	millis int64 // --to-datetime, milliseconds since the epoch
}

type resetOptions struct {
	topics     []string
	allTopics  bool
	toEarliest bool
	toLatest   bool
	toOffset   int64
	shiftBy    int64
	toDatetime string
	dryRun     bool
	execute    bool
}

// resetModeFlags are the mutually exclusive reset modes.
var resetModeFlags = []string{"to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime"}

// parseResetSpec checks that exactly one mode is given (changed reports
// whether a flag was set on the command line) and parses it.
func parseResetSpec(o *resetOptions, changed func(string) bool, loc *time.Location) (resetSpec, error) {
	var given []string
	for _, f := range resetModeFlags {
		if changed(f) {
			given = append(given, "--"+f)
		}
	}
	switch {
	case len(given) == 0:
		return resetSpec{}, errors.New("give one of --to-earliest, --to-latest, --to-offset N, --shift-by N or --to-datetime TIME")
	case len(given) > 1:
		return resetSpec{}, fmt.Errorf("%s: give exactly one reset mode", strings.Join(given, " and "))
	}
	switch given[0] {
	case "--to-earliest":
		if !o.toEarliest {
			return resetSpec{}, errors.New("--to-earliest=false: give a reset mode")
		}
		return resetSpec{kind: resetEarliest}, nil
	case "--to-latest":
		if !o.toLatest {
			return resetSpec{}, errors.New("--to-latest=false: give a reset mode")
		}
		return resetSpec{kind: resetLatest}, nil
	case "--to-offset":
		if o.toOffset < 0 {
			return resetSpec{}, fmt.Errorf("--to-offset %d: must be 0 or more", o.toOffset)
		}
		return resetSpec{kind: resetToOffset, offset: o.toOffset}, nil
	case "--shift-by":
		return resetSpec{kind: resetShiftBy, shift: o.shiftBy}, nil
	default:
		t, err := parseResetDatetime(o.toDatetime, loc)
		if err != nil {
			return resetSpec{}, err
		}
		return resetSpec{kind: resetToDatetime, millis: t.UnixMilli()}, nil
	}
}

// parseResetDatetime parses --to-datetime: YYYY-MM-DDTHH:MM:SS with optional
// fractional seconds and zone (Z, +hh:mm or +hhmm); without a zone the time
// is in loc (local time, as Kafka's tool does).
func parseResetDatetime(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	var (
		t   time.Time
		err error
	)
	for _, layout := range []string{"2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05Z0700", "2006-01-02T15:04:05"} {
		if t, err = time.ParseInLocation(layout, s, loc); err == nil {
			break
		}
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("--to-datetime %q: want YYYY-MM-DDTHH:MM:SS[.sss][Z|+hh:mm], e.g. 2026-11-29T10:00:00Z (no zone: local time)", s)
	}
	if t.Before(time.UnixMilli(0)) {
		// ListOffsets reads negative timestamps as earliest/latest.
		return time.Time{}, fmt.Errorf("--to-datetime %q: must be after 1970-01-01T00:00:00Z", s)
	}
	return t, nil
}

// parseTopicSpecs parses --topic T or T:P,P,...; a nil partition list means
// every partition of the topic.
func parseTopicSpecs(specs []string) (map[string][]int32, error) {
	out := map[string][]int32{}
	all := map[string]bool{}
	for _, spec := range specs {
		topic, parts, hasParts := strings.Cut(strings.TrimSpace(spec), ":")
		if topic == "" {
			return nil, fmt.Errorf("--topic %q: want TOPIC or TOPIC:PARTITION,PARTITION,...", spec)
		}
		if !hasParts {
			all[topic] = true
			out[topic] = nil
			continue
		}
		for p := range strings.SplitSeq(parts, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--topic %q: %q is not a partition number; want TOPIC or TOPIC:PARTITION,PARTITION,...", spec, p)
			}
			if !all[topic] && !slices.Contains(out[topic], int32(n)) {
				out[topic] = append(out[topic], int32(n))
			}
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out, nil
}

// resetTarget is one partition to reset, with what planReset needs.
type resetTarget struct {
	Topic      string
	Partition  int32
	Old        int64 // the committed offset; -1: none
	Start, End int64 // the log start and end offsets
	AtTime     int64 // for --to-datetime: the listed offset; -1: none after the time
}

type resetRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	OldOffset int64  `json:"old_offset"` // -1: no commit
	NewOffset int64  `json:"new_offset"`
	Error     string `json:"error,omitempty"`
}

type resetResult struct {
	Group    string     `json:"group"`
	Executed bool       `json:"executed"` // the commit was sent; see each offset's error
	Offsets  []resetRow `json:"offsets"`
}

// clampOffset keeps o within [lo, hi].
func clampOffset(o, lo, hi int64) int64 { return max(lo, min(o, hi)) }

// addSat adds without overflowing.
func addSat(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// planReset computes the new offsets, clamped to each partition's
// [log start, log end] as Kafka's tool does; the warnings say where an
// offset was moved.
func planReset(spec resetSpec, targets []resetTarget) ([]resetRow, []string, error) {
	rows := make([]resetRow, 0, len(targets))
	var warnings []string
	for _, t := range targets {
		var want int64
		switch spec.kind {
		case resetEarliest:
			want = t.Start
		case resetLatest:
			want = t.End
		case resetToOffset:
			want = spec.offset
		case resetShiftBy:
			if t.Old < 0 {
				return nil, nil, fmt.Errorf("cannot shift the offset of %s partition %d: the group has no committed offset there (set one with --to-earliest, --to-latest or --to-offset)", t.Topic, t.Partition)
			}
			want = addSat(t.Old, spec.shift)
		case resetToDatetime:
			want = t.AtTime
			if want < 0 {
				want = t.End
			}
		default:
			return nil, nil, errors.New("no reset mode")
		}
		got := clampOffset(want, t.Start, t.End)
		if got != want && (spec.kind == resetToOffset || spec.kind == resetShiftBy) {
			where := "past the log end"
			if want < t.Start {
				where = "before the log start"
			}
			warnings = append(warnings, fmt.Sprintf("%s partition %d: offset %d is %s; using %d", t.Topic, t.Partition, want, where, got))
		}
		rows = append(rows, resetRow{Topic: t.Topic, Partition: t.Partition, OldOffset: t.Old, NewOffset: got})
	}
	return rows, warnings, nil
}

func newGroupResetOffsetsCmd(cf *clientFlags) *cobra.Command {
	var o resetOptions
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP (--topic T[:P,...] ... | --all-topics) (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime TIME) [--dry-run | --execute]",
		Short: "Move a group's committed offsets (only while the group has no active members)",
		Long: `Move the committed offsets of GROUP, as kafka-consumer-groups --reset-offsets
does. Without --execute it only prints the plan. The group must have no
active members (state Empty, or Dead for a group that does not exist yet).
New offsets are kept within each partition's log start and end offsets.`,
		Example: `  berth group reset-offsets billing --topic orders --to-earliest --execute
  berth group reset-offsets billing --topic orders:0,1 --shift-by -10
  berth group reset-offsets billing --all-topics --to-datetime 2026-11-29T10:00:00Z --execute`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			if group == "" {
				return errors.New("group names must not be empty")
			}
			spec, err := parseResetSpec(&o, cmd.Flags().Changed, time.Local)
			if err != nil {
				return err
			}
			if (len(o.topics) > 0) == o.allTopics {
				return errors.New("give --topic TOPIC[:PARTITIONS] (repeatable) or --all-topics, one of the two")
			}
			if o.dryRun && o.execute {
				return errors.New("--dry-run and --execute: give one")
			}
			topics, err := parseTopicSpecs(o.topics)
			if err != nil {
				return err
			}
			return withGroupAdmin(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				res, warnings, err := resetOffsets(ctx, cf, cl, adm, group, spec, topics, o.execute)
				if err != nil && res == nil {
					return err
				}
				for _, w := range warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
				}
				out := cmd.OutOrStdout()
				var perr error
				if cf.json {
					perr = writeJSON(out, res)
				} else {
					perr = printResetPlan(out, res)
				}
				if !o.execute {
					fmt.Fprintln(cmd.ErrOrStderr(), "Dry run: nothing was committed; add --execute to apply.")
				}
				return errors.Join(perr, err)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVarP(&o.topics, "topic", "t", nil, "topic to reset, all partitions or TOPIC:P,P,... (repeatable)")
	fs.BoolVar(&o.allTopics, "all-topics", false, "reset every partition the group has a committed offset for")
	fs.BoolVar(&o.toEarliest, "to-earliest", false, "reset to the log start offset")
	fs.BoolVar(&o.toLatest, "to-latest", false, "reset to the log end offset")
	fs.Int64Var(&o.toOffset, "to-offset", 0, "reset to this offset")
	fs.Int64Var(&o.shiftBy, "shift-by", 0, "move the committed offset by N (negative: back)")
	fs.StringVar(&o.toDatetime, "to-datetime", "", "reset to the first record at or after YYYY-MM-DDTHH:MM:SS[.sss][Z|+hh:mm] (no zone: local time)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "only print the plan (the default)")
	fs.BoolVar(&o.execute, "execute", false, "commit the new offsets")
	return cmd
}

// resetOffsets plans and, with execute, commits a reset. A nil result comes
// with an error that stopped it before a plan; a non-nil result may come
// with the errors of partitions whose commit failed.
func resetOffsets(ctx context.Context, cf *clientFlags, cl *kgo.Client, adm *kadm.Client, group string, spec resetSpec, topics map[string][]int32, execute bool) (*resetResult, []string, error) {
	apis, err := fetchServedAPIs(ctx, adm)
	if err != nil {
		return nil, nil, cf.explain(err)
	}
	if err := apis.require(kmsg.FindCoordinator, kmsg.OffsetFetch, kmsg.OffsetCommit); err != nil {
		return nil, nil, err
	}
	if err := apis.canDescribe(); err != nil {
		return nil, nil, err
	}
	infos, err := lookupGroups(ctx, cl, adm, apis, []string{group})
	if err != nil {
		return nil, nil, cf.explain(err)
	}
	g := infos[group]
	if g.err != nil && !g.notFound() {
		return nil, nil, groupErr(cf, group, g.err, g.errMsg)
	}
	if !g.notFound() && !strings.EqualFold(g.state, "Empty") && !isDeadState(g.state) {
		n := len(g.members)
		if n == 1 {
			return nil, nil, fmt.Errorf("group %s has 1 active member; stop it first (Kafka's rule: offsets can be reset only while the group is Empty; it is %s)", group, g.state)
		}
		return nil, nil, fmt.Errorf("group %s has %d active members; stop them first (Kafka's rule: offsets can be reset only while the group is Empty; it is %s)", group, n, g.state)
	}

	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil && !(g.notFound() && errors.Is(err, kerr.GroupIDNotFound)) {
		return nil, nil, groupErr(cf, group, err, "")
	}
	parts := kadm.TopicsSet{}
	if len(topics) == 0 { // --all-topics
		commits.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				parts.Add(o.Topic, o.Partition)
			}
		})
		if len(parts) == 0 {
			return nil, nil, fmt.Errorf("group %s has no committed offsets: name the topics with --topic", group)
		}
	} else {
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		sort.Strings(names)
		tds, err := adm.ListTopics(ctx, names...)
		if err != nil {
			return nil, nil, cf.explain(err)
		}
		for _, t := range names {
			td, ok := tds[t]
			if !ok {
				return nil, nil, topicErr(cf, t, kerr.UnknownTopicOrPartition, "")
			}
			if td.Err != nil {
				return nil, nil, topicErr(cf, t, td.Err, "")
			}
			ps := topics[t]
			if ps == nil {
				ps = td.Partitions.Numbers()
			}
			for _, p := range ps {
				if _, ok := td.Partitions[p]; !ok {
					return nil, nil, fmt.Errorf("topic %q has %d partitions (0-%d): partition %d does not exist", t, len(td.Partitions), len(td.Partitions)-1, p)
				}
				parts.Add(t, p)
			}
		}
	}

	starts, ends, err := listBounds(ctx, adm, parts)
	if err != nil {
		return nil, nil, cf.explain(err)
	}
	var atTime kadm.ListedOffsets
	if spec.kind == resetToDatetime {
		atTime, err = adm.ListOffsetsAfterMilli(ctx, spec.millis, parts.Topics()...)
		var se *kadm.ShardErrors
		if err != nil && !errors.As(err, &se) {
			return nil, nil, cf.explain(err)
		}
	}
	var targets []resetTarget
	for _, tp := range parts.Sorted() {
		for _, p := range tp.Partitions {
			t := resetTarget{Topic: tp.Topic, Partition: p, Old: -1, AtTime: -1}
			if c, ok := commits.Lookup(tp.Topic, p); ok && c.Err == nil && c.At >= 0 {
				t.Old = c.At
			}
			s, sok := starts.Lookup(tp.Topic, p)
			e, eok := ends.Lookup(tp.Topic, p)
			for _, l := range []struct {
				ok  bool
				lo  kadm.ListedOffset
				dst *int64
			}{{sok, s, &t.Start}, {eok, e, &t.End}} {
				if !l.ok {
					return nil, nil, fmt.Errorf("topic %q partition %d: the broker did not list its offsets", tp.Topic, p)
				}
				if l.lo.Err != nil {
					return nil, nil, topicErr(cf, tp.Topic, fmt.Errorf("partition %d: listing offsets: %w", p, l.lo.Err), "")
				}
				*l.dst = l.lo.Offset
			}
			if spec.kind == resetToDatetime {
				a, ok := atTime.Lookup(tp.Topic, p)
				if !ok || a.Err != nil {
					err := errors.New("missing from the ListOffsets response")
					if ok {
						err = a.Err
					}
					return nil, nil, topicErr(cf, tp.Topic, fmt.Errorf("partition %d: listing the offset for --to-datetime: %w", p, err), "")
				}
				t.AtTime = a.Offset
			}
			targets = append(targets, t)
		}
	}
	rows, warnings, err := planReset(spec, targets)
	if err != nil {
		return nil, nil, err
	}
	res := &resetResult{Group: group, Offsets: rows}
	if !execute {
		return res, warnings, nil
	}

	offsets := kadm.Offsets{}
	for _, r := range rows {
		// No leader epoch: the new offset may be in another epoch.
		offsets.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.NewOffset, LeaderEpoch: -1})
	}
	// kadm commits as an admin: generation -1 and no member ID, which a
	// group accepts only while it has no members.
	resps, err := adm.CommitOffsets(ctx, group, offsets)
	if err != nil {
		return nil, warnings, groupErr(cf, group, err, "")
	}
	var errs []error
	for i := range res.Offsets {
		r := &res.Offsets[i]
		o, ok := resps.Lookup(r.Topic, r.Partition)
		switch {
		case !ok:
			r.Error = "missing from the OffsetCommit response"
			errs = append(errs, fmt.Errorf("group %q: topic %q partition %d: %s", group, r.Topic, r.Partition, r.Error))
		case o.Err != nil:
			r.Error = kerrName(o.Err)
			errs = append(errs, groupErr(cf, group, fmt.Errorf("topic %q partition %d: %w", r.Topic, r.Partition, o.Err), ""))
		}
	}
	res.Executed = true
	return res, warnings, errors.Join(errs...)
}

func printResetPlan(w io.Writer, res *resetResult) error {
	t := newTable(w, "group", "topic", "partition", "old-offset", "new-offset")
	for _, r := range res.Offsets {
		newOff := fmt.Sprint(r.NewOffset)
		if r.Error != "" {
			newOff += " (not committed: " + r.Error + ")"
		}
		t.row(res.Group, r.Topic, r.Partition, offsetOrDash(r.OldOffset), newOff)
	}
	return t.flush()
}
