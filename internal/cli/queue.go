package cli

// `berth queue`: share groups (KIP-932) seen as work queues. list shows
// every share group with its state, member count and lag; describe shows
// one group's members, their assignments and, per partition, the
// share-partition start offset, the high watermark and the lag.
//
// The lag of a share-partition is the high watermark (ListOffsets latest)
// minus its start offset: the records not yet finished, available or in
// flight (records acknowledged out of order above the start offset count
// too). Start offsets come from DescribeShareGroupOffsets, sent to each
// partition's leader: Berth keeps share-partition state on the leader,
// not on a share coordinator, so the request is not routed the way kgo
// routes key 90 (to the group coordinator).
//
// The counts of a share-partition (available, in flight, delayed, the
// oldest available record's age, redeliveries, archived) come from
// Berth's tagged fields on the DescribeShareGroupOffsets partitions
// (berthmsg.ShareStatsTag*, docs/compatibility.md key 90); a broker that
// does not send them leaves them unknown (-1, shown "-"). The DLQ depth
// is the record count (high watermark minus log start) of the topic the
// group's errors.deadletterqueue.topic.name config names, read with
// DescribeConfigs on the GROUP resource (type 32); blank when the broker
// does not answer it or the group has no DLQ topic.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/pkg/berthmsg"
)

func init() { clientCommands = append(clientCommands, newQueueCmd) }

func newQueueCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "queue",
		Aliases: []string{"queues"},
		Short:   "List and describe work queues (share groups, KIP-932) with their lag; show and change their configs",
		Args:    cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newQueueListCmd(cf), newQueueDescribeCmd(cf), newQueueConfigsCmd(cf), newQueueAlterCmd(cf))
	return cmd
}

// queuePartition is one share-partition of a queue.
type queuePartition struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Leader        int32  `json:"leader"`
	StartOffset   int64  `json:"start_offset"` // -1: the group has not fetched the partition yet
	HighWatermark int64  `json:"high_watermark"`
	Lag           int64  `json:"lag"` // -1: unknown
	queueCounts
	Error string `json:"error,omitempty"`

	endOffset int64 // the in-flight window's end (tag), -1 unknown
}

// queueCounts are a share-partition's (or, summed, a group's) record
// counts from Berth's tagged fields; -1 is unknown (not a Berth broker,
// or no share-partition state yet).
type queueCounts struct {
	Available            int64 `json:"available"`
	InFlight             int64 `json:"in_flight"`
	Delayed              int64 `json:"delayed"`
	OldestAvailableAgeMs int64 `json:"oldest_available_age_ms"` // -1: none available in the window, or unknown
	Redeliveries         int64 `json:"redeliveries"`
	Archived             int64 `json:"archived"` // rejected plus delivery limit reached
	DLQWritten           int64 `json:"dlq_written"`
}

func unknownCounts() queueCounts {
	return queueCounts{-1, -1, -1, -1, -1, -1, -1}
}

// shareStatsFromTags reads Berth's tagged fields of a
// DescribeShareGroupOffsets partition; ok is false when there are none.
func shareStatsFromTags(tags *kmsg.Tags) (c queueCounts, endOffset int64, ok bool) {
	c = unknownCounts()
	vals := map[uint32]int64{}
	tags.Each(func(tag uint32, b []byte) {
		r := kbin.Reader{Src: b}
		if v := r.Varlong(); r.Complete() == nil {
			vals[tag] = v
		}
	})
	get := func(tag uint32, dst *int64) {
		if v, found := vals[tag]; found {
			*dst, ok = v, true
		}
	}
	get(berthmsg.ShareStatsTagAvailable, &c.Available)
	get(berthmsg.ShareStatsTagAcquired, &c.InFlight)
	get(berthmsg.ShareStatsTagDelayed, &c.Delayed)
	get(berthmsg.ShareStatsTagOldestAvailableAgeMs, &c.OldestAvailableAgeMs)
	get(berthmsg.ShareStatsTagRedeliveries, &c.Redeliveries)
	get(berthmsg.ShareStatsTagDLQWritten, &c.DLQWritten)
	rej, lim := int64(-1), int64(-1)
	get(berthmsg.ShareStatsTagRejected, &rej)
	get(berthmsg.ShareStatsTagDeliveryLimit, &lim)
	if rej >= 0 || lim >= 0 {
		c.Archived = max(rej, 0) + max(lim, 0)
	}
	endOffset = -1
	get(berthmsg.ShareStatsTagEndOffset, &endOffset)
	return c, endOffset, ok
}

