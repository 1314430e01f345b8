package cli

// `berth group reset-offsets`: plan and commit new offsets for a group
// with no active members, as kafka-consumer-groups --reset-offsets does.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
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
