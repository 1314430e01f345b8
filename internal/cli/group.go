package cli

// `berth group`: list, describe and delete consumer groups and reset their
// committed offsets, with the semantics of kafka-consumer-groups.sh, over the
// Kafka group APIs (ListGroups, DescribeGroups, ConsumerGroupDescribe,
// OffsetFetch, OffsetCommit, DeleteGroups) through kadm.
//
// KIP-848 groups are described with ConsumerGroupDescribe when the cluster
// serves it, classic groups (JoinGroup/SyncGroup) with DescribeGroups; see
// lookupGroups.
//
// This file holds the command and what its subcommands share: the APIs the
// cluster serves, group errors and their hints, and looking groups up. The
// subcommands are in group_list.go, group_describe.go, group_delete.go and
// group_reset.go.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

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
