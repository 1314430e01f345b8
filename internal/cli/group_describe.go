package cli

// `berth group describe`: a group's state and members and, per partition,
// its committed offset, lag and the age of the oldest unconsumed record.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
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
