package group

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareFakeTopics: a topic's id is its name, zero padded.
type shareFakeTopics map[string]int32

func (f shareFakeTopics) GroupTopic(name string) (shareTopic, bool) {
	n, ok := f[name]
	return shareTopic{Name: name, ID: shareFakeID(name), Partitions: n}, ok
}

func shareFakeID(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	return id
}

func shareFakeName(id [16]byte) string { return strings.TrimRight(string(id[:]), "\x00") }

// shareGroupTPs prints an assignment as topic/partition, sorted.
func shareGroupTPs(a shareAssignment) string {
	var parts []string
	for _, id := range slices.SortedFunc(maps.Keys(a), func(x, y [16]byte) int { return strings.Compare(shareFakeName(x), shareFakeName(y)) }) {
		for _, p := range a[id] {
			parts = append(parts, fmt.Sprintf("%s/%d", shareFakeName(id), p))
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

var shareEpoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// shareMembershipHarness drives one shareMembership from datadriven commands:
//
//	config [session=45s] [interval=5s] [max=N]   a new group (group "g")
//	topic name=t partitions=N                    (0 deletes the topic)
//	hb member=a [join|leave] [epoch=N] [topics=(t,u)] [id=X|noid] [v=0]
//	   [rack=r] [client=c] [group=g] [why]
//	tick +10s                                    advance the clock, then Expire
//	state | describe | records | snapshot
//	failover                                     replay the log into a new group, compare, use it
//	delete | undo-delete
//
// A member's id is its alias unless id= or noid (v0: the group names it).
// Without join or leave a heartbeat uses the alias' last epoch and sends
// no subscription unless topics= is given; a join subscribes to (t)
// unless topics= says otherwise.
type shareMembershipHarness struct {
	t      *testing.T
	now    time.Time
	topics shareFakeTopics
	cfg    shareGroupConfig
	g      *shareMembership
	idSeq  int

	log     []Record // every record written
	printed int      // records already printed
	ids     map[string]string
	epochs  map[string]int32
	clients map[string]string
}

func newShareMembershipHarness(t *testing.T) *shareMembershipHarness {
	h := &shareMembershipHarness{t: t, now: shareEpoch0, topics: shareFakeTopics{"t": 4, "u": 2},
		ids: map[string]string{}, epochs: map[string]int32{}, clients: map[string]string{}}
	h.configure(defaultShareGroupConfig())
	return h
}

func (h *shareMembershipHarness) configure(cfg shareGroupConfig) {
	cfg.NewMemberID = func() string { h.idSeq++; return fmt.Sprintf("m%d", h.idSeq) }
	if err := cfg.Validate(); err != nil {
		h.t.Fatal(err)
	}
	h.cfg = cfg
	h.g = newShareMembership("g", cfg, h.topics)
	h.log, h.printed = nil, 0
}

func shareArg(d *datadriven.TestData, key, def string) string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			if len(a.Vals) == 0 {
				return ""
			}
			return a.Vals[0]
		}
	}
	return def
}

func shareArgs(d *datadriven.TestData, key string) []string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return a.Vals
		}
	}
	return nil
}

func (h *shareMembershipHarness) int(d *datadriven.TestData, key string, def int) int {
	v, err := strconv.Atoi(shareArg(d, key, strconv.Itoa(def)))
	if err != nil {
		d.Fatalf(h.t, "%s: %v", key, err)
	}
	return v
}

func (h *shareMembershipHarness) dur(d *datadriven.TestData, key string, def time.Duration) time.Duration {
	s := shareArg(d, key, "")
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(h.t, "%s: %v", key, err)
	}
	return v
}

func shareCode(c int16) string {
	if c == 0 {
		return "NONE"
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(c), &ke) {
		return ke.Message
	}
	return strconv.Itoa(int(c))
}

func (h *shareMembershipHarness) apply(ch shareChange) string {
	h.log = append(h.log, ch.Records...)
	var b strings.Builder
	for _, r := range ch.Removed {
		fmt.Fprintf(&b, "removed %s (%s) had %s\n", r.MemberID, r.Reason, shareGroupTPs(r.Assigned))
	}
	return b.String()
}

