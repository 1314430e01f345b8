package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
)

// ---- unit tests: no broker ----

func TestGroupResetFlagErrorsBeforeConnecting(t *testing.T) {
	addr := closedPort(t)
	base := []string{"group", "reset-offsets", "g", "--topic", "t"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{base, "give one of --to-earliest, --to-latest, --to-offset N, --shift-by N or --to-datetime"},
		{append(slices.Clone(base), "--to-earliest", "--to-latest"), "--to-earliest and --to-latest: give exactly one reset mode"},
		{append(slices.Clone(base), "--to-offset", "5", "--shift-by", "-1"), "give exactly one reset mode"},
		{append(slices.Clone(base), "--to-latest", "--to-datetime", "2026-01-01T00:00:00Z"), "give exactly one reset mode"},
		{append(slices.Clone(base), "--to-offset", "-1"), "--to-offset -1: must be 0 or more"},
		{append(slices.Clone(base), "--to-earliest=false"), "--to-earliest=false"},
		{append(slices.Clone(base), "--to-datetime", "yesterday"), `--to-datetime "yesterday": want YYYY-MM-DDTHH:MM:SS`},
		{append(slices.Clone(base), "--to-datetime", "1969-12-31T23:59:59Z"), "must be after 1970"},
		{append(slices.Clone(base), "--to-earliest", "--all-topics"), "--topic TOPIC[:PARTITIONS] (repeatable) or --all-topics, one of the two"},
		{[]string{"group", "reset-offsets", "g", "--to-earliest"}, "or --all-topics, one of the two"},
		{append(slices.Clone(base), "--to-earliest", "--dry-run", "--execute"), "--dry-run and --execute: give one"},
		{[]string{"group", "reset-offsets", "g", "--topic", "t:x", "--to-earliest"}, `"x" is not a partition number`},
		{[]string{"group", "reset-offsets", "g", "--topic", ":1", "--to-earliest"}, "want TOPIC or TOPIC:PARTITION"},
		{[]string{"group", "reset-offsets", "--topic", "t", "--to-earliest"}, "accepts 1 arg"},
		{[]string{"group", "reset-offsets", "", "--topic", "t", "--to-earliest"}, "must not be empty"},
		{[]string{"group", "list", "--state", "Sleeping"}, `--state "Sleeping": want one of`},
		{[]string{"group", "list", "--type", "share"}, `--type "share": want classic or consumer`},
		{[]string{"group", "describe"}, "requires at least 1 arg"},
		{[]string{"group", "describe", "a", ""}, "must not be empty"},
		{[]string{"group", "delete", "g"}, "stdin is not a terminal (pass --yes)"},
	} {
		_, _, err := runCLI(t, "", append(tc.args, "-b", addr)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestGroupParseResetSpec(t *testing.T) {
	set := func(names ...string) func(string) bool {
		return func(f string) bool { return slices.Contains(names, f) }
	}
	for _, tc := range []struct {
		o       resetOptions
		changed []string
		want    resetSpec
	}{
		{resetOptions{toEarliest: true}, []string{"to-earliest"}, resetSpec{kind: resetEarliest}},
		{resetOptions{toLatest: true}, []string{"to-latest"}, resetSpec{kind: resetLatest}},
		{resetOptions{toOffset: 0}, []string{"to-offset"}, resetSpec{kind: resetToOffset}},
		{resetOptions{toOffset: 42}, []string{"to-offset"}, resetSpec{kind: resetToOffset, offset: 42}},
		{resetOptions{shiftBy: -7}, []string{"shift-by"}, resetSpec{kind: resetShiftBy, shift: -7}},
		{resetOptions{toDatetime: "2026-11-29T10:00:00Z"}, []string{"to-datetime"}, resetSpec{kind: resetToDatetime, millis: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).UnixMilli()}},
	} {
		got, err := parseResetSpec(&tc.o, set(tc.changed...), time.UTC)
		if err != nil || got != tc.want {
			t.Errorf("%v %+v: got %+v, %v; want %+v", tc.changed, tc.o, got, err, tc.want)
		}
	}
}

func TestGroupParseResetDatetime(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-11-29T10:00:00Z", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
		{"2026-11-29T10:00:00+02:00", time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)},
		{"2026-11-29T10:00:00-0130", time.Date(2026, 11, 29, 11, 30, 0, 0, time.UTC)},
		{"2026-11-29T10:00:00.250Z", time.Date(2026, 11, 29, 10, 0, 0, 250e6, time.UTC)},
		{" 2026-11-29T10:00:00 ", time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)},     // no zone: loc (CET)
		{"2026-11-29T10:00:00.5", time.Date(2026, 11, 29, 9, 0, 0, 500e6, time.UTC)}, // no zone, fraction
		{"1970-01-01T00:00:00Z", time.Unix(0, 0)},
	} {
		got, err := parseResetDatetime(tc.in, cet)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("parseResetDatetime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "2026-11-29", "2026-11-29 10:00:00", "10:00", "2026-13-01T00:00:00Z", "2026-11-29T10:00:00+2", "1969-12-31T23:59:59Z", "now"} {
		if got, err := parseResetDatetime(bad, cet); err == nil {
			t.Errorf("parseResetDatetime(%q) = %v, want an error", bad, got)
		}
	}
}