// add sums o into c: unknown stays unknown only while every part is;
// the age is the largest.
func (c *queueCounts) add(o queueCounts) {
	sum := func(dst *int64, v int64) {
		if v >= 0 {
			*dst = max(*dst, 0) + v
		}
	}
	sum(&c.Available, o.Available)
	sum(&c.InFlight, o.InFlight)
	sum(&c.Delayed, o.Delayed)
	sum(&c.Redeliveries, o.Redeliveries)
	sum(&c.Archived, o.Archived)
	sum(&c.DLQWritten, o.DLQWritten)
	c.OldestAvailableAgeMs = max(c.OldestAvailableAgeMs, o.OldestAvailableAgeMs)
}

// queueMember is one member of a share group.
type queueMember struct {
	MemberID   string   `json:"member_id"`
	ClientID   string   `json:"client_id"`
	ClientHost string   `json:"client_host"`
	Topics     []string `json:"subscribed_topics"`
	Assignment []string `json:"assignment"` // topic:partition
}

// queueInfo is one share group as a queue.
type queueInfo struct {
	Group         string `json:"group"`
	State         string `json:"state"`
	CoordinatorID int32  `json:"coordinator_id"`
	Members       int    `json:"members"`
	Lag           int64  `json:"lag"` // sum over the partitions with a known lag
	queueCounts          // summed over the partitions
	// DLQTopic is the group's errors.deadletterqueue.topic.name ("" for
	// none or unknown); DLQDepth the records in it (-1: unknown).
	DLQTopic   string           `json:"dlq_topic,omitempty"`
	DLQDepth   int64            `json:"dlq_depth"`
	Partitions []queuePartition `json:"partitions"`
	MemberList []queueMember    `json:"member_list,omitempty"`
}

func newQueueListCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List share groups with their state, members and lag",
		Example: `  berth queue list
  berth queue list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				listed, err := adm.ListGroupsByType(ctx, []string{"share"})
				if err != nil && len(listed) == 0 {
					return cf.explain(err)
				} else if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: some brokers did not list their groups: %v\n", err)
				}
				qs := []queueInfo{}
				if len(listed) > 0 {
					if qs, err = describeQueues(ctx, cf, cl, adm, listed.Groups(), false); err != nil {
						return cf.explain(err)
					}
				}
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, qs)
				}
				return printQueueList(out, qs)
			})
		},
	}
}

func newQueueDescribeCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Describe a share group: members, assignments and per partition start offset, high watermark and lag",
		Example: `  berth queue describe workers
  berth queue describe workers --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return errors.New("group names must not be empty")
			}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				qs, err := describeQueues(ctx, cf, cl, adm, args, true)
				if err != nil {
					var ge *queueGroupError
					if errors.As(err, &ge) {
						return groupErr(cf, ge.group, ge.err, "")
					}
					return cf.explain(err)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, qs[0])
				}
				return printQueue(out, qs[0])
			})
		},
	}
}

// queueGroupError is a failure about one group.
type queueGroupError struct {
	group string
	err   error
}

func (e *queueGroupError) Error() string { return fmt.Sprintf("group %q: %v", e.group, e.err) }
func (e *queueGroupError) Unwrap() error { return e.err }