func (h *shareMembershipHarness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "config":
		cfg := defaultShareGroupConfig()
		cfg.SessionTimeout = h.dur(d, "session", cfg.SessionTimeout)
		cfg.HeartbeatInterval = h.dur(d, "interval", cfg.HeartbeatInterval)
		cfg.MaxSize = h.int(d, "max", cfg.MaxSize)
		h.configure(cfg)
		return "ok"
	case "topic":
		name := shareArg(d, "name", "")
		if n := h.int(d, "partitions", 0); n > 0 {
			h.topics[name] = int32(n)
		} else {
			delete(h.topics, name)
		}
		return "ok"
	case "hb":
		return h.heartbeat(d)
	case "tick":
		v, err := time.ParseDuration(strings.TrimPrefix(d.CmdArgs[0].Key, "+"))
		if err != nil {
			d.Fatalf(t, "tick: %v", err)
		}
		h.now = h.now.Add(v)
		out := h.apply(h.g.Expire(h.now))
		return out + fmt.Sprintf("now +%s", h.now.Sub(shareEpoch0))
	case "state":
		return h.state(h.g)
	case "describe":
		return shareDescribeString(h.g.Describe())
	case "records":
		var b strings.Builder
		for _, r := range h.log[h.printed:] {
			b.WriteString(shareRecordString(r))
			b.WriteByte('\n')
		}
		h.printed = len(h.log)
		if b.Len() == 0 {
			return "(none)"
		}
		return b.String()
	case "snapshot":
		var b strings.Builder
		for _, r := range h.g.Snapshot() {
			b.WriteString(shareRecordString(r))
			b.WriteByte('\n')
		}
		return b.String()
	case "failover":
		return h.failover()
	case "create":
		ch := h.g.Create()
		h.log = append(h.log, ch.Records...)
		return fmt.Sprintf("create: %d records state=%s exists=%t", len(ch.Records), h.g.State(), h.g.Exists())
	case "delete":
		recs, code := h.g.Delete()
		h.log = append(h.log, recs...)
		return fmt.Sprintf("delete: %s state=%s", shareCode(code), h.g.State())
	case "undo-delete":
		h.g.UndoDelete()
		return "state=" + h.g.State()
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
		return ""
	}
}

func (h *shareMembershipHarness) heartbeat(d *datadriven.TestData) string {
	alias := shareArg(d, "member", "")
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = int16(h.int(d, "v", 1))
	req.GroupID = shareArg(d, "group", "g")
	id, ok := h.ids[alias]
	if !ok {
		id = alias
	}
	switch {
	case d.HasArg("id"):
		id = shareArg(d, "id", "")
	case d.HasArg("noid"):
		id = ""
	}
	req.MemberID = id
	switch {
	case d.HasArg("join"):
		req.MemberEpoch = 0
		req.SubscribedTopicNames = []string{"t"}
	case d.HasArg("leave"):
		req.MemberEpoch = shareLeaveEpoch
	default:
		req.MemberEpoch = h.epochs[alias]
	}
	if d.HasArg("epoch") {
		req.MemberEpoch = int32(h.int(d, "epoch", 0))
	}
	if d.HasArg("topics") {
		req.SubscribedTopicNames = []string{}
		for _, t := range shareArgs(d, "topics") {
			if t != "" {
				req.SubscribedTopicNames = append(req.SubscribedTopicNames, t)
			}
		}
	}
	if d.HasArg("rack") {
		rack := shareArg(d, "rack", "")
		req.RackID = &rack
	}
	if d.HasArg("client") {
		h.clients[alias] = shareArg(d, "client", "")
	}
	client := shareClient{ID: alias, Host: "/10.0.0.1"}
	if c, ok := h.clients[alias]; ok {
		client.ID = c
	}
	resp, ch := h.g.Heartbeat(req, client, h.now)
	var b strings.Builder
	fmt.Fprintf(&b, "hb %s: %s", alias, shareCode(resp.ErrorCode))
	if resp.ErrorCode == 0 {
		if resp.MemberID != nil && *resp.MemberID != alias {
			fmt.Fprintf(&b, " member=%s", *resp.MemberID)
		}
		fmt.Fprintf(&b, " epoch=%d", resp.MemberEpoch)
		if resp.Assignment != nil {
			a := make(shareAssignment)
			for _, t := range resp.Assignment.TopicPartitions {
				for _, p := range t.Partitions {
					a.add(t.TopicID, p)
				}
			}
			fmt.Fprintf(&b, " assigned=%s", shareGroupTPs(a))
		}
		if resp.HeartbeatIntervalMillis != 5000 {
			fmt.Fprintf(&b, " interval=%dms", resp.HeartbeatIntervalMillis)
		}
		if resp.MemberID != nil && req.MemberEpoch >= 0 {
			h.ids[alias] = *resp.MemberID
			h.epochs[alias] = resp.MemberEpoch
		}
	} else {
		if len(ch.Records) > 0 || len(ch.Removed) > 0 {
			h.t.Fatalf("failed heartbeat changed the group: %+v", ch)
		}
		if resp.ErrorMessage != nil && d.HasArg("why") {
			fmt.Fprintf(&b, " (%s)", *resp.ErrorMessage)
		}
	}
	b.WriteByte('\n')
	b.WriteString(h.apply(ch))
	return b.String()
}

// state prints the group from the inside.
func (h *shareMembershipHarness) state(g *shareMembership) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s epoch=%d assignment-epoch=%d exists=%t\n", g.id, g.State(), g.epoch, g.assignmentEpoch, g.Exists())
	for _, m := range g.ordered() {
		rack := ""
		if m.rackID != nil {
			rack = " rack=" + *m.rackID
		}
		fmt.Fprintf(&b, "  %s topics=%s%s epoch=%d prev=%d assigned=%s target=%s seen=-%s\n", m.id, strings.Join(m.topics, ","), rack,
			m.epoch, m.prevEpoch, shareGroupTPs(m.assigned), shareGroupTPs(g.target[m.id]), h.now.Sub(m.lastHeartbeat))
	}
	return b.String()
}