func TestGroupParseTopicSpecs(t *testing.T) {
	got, err := parseTopicSpecs([]string{"orders", "pay:2,0", "pay:0", "logs:3", "orders:1", "logs"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int32{"orders": nil, "pay": {0, 2}, "logs": nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", ":0", "t:", "t:-1", "t:1,,2", "t:a"} {
		if _, err := parseTopicSpecs([]string{bad}); err == nil {
			t.Errorf("parseTopicSpecs(%q) succeeded", bad)
		}
	}
}

func TestGroupPlanResetClamps(t *testing.T) {
	targets := []resetTarget{
		{Topic: "t", Partition: 0, Old: 40, Start: 10, End: 100, AtTime: 55},
		{Topic: "t", Partition: 1, Old: 95, Start: 0, End: 100, AtTime: -1}, // nothing after the time
		{Topic: "u", Partition: 0, Old: 5, Start: 20, End: 30, AtTime: 25},  // commit before the log start
	}
	for _, tc := range []struct {
		name     string
		spec     resetSpec
		want     []int64
		warnings int
	}{
		{"earliest", resetSpec{kind: resetEarliest}, []int64{10, 0, 20}, 0},
		{"latest", resetSpec{kind: resetLatest}, []int64{100, 100, 30}, 0},
		{"to-offset", resetSpec{kind: resetToOffset, offset: 50}, []int64{50, 50, 30}, 1},
		{"to-offset 0", resetSpec{kind: resetToOffset, offset: 0}, []int64{10, 0, 20}, 2},
		{"shift forward", resetSpec{kind: resetShiftBy, shift: 10}, []int64{50, 100, 20}, 2},
		{"shift back", resetSpec{kind: resetShiftBy, shift: -35}, []int64{10, 60, 20}, 2},
		{"shift by max", resetSpec{kind: resetShiftBy, shift: math.MaxInt64}, []int64{100, 100, 30}, 3},
		{"shift by min", resetSpec{kind: resetShiftBy, shift: math.MinInt64}, []int64{10, 0, 20}, 3},
		{"shift by 0", resetSpec{kind: resetShiftBy}, []int64{40, 95, 20}, 1},
		{"datetime", resetSpec{kind: resetToDatetime, millis: 1}, []int64{55, 100, 25}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, warnings, err := planReset(tc.spec, targets)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for i, r := range rows {
				got = append(got, r.NewOffset)
				if r.OldOffset != targets[i].Old || r.Topic != targets[i].Topic || r.Partition != targets[i].Partition {
					t.Errorf("row %d = %+v", i, r)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("new offsets %v, want %v", got, tc.want)
			}
			if len(warnings) != tc.warnings {
				t.Errorf("warnings %q, want %d", warnings, tc.warnings)
			}
		})
	}
	_, w, _ := planReset(resetSpec{kind: resetToOffset, offset: 500}, targets[:1])
	if len(w) != 1 || w[0] != "t partition 0: offset 500 is past the log end; using 100" {
		t.Errorf("warning %q", w)
	}
	_, w, _ = planReset(resetSpec{kind: resetShiftBy, shift: -100}, targets[:1])
	if len(w) != 1 || w[0] != "t partition 0: offset -60 is before the log start; using 10" {
		t.Errorf("warning %q", w)
	}

	// Shifting needs a commit to shift from, as in Kafka's tool.
	noCommit := []resetTarget{{Topic: "t", Partition: 3, Old: -1, Start: 0, End: 10}}
	if _, _, err := planReset(resetSpec{kind: resetShiftBy, shift: 1}, noCommit); err == nil || !strings.Contains(err.Error(), "cannot shift the offset of t partition 3") {
		t.Errorf("shift without a commit: %v", err)
	}
	if rows, _, err := planReset(resetSpec{kind: resetEarliest}, noCommit); err != nil || rows[0].OldOffset != -1 || rows[0].NewOffset != 0 {
		t.Errorf("earliest without a commit: %+v, %v", rows, err)
	}
}

func TestGroupResetPlanOutput(t *testing.T) {
	res := &resetResult{Group: "billing", Offsets: []resetRow{
		{Topic: "orders", Partition: 0, OldOffset: 40, NewOffset: 0},
		{Topic: "orders", Partition: 1, OldOffset: -1, NewOffset: 0},
		{Topic: "orders", Partition: 2, OldOffset: 7, NewOffset: 0, Error: "UNKNOWN_MEMBER_ID"},
	}}
	var b bytes.Buffer
	if err := printResetPlan(&b, res); err != nil {
		t.Fatal(err)
	}
	want := `GROUP    TOPIC   PARTITION  OLD-OFFSET  NEW-OFFSET
billing  orders  0          40          0
billing  orders  1          -           0
billing  orders  2          7           0 (not committed: UNKNOWN_MEMBER_ID)
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	res.Executed = true
	res.Offsets = res.Offsets[:2]
	if err := writeJSON(&b, res); err != nil {
		t.Fatal(err)
	}
	wantJSON := `{
  "group": "billing",
  "executed": true,
  "offsets": [
    {
      "topic": "orders",
      "partition": 0,
      "old_offset": 40,
      "new_offset": 0
    },
    {
      "topic": "orders",
      "partition": 1,
      "old_offset": -1,
      "new_offset": 0
    }
  ]
}
`
	if b.String() != wantJSON {
		t.Errorf("got\n%s\nwant\n%s", b.String(), wantJSON)
	}
}

func TestGroupFormatAge(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want string
	}{
		{-1, "-"}, {0, "0s"}, {1, "1ms"}, {850, "850ms"}, {1000, "1.0s"}, {4250, "4.2s"}, {9999, "10.0s"},
		{10000, "10s"}, {59999, "59s"}, {60000, "1m0s"}, {252000, "4m12s"}, {3599999, "59m59s"},
		{3600000, "1h0m"}, {11040000, "3h4m"}, {86400000, "1d0h"}, {183600000, "2d3h"},
	} {
		if got := formatAge(tc.ms); got != tc.want {
			t.Errorf("formatAge(%d) = %q, want %q", tc.ms, got, tc.want)
		}
	}
}

func TestGroupParseStatesAndType(t *testing.T) {
	got, err := parseGroupStates([]string{"stable", " EMPTY", "Stable", "preparingrebalance"})
	if err != nil || !slices.Equal(got, []string{"Stable", "Empty", "PreparingRebalance"}) {
		t.Errorf("parseGroupStates = %q, %v", got, err)
	}
	for in, want := range map[string]string{"": "", "Classic": "classic", "consumer": "consumer"} {
		if got, err := parseGroupType(in); err != nil || got != want {
			t.Errorf("parseGroupType(%q) = %q, %v", in, got, err)
		}
	}
}

func TestGroupErrHints(t *testing.T) {
	cf := &clientFlags{bootstrap: "127.0.0.1:9092", timeout: time.Second}
	for _, tc := range []struct {
		err  error
		msg  string
		want string
	}{
		{kerr.GroupIDNotFound, "", `group "g": GROUP_ID_NOT_FOUND: The group id does not exist. (no such group; see berth group list)`},
		{kerr.NonEmptyGroup, "The group has active members", `group "g": NON_EMPTY_GROUP: The group has active members (stop the group's consumers first)`},
		{kerr.UnknownMemberID, "", "(the group has active members; stop its consumers first)"},
		{kerr.CoordinatorNotAvailable, "", "(the cluster is electing a leader; retry shortly)"}, // client.go's hint
		{errors.New("boom"), "", `group "g": boom`},
	} {
		got := groupErr(cf, "g", tc.err, tc.msg)
		if !strings.Contains(got.Error(), tc.want) {
			t.Errorf("groupErr(%v) = %q, want it to contain %q", tc.err, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("groupErr(%v) lost the error", tc.err)
		}
		if strings.Count(got.Error(), "(") > 1 {
			t.Errorf("groupErr(%v) = %q: more than one hint", tc.err, got)
		}
	}
}

func TestGroupServedAPIsRequire(t *testing.T) {
	s := servedAPIs{kmsg.FindCoordinator: true, kmsg.ConsumerGroupDescribe: true}
	if err := s.require(kmsg.FindCoordinator); err != nil {
		t.Error(err)
	}
	if err := s.canDescribe(); err != nil {
		t.Error(err)
	}
	err := servedAPIs{}.require(kmsg.FindCoordinator, kmsg.DeleteGroups)
	if err == nil || err.Error() != "the cluster does not serve consumer groups: FindCoordinator, DeleteGroups missing from its ApiVersions" {
		t.Errorf("require = %v", err)
	}
	if err := (servedAPIs{}).canDescribe(); err == nil {
		t.Error("canDescribe with nothing served succeeded")
	}
}

func sampleGroupDescriptions() []groupDescription {
	epoch, aepoch := int32(7), int32(6)
	return []groupDescription{
		{
			Group: "billing", Type: "classic", State: "Stable", ProtocolType: "consumer", Protocol: "range",
			CoordinatorID: 1, Coordinator: "127.0.0.1:9092",
			Members: []groupMember{{ConsumerID: "m-1", Host: "/10.0.0.1", ClientID: "app", Assignment: []groupTopicPartitions{{Topic: "orders", Partitions: []int32{0, 1}}}}},
			Offsets: []groupOffsetRow{
				{Topic: "orders", Partition: 0, CurrentOffset: 40, LogEndOffset: 50, Lag: 10, OldestUnconsumedAgeMs: 252000, ConsumerID: "m-1", Host: "/10.0.0.1", ClientID: "app"},
				{Topic: "orders", Partition: 1, CurrentOffset: -1, LogEndOffset: 50, Lag: 50, OldestUnconsumedAgeMs: -1, ConsumerID: "m-1", Host: "/10.0.0.1", ClientID: "app"},
				{Topic: "orders", Partition: 2, CurrentOffset: 50, LogEndOffset: 50, Lag: 0, OldestUnconsumedAgeMs: 0},
				{Topic: "gone", Partition: 0, CurrentOffset: 3, LogEndOffset: -1, Lag: -1, OldestUnconsumedAgeMs: -1, Error: "UNKNOWN_TOPIC_OR_PARTITION"},
			},
			TotalLag: 60,
		},
		{
			Group: "kip848", Type: "consumer", State: "Empty", ProtocolType: "consumer", Protocol: "uniform",
			Epoch: &epoch, AssignmentEpoch: &aepoch, CoordinatorID: 1, Coordinator: "127.0.0.1:9092",
			Members: []groupMember{}, Offsets: []groupOffsetRow{},
		},
		{Group: "nope", State: "Dead", CoordinatorID: -1, Members: []groupMember{}, Offsets: []groupOffsetRow{}, Error: "GROUP_ID_NOT_FOUND"},
	}
}

func TestGroupPrintDescriptions(t *testing.T) {
	var b bytes.Buffer
	if err := printGroupDescriptions(&b, sampleGroupDescriptions(), false); err != nil {
		t.Fatal(err)
	}
	want := `Group: billing  Type: classic  State: Stable  Protocol: range  Coordinator: 1 (127.0.0.1:9092)  Members: 1
TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG                             OLDEST-UNCONSUMED-AGE  CONSUMER-ID  HOST       CLIENT-ID
orders  0          40              50              10                              4m12s                  m-1          /10.0.0.1  app
orders  1          -               50              50                              -                      m-1          /10.0.0.1  app
orders  2          50              50              0                               0s                     -            -          -
gone    0          3               -               - (UNKNOWN_TOPIC_OR_PARTITION)  -                      -            -          -

Group: kip848  Type: consumer  State: Empty  Protocol: uniform  Epoch: 7  Assignment epoch: 6  Coordinator: 1 (127.0.0.1:9092)  Members: 0
No committed offsets and no assigned partitions.

Group: nope  Error: GROUP_ID_NOT_FOUND
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	if err := printGroupDescriptions(&b, sampleGroupDescriptions()[:2], true); err != nil {
		t.Fatal(err)
	}
	want = `Group: billing  Type: classic  State: Stable  Protocol: range  Coordinator: 1 (127.0.0.1:9092)  Members: 1
CONSUMER-ID  HOST       CLIENT-ID  #PARTITIONS  ASSIGNMENT
m-1          /10.0.0.1  app        2            orders(0,1)

Group: kip848  Type: consumer  State: Empty  Protocol: uniform  Epoch: 7  Assignment epoch: 6  Coordinator: 1 (127.0.0.1:9092)  Members: 0
No active members.
`
	if b.String() != want {
		t.Errorf("--members: got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestGroupDescribeJSONShape(t *testing.T) {
	var b bytes.Buffer
	if err := writeJSON(&b, sampleGroupDescriptions()); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if k := keys(got[0]); !slices.Equal(k, []string{"coordinator", "coordinator_id", "group", "members", "offsets", "protocol", "protocol_type", "state", "total_lag", "type"}) {
		t.Errorf("classic group keys %v", k)
	}
	if k := keys(got[1]); !slices.Contains(k, "epoch") || !slices.Contains(k, "assignment_epoch") {
		t.Errorf("KIP-848 group keys %v", k)
	}
	if k := keys(got[2]); !slices.Equal(k, []string{"coordinator_id", "error", "group", "members", "offsets", "state", "total_lag"}) {
		t.Errorf("missing group keys %v", k)
	}
	row := got[0]["offsets"].([]any)[0].(map[string]any)
	if k := keys(row); !slices.Equal(k, []string{"client_id", "consumer_id", "current_offset", "host", "lag", "log_end_offset", "oldest_unconsumed_age_ms", "partition", "topic"}) {
		t.Errorf("offset row keys %v", k)
	}
	if row["oldest_unconsumed_age_ms"] != 252000.0 || row["lag"] != 10.0 {
		t.Errorf("row %v", row)
	}
	member := got[0]["members"].([]any)[0].(map[string]any)
	if k := keys(member); !slices.Equal(k, []string{"assignment", "client_id", "consumer_id", "host"}) {
		t.Errorf("member keys %v", k)
	}
}

func TestGroupPrintList(t *testing.T) {
	var b bytes.Buffer
	printGroupList(&b, nil)
	if b.String() != "No consumer groups.\n" {
		t.Errorf("empty list: %q", b.String())
	}
	b.Reset()
	printGroupList(&b, []groupListEntry{
		{Group: "billing", State: "Stable", Type: "classic", ProtocolType: "consumer", Protocol: "cooperative-sticky", Members: 3},
		{Group: "old", State: "Empty", Type: "classic", ProtocolType: "consumer", Members: 0},
		{Group: "x", Type: "consumer", Members: -1},
	})
	want := `GROUP    STATE   TYPE      PROTOCOL            MEMBERS
billing  Stable  classic   cooperative-sticky  3
old      Empty   classic   -                   0
x        -       consumer  -                   -
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestGroupOffsetRowsAndAges(t *testing.T) {
	g := &groupInfo{name: "g", members: []groupMember{{ConsumerID: "m", Host: "h", ClientID: "c", Assignment: []groupTopicPartitions{{Topic: "t", Partitions: []int32{1}}}}}}
	end := func(p int32, o int64) kadm.ListedOffset {
		return kadm.ListedOffset{Topic: "t", Partition: p, Offset: o}
	}
	lag := kadm.GroupLag{"t": {
		1: {Topic: "t", Partition: 1, Commit: kadm.Offset{At: 10}, End: end(1, 10), Lag: 0},
		0: {Topic: "t", Partition: 0, Commit: kadm.Offset{At: -1}, End: end(0, 5), Lag: 5},
		2: {Topic: "t", Partition: 2, Commit: kadm.Offset{At: 3}, End: kadm.ListedOffset{Err: kerr.UnknownTopicOrPartition}, Lag: -1, Err: kerr.UnknownTopicOrPartition},
	}}
	rows := groupOffsetRows(g, lag)
	want := []groupOffsetRow{
		{Topic: "t", Partition: 0, CurrentOffset: -1, LogEndOffset: 5, Lag: 5, OldestUnconsumedAgeMs: -1},
		{Topic: "t", Partition: 1, CurrentOffset: 10, LogEndOffset: 10, Lag: 0, OldestUnconsumedAgeMs: -1, ConsumerID: "m", Host: "h", ClientID: "c"},
		{Topic: "t", Partition: 2, CurrentOffset: 3, LogEndOffset: -1, Lag: -1, OldestUnconsumedAgeMs: -1, Error: "UNKNOWN_TOPIC_OR_PARTITION"},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows\n%+v\nwant\n%+v", rows, want)
	}
	// Nothing to fetch here: caught up is 0s, no commit or unknown lag is "-".
	fillOldestAges(context.Background(), &clientFlags{timeout: time.Second}, rows, time.Now)
	if ages := []int64{rows[0].OldestUnconsumedAgeMs, rows[1].OldestUnconsumedAgeMs, rows[2].OldestUnconsumedAgeMs}; !slices.Equal(ages, []int64{-1, 0, -1}) {
		t.Errorf("ages %v, want [-1 0 -1]", ages)
	}
}

func TestGroupDeleteConfirmation(t *testing.T) {
	orig := stdinIsTerminal
	t.Cleanup(func() { stdinIsTerminal = orig })
	stdinIsTerminal = func(io.Reader) bool { return true }
	addr := closedPort(t)

	_, errOut, err := runCLI(t, "n\n", "group", "delete", "a", "b", "-b", addr)
	if err == nil || !strings.Contains(err.Error(), "aborted: nothing was deleted") {
		t.Errorf("answer n: %v", err)
	}
	if !strings.Contains(errOut, "Delete 2 groups (a, b) and their committed offsets? [y/N] ") {
		t.Errorf("prompt %q", errOut)
	}
	if _, _, err := runCLI(t, "", "group", "delete", "a", "-b", addr); err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("no answer: %v", err)
	}
	// Yes goes on to connect, which fails on the closed port.
	_, errOut, err = runCLI(t, "YES\n", "group", "delete", "a", "-b", addr, "--timeout", "5s")
	if err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("answer yes: %v", err)
	}
	if !strings.Contains(errOut, "Delete group a and its committed offsets? [y/N] ") {
		t.Errorf("prompt %q", errOut)
	}
}

func TestGroupCommandsUnreachable(t *testing.T) {
	addr := closedPort(t)
	for _, args := range [][]string{
		{"group", "list"},
		{"group", "describe", "g"},
		{"group", "delete", "g", "--yes"},
		{"group", "reset-offsets", "g", "--all-topics", "--to-earliest"},
	} {
		_, _, err := runCLI(t, "", append(args, "-b", addr, "--timeout", "5s")...)
		if want := "cannot reach " + addr; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want %q", args, err, want)
		}
	}
}

// ---- integration: a broker that serves consumer groups ----

// requireGroupAPIs skips the test while the broker does not serve
// FindCoordinator (API key 10), that is until Berth's group coordinator
// lands; then the tests run.
func requireGroupAPIs(t *testing.T, addr string) (kip848 bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	served, answered := true, false
	kip848 = true
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			return
		}
		answered = true
		if _, ok := v.KeyMaxVersion(kmsg.FindCoordinator.Int16()); !ok {
			served = false
		}
		for _, k := range []kmsg.Key{kmsg.ConsumerGroupHeartbeat, kmsg.ConsumerGroupDescribe} {
			if _, ok := v.KeyMaxVersion(k.Int16()); !ok {
				kip848 = false
			}
		}
	})
	if !answered {
		t.Fatal("no broker answered ApiVersions")
	}
	if !served {
		t.Skip("the broker does not serve FindCoordinator (API key 10): consumer groups are not in yet; these tests run once they are")
	}
	return kip848
}