// describeQueues describes share groups as queues: ShareGroupDescribe for
// state and members, Metadata for the leaders of the subscribed topics,
// DescribeShareGroupOffsets to each leader for the start offsets and
// ListOffsets for the high watermarks. With strict, a group that cannot
// be described is an error; otherwise it is listed with what is known.
func describeQueues(ctx context.Context, cf *clientFlags, cl *kgo.Client, adm *kadm.Client, groups []string, strict bool) ([]queueInfo, error) {
	described, err := adm.DescribeShareGroups(ctx, groups...)
	if err != nil && strict {
		return nil, err
	}
	qs := make([]queueInfo, 0, len(groups))
	topicSet := map[string]bool{}
	subscribed := map[string][]string{} // group -> topics
	for _, g := range groups {
		d, ok := described[g]
		q := queueInfo{Group: g, CoordinatorID: -1, Partitions: []queuePartition{}, queueCounts: unknownCounts(), DLQDepth: -1}
		switch {
		case !ok && strict:
			return nil, &queueGroupError{g, errors.New("not described")}
		case ok && d.Err != nil && strict:
			return nil, &queueGroupError{g, d.Err}
		case ok && d.Err == nil:
			q.State, q.CoordinatorID, q.Members = d.GroupState, d.Coordinator.NodeID, len(d.Members)
			seen := map[string]bool{}
			for _, m := range d.Members {
				qm := queueMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost,
					Topics: append([]string{}, m.SubscribedTopicNames...), Assignment: []string{}}
				sort.Strings(qm.Topics)
				m.Assignment.EachPartitions(func(t string, ps []int32) {
					for _, p := range ps {
						qm.Assignment = append(qm.Assignment, t+":"+strconv.Itoa(int(p)))
					}
				})
				sort.Strings(qm.Assignment)
				for _, t := range m.SubscribedTopicNames {
					if !seen[t] {
						seen[t] = true
						subscribed[g] = append(subscribed[g], t)
						topicSet[t] = true
					}
				}
				q.MemberList = append(q.MemberList, qm)
			}
			sort.Strings(subscribed[g])
		}
		qs = append(qs, q)
	}

	// Leaders of the subscribed topics, and every broker: a group with no
	// subscriptions (no members) is asked for whatever state each broker
	// holds (a null topic list).
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, err
	}
	type req struct {
		r      *kmsg.DescribeShareGroupOffsetsRequest
		groups map[string]int // group -> index in r.Groups
	}
	reqs := map[int32]*req{}
	reqFor := func(broker int32, group string) *kmsg.DescribeShareGroupOffsetsRequestGroup {
		rq := reqs[broker]
		if rq == nil {
			rq = &req{r: kmsg.NewPtrDescribeShareGroupOffsetsRequest(), groups: map[string]int{}}
			reqs[broker] = rq
		}
		i, ok := rq.groups[group]
		if !ok {
			rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
			rg.GroupID = group
			rq.r.Groups = append(rq.r.Groups, rg)
			i = len(rq.r.Groups) - 1
			rq.groups[group] = i
		}
		return &rq.r.Groups[i]
	}
	for _, q := range qs {
		ts := subscribed[q.Group]
		if len(ts) == 0 {
			for _, b := range md.Brokers {
				reqFor(b.NodeID, q.Group) // Topics nil: all it holds
			}
			continue
		}
		for _, t := range ts {
			td, ok := md.Topics[t]
			if !ok || td.Err != nil {
				continue
			}
			ps := make([]int32, 0, len(td.Partitions))
			for p := range td.Partitions {
				ps = append(ps, p)
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			for _, p := range ps {
				leader := td.Partitions[p].Leader
				if leader < 0 {
					continue
				}
				rg := reqFor(leader, q.Group)
				if rg.Topics == nil {
					rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{}
				}
				n := len(rg.Topics)
				if n == 0 || rg.Topics[n-1].Topic != t {
					rg.Topics = append(rg.Topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: t})
					n++
				}
				rg.Topics[n-1].Partitions = append(rg.Topics[n-1].Partitions, p)
			}
		}
	}

	// Ask each leader; collect the partitions per group.
	parts := map[string][]queuePartition{}
	groupErrs := map[string]error{}
	brokers := make([]int32, 0, len(reqs))
	for b := range reqs {
		brokers = append(brokers, b)
	}
	sort.Slice(brokers, func(i, j int) bool { return brokers[i] < brokers[j] })
	for _, b := range brokers {
		rq := reqs[b]
		kresp, err := cl.Broker(int(b)).Request(ctx, rq.r)
		if err != nil {
			return nil, fmt.Errorf("DescribeShareGroupOffsets to broker %d: %w", b, err)
		}
		resp := kresp.(*kmsg.DescribeShareGroupOffsetsResponse)
		for _, g := range resp.Groups {
			if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
				if g.ErrorMessage != nil && *g.ErrorMessage != "" {
					err = withBrokerMessage(err, *g.ErrorMessage)
				}
				groupErrs[g.GroupID] = err
				continue
			}
			nullTopics := rq.r.Groups[rq.groups[g.GroupID]].Topics == nil
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					qp := queuePartition{Topic: t.Topic, Partition: p.Partition, Leader: b, StartOffset: p.StartOffset, HighWatermark: -1, Lag: -1}
					qp.queueCounts, qp.endOffset, _ = shareStatsFromTags(&p.UnknownTags)
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						if nullTopics && errors.Is(err, kerr.NotLeaderForPartition) {
							continue // stale state of a partition it no longer leads
						}
						qp.Error, qp.StartOffset = err.Error(), -1
					}
					parts[g.GroupID] = append(parts[g.GroupID], qp)
					topicSet[t.Topic] = true
				}
			}
		}
	}

	// High watermarks.
	var ends kadm.ListedOffsets
	if len(topicSet) > 0 {
		all := make([]string, 0, len(topicSet))
		for t := range topicSet {
			all = append(all, t)
		}
		if ends, err = adm.ListEndOffsets(ctx, all...); err != nil && len(ends) == 0 {
			return nil, err
		}
	}
	for i := range qs {
		q := &qs[i]
		if err := groupErrs[q.Group]; err != nil && strict {
			return nil, &queueGroupError{q.Group, err}
		}
		ps := parts[q.Group]
		sort.Slice(ps, func(i, j int) bool {
			if ps[i].Topic != ps[j].Topic {
				return ps[i].Topic < ps[j].Topic
			}
			return ps[i].Partition < ps[j].Partition
		})
		for j := range ps {
			p := &ps[j]
			if o, ok := ends.Lookup(p.Topic, p.Partition); ok && o.Err == nil {
				p.HighWatermark = o.Offset
				if p.StartOffset >= 0 && p.Error == "" {
					p.Lag = max(p.HighWatermark-p.StartOffset, 0)
					q.Lag += p.Lag
				}
			}
		}
		if ps != nil {
			q.Partitions = ps
		}
	}
	fillNeverFetchedAges(ctx, cf, qs, time.Now)
	for i := range qs {
		for _, p := range qs[i].Partitions {
			qs[i].add(p.queueCounts)
		}
	}
	queueDLQs(ctx, cl, adm, qs)
	return qs, nil
}