func shareDescribeString(rg kmsg.ShareGroupDescribeResponseGroup) string {
	var b strings.Builder
	if rg.ErrorCode != 0 {
		msg := ""
		if rg.ErrorMessage != nil {
			msg = " (" + *rg.ErrorMessage + ")"
		}
		return fmt.Sprintf("describe %s: %s%s\n", rg.GroupID, shareCode(rg.ErrorCode), msg)
	}
	fmt.Fprintf(&b, "describe %s: state=%s epoch=%d assignment-epoch=%d assignor=%s\n", rg.GroupID, rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor)
	for _, m := range rg.Members {
		var parts []string
		for _, t := range m.Assignment.TopicPartitions {
			if t.Topic != shareFakeName(t.TopicID) {
				parts = append(parts, "BADNAME")
			}
			for _, p := range t.Partitions {
				parts = append(parts, fmt.Sprintf("%s/%d", t.Topic, p))
			}
		}
		slices.Sort(parts)
		rack := ""
		if m.RackID != nil {
			rack = " rack=" + *m.RackID
		}
		fmt.Fprintf(&b, "  %s epoch=%d client=%s host=%s%s topics=%s assigned=[%s]\n", m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost, rack,
			strings.Join(m.SubscribedTopicNames, ","), strings.Join(parts, " "))
	}
	return b.String()
}

// shareRecordString decodes a record for "records".
func shareRecordString(r Record) string {
	k, err := decodeShareKey(r.Key)
	if err != nil {
		return err.Error()
	}
	names := map[int16]string{
		shareRecMember: "member", shareRecMetadata: "epoch", shareRecTargetMeta: "target-epoch",
		shareRecTarget: "target", shareRecCurrent: "current",
	}
	s := fmt.Sprintf("%d %s %s", k.typ, k.group, names[k.typ])
	if k.member != "" {
		s += " " + k.member
	}
	if r.Value == nil {
		return s + " tombstone"
	}
	v, err := decodeShareValue(k.typ, r.Value)
	if err != nil {
		return s + " " + err.Error()
	}
	switch v := v.(type) {
	case shareEpochValue:
		return fmt.Sprintf("%s=%d hash=%t", s, v.epoch, v.hash != 0)
	case int32:
		return fmt.Sprintf("%s=%d", s, v)
	case *shareMemberValue:
		rack := "-"
		if v.rackID != nil {
			rack = *v.rackID
		}
		return fmt.Sprintf("%s client=%s host=%s rack=%s topics=%s", s, v.clientID, v.clientHost, rack, strings.Join(v.topics, ","))
	case shareAssignment:
		return s + " " + shareGroupTPs(v)
	case *shareCurrentValue:
		return fmt.Sprintf("%s epoch=%d prev=%d state=%d assigned=%s", s, v.epoch, v.prevEpoch, v.state, shareGroupTPs(v.assigned))
	}
	return s
}

// failover replays every record written into a new group, as a
// coordinator taking over the partition does, checks that it equals the
// live group (but for sessions, which restart at the load) and carries
// on with it.
func (h *shareMembershipHarness) failover() string {
	l := newShareLoader()
	for _, r := range h.log {
		if err := l.Add(r); err != nil {
			h.t.Fatalf("replay: %v", err)
		}
	}
	gs := l.Finish(h.cfg, h.topics, h.now)
	var b strings.Builder
	switch {
	case len(gs) == 0 && h.g.Exists():
		b.WriteString("replay: group missing\n")
	case len(gs) == 0:
		b.WriteString("replay: no group\n")
		h.g = newShareMembership("g", h.cfg, h.topics)
	default:
		replayed := gs[0]
		for _, m := range h.g.members {
			m.lastHeartbeat = h.now // sessions restart at the load
		}
		live, got := h.state(h.g), h.state(replayed)
		live += shareDescribeString(h.g.Describe())
		got += shareDescribeString(replayed.Describe())
		if live != got || replayed.metadataHash != h.g.metadataHash {
			fmt.Fprintf(&b, "replay differs:\nlive:\n%sreplayed:\n%s", live, got)
		} else {
			b.WriteString("replay: equal\n")
		}
		h.g = replayed
	}
	return b.String()
}

// TestShareMembershipDataDriven runs testdata/sharegroup/group_*.
// Regenerate the expected output with -rewrite.
func TestShareMembershipDataDriven(t *testing.T) {
	paths, err := filepath.Glob("testdata/sharegroup/group_*")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no testdata/sharegroup/group_* files")
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h := newShareMembershipHarness(t)
			datadriven.RunTest(t, path, h.run)
		})
	}
}