func TestIntegrationGroupClassic(t *testing.T) {
	addr := integrationBootstrap(t)
	requireGroupAPIs(t, addr)
	testGroupLifecycle(t, addr, "classic")
}

func TestIntegrationGroupConsumerProtocol(t *testing.T) {
	addr := integrationBootstrap(t)
	if !requireGroupAPIs(t, addr) {
		t.Skip("the broker does not serve ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848)")
	}
	testGroupLifecycle(t, addr, "consumer", kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
}

// groupDescribe runs `group describe --json` for one group.
func groupDescribe(t *testing.T, addr, group string) (groupDescription, error) {
	t.Helper()
	out, _, err := runCLI(t, "", "group", "describe", group, "--json", "-b", addr)
	var ds []groupDescription
	if jerr := json.Unmarshal([]byte(out), &ds); jerr != nil || len(ds) != 1 {
		t.Fatalf("describe --json: %v (%v)\n%s", jerr, err, out)
	}
	return ds[0], err
}

// committed maps partition to current offset.
func committed(d groupDescription) map[int32]int64 {
	m := map[int32]int64{}
	for _, r := range d.Offsets {
		m[r.Partition] = r.CurrentOffset
	}
	return m
}

// testGroupLifecycle: 100 records over two partitions with timestamps an hour
// ago, one second apart (record i to partition i%2); a group consumes and
// commits 40 of them; then list, describe, reset in every mode, and delete.
func testGroupLifecycle(t *testing.T, addr, wantType string, groupOpts ...kgo.Opt) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := uniqueTopic(t)
	group := topic + "-g"
	if _, _, err := runCLI(t, "", "topic", "create", topic, "--partitions", "2", "-b", addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runCLI(t, "", "topic", "delete", topic, "-b", addr) })

	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	opts := append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID("group-test"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
	}, groupOpts...)
	cons, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	consOpen := true
	defer func() {
		if consOpen {
			cons.Close()
		}
	}()
	var got []*kgo.Record
	for len(got) < 40 {
		fs := cons.PollRecords(ctx, 40-len(got))
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		fs.EachError(func(t2 string, p int32, err error) { t.Logf("poll %s/%d: %v", t2, p, err) })
		got = append(got, fs.Records()...)
	}
	if err := cons.CommitRecords(ctx, got...); err != nil {
		t.Fatal(err)
	}

	// With the consumer in the group.
	var d groupDescription
	poll.Until(t, 30*time.Second, func() error {
		d, err = groupDescribe(t, addr, group)
		if err != nil {
			return err
		}
		if !strings.EqualFold(d.State, "Stable") || len(d.Members) != 1 {
			return fmt.Errorf("state %s with %d members, want Stable with 1", d.State, len(d.Members))
		}
		return nil
	})
	if d.Type != wantType || d.TotalLag != 60 || len(d.Offsets) != 2 {
		t.Fatalf("describe: %+v, want type %s, total lag 60 over 2 partitions", d, wantType)
	}
	if m := d.Members[0]; m.ClientID != "group-test" || len(m.Assignment) != 1 || len(m.Assignment[0].Partitions) != 2 {
		t.Errorf("member %+v", m)
	}
	for _, r := range d.Offsets {
		if r.LogEndOffset != 50 || r.ClientID != "group-test" || r.ConsumerID != d.Members[0].ConsumerID {
			t.Errorf("row %+v", r)
		}
		if r.CurrentOffset < 0 {
			continue // nothing consumed from this partition
		}
		if r.Lag != 50-r.CurrentOffset {
			t.Errorf("row %+v: lag", r)
		}
		// The record at the commit was produced at base + (2*offset+partition) seconds.
		want := time.Since(base.Add(time.Duration(2*r.CurrentOffset+int64(r.Partition)) * time.Second))
		if age := time.Duration(r.OldestUnconsumedAgeMs) * time.Millisecond; age < want-time.Minute || age > want+time.Minute {
			t.Errorf("row %+v: oldest unconsumed age %s, want about %s", r, age, want)
		}
	}
	out, _, err := runCLI(t, "", "group", "describe", group, "-b", addr)
	if err != nil || !strings.Contains(out, "OLDEST-UNCONSUMED-AGE") || !strings.Contains(out, "State: Stable") || !strings.Contains(out, "group-test") {
		t.Errorf("describe: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "", "group", "describe", group, "--members", "-b", addr)
	if err != nil || !strings.Contains(out, topic+"(0,1)") {
		t.Errorf("describe --members: %v\n%s", err, out)
	}

	_, _, err = runCLI(t, "", "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", "-b", addr)
	if err == nil || !strings.Contains(err.Error(), "group "+group+" has 1 active member; stop it first (Kafka's rule") {
		t.Errorf("reset with an active member: %v", err)
	}
	_, _, err = runCLI(t, "", "group", "delete", group, "--yes", "-b", addr)
	if err == nil || !strings.Contains(err.Error(), "NON_EMPTY_GROUP") || !strings.Contains(err.Error(), "stop the group's consumers first") {
		t.Errorf("delete with an active member: %v", err)
	}

	cons.Close()
	consOpen = false
	poll.Until(t, 30*time.Second, func() error {
		if d, err = groupDescribe(t, addr, group); err != nil {
			return err
		}
		if !strings.EqualFold(d.State, "Empty") || len(d.Members) != 0 {
			return fmt.Errorf("state %s with %d members, want Empty", d.State, len(d.Members))
		}
		return nil
	})
	before := committed(d)

	out, _, err = runCLI(t, "", "group", "list", "--json", "-b", addr)
	var list []groupListEntry
	if err != nil || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if i := slices.IndexFunc(list, func(e groupListEntry) bool { return e.Group == group }); i < 0 {
		t.Errorf("list does not show %s: %+v", group, list)
	} else if e := list[i]; e.Type != wantType || !strings.EqualFold(e.State, "Empty") || e.Members != 0 {
		t.Errorf("list entry %+v", e)
	}
	out, _, err = runCLI(t, "", "group", "list", "--state", "Stable", "-b", addr)
	if err != nil || strings.Contains(out, group) {
		t.Errorf("list --state Stable shows the empty group: %v\n%s", err, out)
	}
	out, _, _ = runCLI(t, "", "group", "list", "--type", map[string]string{"classic": "consumer", "consumer": "classic"}[wantType], "-b", addr)
	if strings.Contains(out, group) {
		t.Errorf("list --type filters nothing:\n%s", out)
	}

	// reset runs: args, then the committed offsets wanted.
	reset := func(want map[int32]int64, args ...string) {
		t.Helper()
		out, errOut, err := runCLI(t, "", append([]string{"group", "reset-offsets", group, "--json", "-b", addr}, args...)...)
		if err != nil {
			t.Fatalf("reset %v: %v\n%s", args, err, errOut)
		}
		var res resetResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("reset %v: %v\n%s", args, err, out)
		}
		planned := map[int32]int64{}
		for _, r := range res.Offsets {
			planned[r.Partition] = r.NewOffset
			if r.OldOffset != before[r.Partition] || r.Topic != topic || r.Error != "" {
				t.Errorf("reset %v: row %+v, old offset want %d", args, r, before[r.Partition])
			}
		}
		execute := slices.Contains(args, "--execute")
		if res.Executed != execute || res.Group != group {
			t.Errorf("reset %v: %+v", args, res)
		}
		if !execute {
			if !strings.Contains(errOut, "Dry run") {
				t.Errorf("reset %v: stderr %q", args, errOut)
			}
			for p, o := range want {
				if planned[p] != o {
					t.Errorf("reset %v: planned %v, want %v", args, planned, want)
				}
			}
			return
		}
		d, err := groupDescribe(t, addr, group)
		if err != nil {
			t.Fatal(err)
		}
		now := committed(d)
		for p, o := range want {
			if now[p] != o || planned[p] != o {
				t.Errorf("reset %v: committed %v (planned %v), want %v", args, now, planned, want)
			}
		}
		before = now
	}

	reset(map[int32]int64{0: 0, 1: 0}, "--topic", topic, "--to-earliest")
	if d, _ := groupDescribe(t, addr, group); d.TotalLag != 60 {
		t.Errorf("a dry run changed the lag to %d", d.TotalLag)
	}
	reset(map[int32]int64{0: 0, 1: 0}, "--topic", topic, "--to-earliest", "--execute")
	if d, _ = groupDescribe(t, addr, group); d.TotalLag != 100 {
		t.Errorf("after --to-earliest: total lag %d, want 100", d.TotalLag)
	}
	reset(map[int32]int64{0: 10, 1: 10}, "--all-topics", "--shift-by", "10", "--execute")
	reset(map[int32]int64{0: 0, 1: 0}, "--topic", topic, "--shift-by", "-1000")
	reset(map[int32]int64{0: 50, 1: 50}, "--topic", topic, "--to-offset", "1000", "--dry-run")
	// Record 70 (partition 0, offset 35) is the first at base+70s; in
	// partition 1 it is record 71, offset 35 too.
	reset(map[int32]int64{0: 35, 1: 35}, "--topic", topic, "--to-datetime", base.Add(70*time.Second).UTC().Format("2006-01-02T15:04:05Z"), "--execute")
	reset(map[int32]int64{1: 5}, "--topic", topic+":1", "--to-offset", "5", "--execute")
	if d, _ = groupDescribe(t, addr, group); committed(d)[0] != 35 || d.TotalLag != 15+45 {
		t.Errorf("after resetting partition 1 only: %+v", d.Offsets)
	}
	reset(map[int32]int64{0: 50, 1: 50}, "--topic", topic, "--to-latest", "--execute")
	d, _ = groupDescribe(t, addr, group)
	for _, r := range d.Offsets {
		if r.Lag != 0 || r.OldestUnconsumedAgeMs != 0 {
			t.Errorf("caught up: %+v", r)
		}
	}

	_, _, err = runCLI(t, "", "group", "delete", group, "-b", addr)
	if err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("delete without --yes on a pipe: %v", err)
	}
	out, _, err = runCLI(t, "", "group", "delete", group, "--yes", "-b", addr)
	if err != nil || out != "Deleted group "+group+".\n" {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if d, err := groupDescribe(t, addr, group); err == nil || d.Error == "" || !strings.Contains(err.Error(), "no such group; see berth group list") {
		t.Errorf("describe after delete: %+v, %v", d, err)
	}
	_, _, err = runCLI(t, "", "group", "delete", group, "--yes", "-b", addr)
	if err == nil || !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
		t.Errorf("deleting it again: %v", err)
	}

	// Kafka's tool may reset a group that does not exist: the commit
	// creates it, Empty.
	fresh := group + "-new"
	if _, errOut, err := runCLI(t, "", "group", "reset-offsets", fresh, "--topic", topic+":0", "--to-offset", "3", "--execute", "-b", addr); err != nil {
		t.Fatalf("reset a new group: %v\n%s", err, errOut)
	}
	d, err = groupDescribe(t, addr, fresh)
	if err != nil || !strings.EqualFold(d.State, "Empty") || committed(d)[0] != 3 {
		t.Errorf("the new group: %+v, %v", d, err)
	}
	runCLI(t, "", "group", "delete", fresh, "--yes", "-b", addr)
}