// fillNeverFetchedAges times the records past a share-partition's
// in-flight window (produced, never fetched, so available since they were
// written): the oldest available age is at least now minus the timestamp
// of the record at the window's end.
func fillNeverFetchedAges(ctx context.Context, cf *clientFlags, qs []queueInfo, now func() time.Time) {
	want := map[string]map[int32]int64{}
	for _, q := range qs {
		for _, p := range q.Partitions {
			if p.Error == "" && p.endOffset >= 0 && p.HighWatermark > p.endOffset && p.Available > 0 {
				if want[p.Topic] == nil {
					want[p.Topic] = map[int32]int64{}
				}
				want[p.Topic][p.Partition] = p.endOffset
			}
		}
	}
	if len(want) == 0 {
		return
	}
	stamps := recordTimestamps(ctx, cf, want)
	t := now()
	for i := range qs {
		for j := range qs[i].Partitions {
			p := &qs[i].Partitions[j]
			if at, ok := want[p.Topic][p.Partition]; !ok || at != p.endOffset {
				continue
			}
			if ts, ok := stamps[p.Topic][p.Partition]; ok {
				p.OldestAvailableAgeMs = max(p.OldestAvailableAgeMs, max(t.Sub(ts).Milliseconds(), 0))
			}
		}
	}
}

// queueDLQs fills each group's DLQ topic (DescribeConfigs on the GROUP
// resource, type 32) and its depth. A broker that does not serve group
// configs leaves them blank: that is not an error.
func queueDLQs(ctx context.Context, cl *kgo.Client, adm *kadm.Client, qs []queueInfo) {
	groups := make([]string, 0, len(qs))
	for _, q := range qs {
		groups = append(groups, q.Group)
	}
	dlqs := groupDLQTopics(ctx, cl, groups)
	if len(dlqs) == 0 {
		return
	}
	topics := make([]string, 0, len(dlqs))
	for _, t := range dlqs {
		topics = append(topics, t)
	}
	depths := topicDepths(ctx, adm, topics)
	for i := range qs {
		if t, ok := dlqs[qs[i].Group]; ok {
			qs[i].DLQTopic = t
			if d, ok := depths[t]; ok {
				qs[i].DLQDepth = d
			}
		}
	}
}

// groupDLQTopics returns the DLQ topic of each group that has one (the
// group config errors.deadletterqueue.topic.name, read with
// DescribeConfigs on the GROUP resource). A broker that does not serve
// group configs yields none.
func groupDLQTopics(ctx context.Context, cl *kgo.Client, groups []string) map[string]string {
	dlqs := map[string]string{}
	if len(groups) == 0 {
		return dlqs
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, g := range groups {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
		r.ConfigNames = []string{berthmsg.ConfigDLQTopicName}
		req.Resources = append(req.Resources, r)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return dlqs
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			continue
		}
		for _, c := range r.Configs {
			if c.Name == berthmsg.ConfigDLQTopicName && c.Value != nil && *c.Value != "" {
				dlqs[r.ResourceName] = *c.Value
			}
		}
	}
	return dlqs
}

// topicDepths returns, for each topic whose every partition answered,
// the records in it: the sum of high watermark minus log start offset.
func topicDepths(ctx context.Context, adm *kadm.Client, topics []string) map[string]int64 {
	out := map[string]int64{}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil && len(starts) == 0 {
		return out
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil && len(ends) == 0 {
		return out
	}
	bad := map[string]bool{}
	ends.Each(func(e kadm.ListedOffset) {
		s, ok := starts.Lookup(e.Topic, e.Partition)
		if e.Err != nil || !ok || s.Err != nil {
			bad[e.Topic] = true
			return
		}
		out[e.Topic] += max(e.Offset-s.Offset, 0)
	})
	for t := range bad {
		delete(out, t)
	}
	return out
}

func printQueueList(w io.Writer, qs []queueInfo) error {
	if len(qs) == 0 {
		_, err := fmt.Fprintln(w, "No share groups.")
		return err
	}
	t := newTable(w, "group", "state", "members", "partitions", "lag", "available", "in-flight", "delayed", "oldest-available", "dlq-depth")
	for _, q := range qs {
		state := q.State
		if state == "" {
			state = "-"
		}
		t.row(q.Group, state, q.Members, len(q.Partitions), q.Lag, dashIfNegative(q.Available), dashIfNegative(q.InFlight),
			dashIfNegative(q.Delayed), formatAge(q.OldestAvailableAgeMs), dlqDepthCell(q))
	}
	return t.flush()
}

// dlqDepthCell is "-" without a known DLQ topic, else its depth.
func dlqDepthCell(q queueInfo) string {
	if q.DLQTopic == "" {
		return "-"
	}
	return dashIfNegative(q.DLQDepth)
}

func printQueue(w io.Writer, q queueInfo) error {
	fmt.Fprintf(w, "Group %s: state %s, coordinator %d, %d members, lag %d\n", q.Group, q.State, q.CoordinatorID, q.Members, q.Lag)
	fmt.Fprintf(w, "Jobs: %s available, %s in flight, %s delayed, oldest available %s, %s redelivered, %s archived\n",
		dashIfNegative(q.Available), dashIfNegative(q.InFlight), dashIfNegative(q.Delayed), formatAge(q.OldestAvailableAgeMs),
		dashIfNegative(q.Redeliveries), dashIfNegative(q.Archived))
	if q.DLQTopic == "" {
		fmt.Fprint(w, "DLQ: -\n\n")
	} else {
		fmt.Fprintf(w, "DLQ: %s, %s records\n\n", q.DLQTopic, dashIfNegative(q.DLQDepth))
	}
	if len(q.Partitions) == 0 {
		fmt.Fprintln(w, "No share-partitions yet (the group has fetched nothing).")
	} else {
		t := newTable(w, "topic", "partition", "leader", "start-offset", "high-watermark", "lag",
			"available", "in-flight", "delayed", "oldest-available", "redelivered", "archived", "error")
		for _, p := range q.Partitions {
			errCol := p.Error
			if errCol == "" {
				errCol = "-"
			}
			t.row(p.Topic, p.Partition, p.Leader, dashIfNegative(p.StartOffset), dashIfNegative(p.HighWatermark), dashIfNegative(p.Lag),
				dashIfNegative(p.Available), dashIfNegative(p.InFlight), dashIfNegative(p.Delayed), formatAge(p.OldestAvailableAgeMs),
				dashIfNegative(p.Redeliveries), dashIfNegative(p.Archived), errCol)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if len(q.MemberList) == 0 {
		fmt.Fprintln(w, "No members.")
	} else {
		t := newTable(w, "member", "client-id", "host", "topics", "assignment")
		for _, m := range q.MemberList {
			asg := strings.Join(m.Assignment, ",")
			if asg == "" {
				asg = "-"
			}
			t.row(m.MemberID, m.ClientID, m.ClientHost, strings.Join(m.Topics, ","), asg)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}
