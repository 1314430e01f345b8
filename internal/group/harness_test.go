package group

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
)

// fakeStore keeps durable records per partition. Inline it completes
// writes inside Write; otherwise they wait for "store durable" or "store
// fail".
type fakeStore struct {
	mu      sync.Mutex
	inline  bool
	failErr error // with inline: fail every write
	log     map[int32][]Record
	pending []pendingWrite
	writes  int
}

func newFakeStore() *fakeStore { return &fakeStore{inline: true, log: make(map[int32][]Record)} }

func (s *fakeStore) Write(p int32, recs []Record, done func(error)) {
	s.mu.Lock()
	s.writes++
	if !s.inline {
		s.pending = append(s.pending, pendingWrite{p, recs, done})
		s.mu.Unlock()
		return
	}
	err := s.failErr
	if err == nil {
		s.log[p] = append(s.log[p], recs...)
	}
	s.mu.Unlock()
	done(err)
}

// complete finishes the pending writes in order, with err (nil: durable).
func (s *fakeStore) complete(err error) int {
	s.mu.Lock()
	ws := s.pending
	s.pending = nil
	if err == nil {
		for _, w := range ws {
			s.log[w.p] = append(s.log[w.p], w.recs...)
		}
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.done(err)
	}
	return len(ws)
}

// fakeTopics: t has 4 partitions, u 2; a topic's id is its name padded.
type fakeTopics map[string]int32

func (f fakeTopics) PartitionExists(topic string, p int32) bool {
	n, ok := f[topic]
	return ok && p >= 0 && p < n
}

func (f fakeTopics) TopicName(id [16]byte) (string, bool) {
	name := strings.TrimRight(string(id[:]), "\x00")
	_, ok := f[name]
	return name, ok
}

func (f fakeTopics) TopicID(name string) ([16]byte, bool) {
	var id [16]byte
	copy(id[:], name)
	_, ok := f[name]
	return id, ok
}

func (f fakeTopics) Topics() []TopicInfo {
	var out []TopicInfo
	for _, name := range slices.Sorted(maps.Keys(f)) {
		id, _ := f.TopicID(name)
		out = append(out, TopicInfo{Name: name, ID: id, Partitions: f[name]})
	}
	return out
}

// harness drives a Coordinator from datadriven commands.
type harness struct {
	t      *testing.T
	now    time.Time
	store  *fakeStore
	topics fakeTopics
	cfg    Config
	c      *Coordinator
	idSeq  int

	mu      sync.Mutex // guards out, members, gens, owned, subs (responses may arrive in callbacks)
	out     strings.Builder
	members map[string]string // alias -> member id
	gens    map[string]int32  // alias -> generation of its last join (a consumer group member's epoch)
	owned   map[string]assignment
	subs    map[string][]string // alias -> topics of a consumer group member's subscription
	regexes map[string]string   // alias -> a consumer group member's regex subscription
}

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, now: epoch, store: newFakeStore(), topics: fakeTopics{"t": 4, "u": 2},
		members: map[string]string{}, gens: map[string]int32{}, owned: map[string]assignment{}, subs: map[string][]string{}, regexes: map[string]string{}}
	return h
}

func (h *harness) newCoordinator() *Coordinator {
	cfg := h.cfg
	cfg.Now = func() time.Time { return h.now }
	cfg.NewMemberID = func(client string) string { h.idSeq++; return fmt.Sprintf("%s-%d", client, h.idSeq) }
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.ShareNewMemberID = func() string { h.idSeq++; return fmt.Sprintf("share-%d", h.idSeq) }
	cfg.OnShareMembersRemoved = func(g string, removed []ShareRemoval) {
		for _, r := range removed {
			h.printf("removed %s: %s (%s) had=%s", g, r.MemberID, r.Reason, shareTPs(r.Assigned))
		}
	}
	return New(cfg, h.store, h.topics)
}

// loadAll makes c own every partition, replaying the store's records.
func (h *harness) loadAll(c *Coordinator) {
	n := c.cfg.OffsetsTopicPartitions
	for p := int32(0); p < n; p++ {
		c.BeginLoad(p)
		h.store.mu.Lock()
		recs := slices.Clone(h.store.log[p])
		h.store.mu.Unlock()
		for _, r := range recs {
			c.LoadRecord(p, r.Key, r.Value)
		}
		c.FinishLoad(p)
	}
}

func (h *harness) printf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(&h.out, format+"\n", args...)
}

func code(c int16) string {
	if c == 0 {
		return "NONE"
	}
	if e := kerr.ErrorForCode(c); e != nil {
		var ke *kerr.Error
		if errors.As(e, &ke) {
			return ke.Message
		}
	}
	return strconv.Itoa(int(c))
}

func (h *harness) arg(d *datadriven.TestData, key, def string) string {
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

func (h *harness) args(d *datadriven.TestData, key string) []string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return a.Vals
		}
	}
	return nil
}

func (h *harness) dur(d *datadriven.TestData, key, def string) time.Duration {
	v, err := time.ParseDuration(h.arg(d, key, def))
	if err != nil {
		d.Fatalf(h.t, "%s: %v", key, err)
	}
	return v
}

func (h *harness) int(d *datadriven.TestData, key string, def int) int {
	v, err := strconv.Atoi(h.arg(d, key, strconv.Itoa(def)))
	if err != nil {
		d.Fatalf(h.t, "%s: %v", key, err)
	}
	return v
}

// memberID is the id a command sends for alias: id= wins, else the
// alias's last known id ("" before its first join).
func (h *harness) memberID(d *datadriven.TestData, alias string) string {
	if d.HasArg("id") {
		return h.arg(d, "id", "")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if id, ok := h.members[alias]; ok {
		return id
	}
	return alias // a name never joined: sent as is
}

func (h *harness) gen(d *datadriven.TestData, alias string, def int32) int32 {
	if d.HasArg("gen") {
		return int32(h.int(d, "gen", 0))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if g, ok := h.gens[alias]; ok {
		return g
	}
	return def
}

func ptr(s string) *string { return &s }

// short quotes s, or gives its length when long.
func short(s string) string {
	if len(s) > 16 {
		return fmt.Sprintf("<%d bytes>", len(s))
	}
	return strconv.Quote(s)
}

func subscription(topics []string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

// tpArgs are the "topic/partition[=value]" arguments.
func tpArgs(d *datadriven.TestData) (tps []topicPartition, vals []string) {
	for _, a := range d.CmdArgs {
		topic, p, ok := strings.Cut(a.Key, "/")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			panic(err)
		}
		tps = append(tps, topicPartition{topic, int32(n)})
		v := ""
		if len(a.Vals) > 0 {
			v = a.Vals[0]
		}
		vals = append(vals, v)
	}
	return tps, vals
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	h.t = t
	switch d.Cmd {
	case "new":
		h.cfg = Config{
			InitialRebalanceDelay:         h.dur(d, "delay", "3s"),
			MaxGroupSize:                  h.int(d, "max-size", 0),
			OffsetsRetention:              h.dur(d, "retention", "168h"),
			OffsetsRetentionCheckInterval: h.dur(d, "check", "10m"),
			OffsetsTopicPartitions:        int32(h.int(d, "partitions", 4)),
			ConsumerSessionTimeout:        h.dur(d, "cg-session", "45s"),
			ConsumerMaxGroupSize:          h.int(d, "cg-max-size", 0),
			ShareSessionTimeout:           h.dur(d, "share-session", "45s"),
			ShareMaxGroupSize:             h.int(d, "share-max-size", 200),
		}
		// A fresh store, topics and aliases: "reload" is for restarts.
		h.store = newFakeStore()
		h.topics = fakeTopics{"t": 4, "u": 2}
		h.mu.Lock()
		h.members, h.gens = map[string]string{}, map[string]int32{}
		h.owned, h.subs, h.regexes = map[string]assignment{}, map[string][]string{}, map[string]string{}
		h.mu.Unlock()
		h.c = h.newCoordinator()
		if !d.HasArg("noload") {
			h.loadAll(h.c)
		}
		return "ok"
	case "join":
		h.join(d)
	case "sync":
		h.sync(d)
	case "heartbeat":
		alias := h.arg(d, "member", "")
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = int16(h.int(d, "v", 4))
		req.Group = h.arg(d, "group", "g")
		req.MemberID = h.memberID(d, alias)
		req.Generation = h.gen(d, alias, -1)
		if d.HasArg("instance") {
			req.InstanceID = ptr(h.arg(d, "instance", ""))
		}
		resp := h.c.Heartbeat(req)
		h.printf("heartbeat %s: %s", alias, code(resp.ErrorCode))
	case "leave":
		h.leave(d)
	case "commit":
		h.commit(d)
	case "fetch":
		h.fetch(d)
	case "offset-delete":
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = h.arg(d, "group", "g")
		tps, _ := tpArgs(d)
		for _, tp := range tps {
			i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool { return t.Topic == tp.topic })
			if i < 0 {
				req.Topics = append(req.Topics, kmsg.OffsetDeleteRequestTopic{Topic: tp.topic})
				i = len(req.Topics) - 1
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: tp.partition})
		}
		h.c.OffsetDelete(req, func(resp *kmsg.OffsetDeleteResponse) {
			var parts []string
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					parts = append(parts, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, code(p.ErrorCode)))
				}
			}
			h.printf("offset-delete: %s %s", code(resp.ErrorCode), strings.Join(parts, " "))
		})
	case "delete-groups":
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = int16(h.int(d, "v", 2))
		req.Groups = h.args(d, "groups")
		h.c.DeleteGroups(req, func(resp *kmsg.DeleteGroupsResponse) {
			var parts []string
			for _, g := range resp.Groups {
				parts = append(parts, g.Group+"="+code(g.ErrorCode))
			}
			h.printf("delete-groups: %s", strings.Join(parts, " "))
		})
	case "describe":
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = int16(h.int(d, "v", 5))
		req.Groups = h.args(d, "groups")
		if req.Groups == nil {
			req.Groups = []string{"g"}
		}
		for _, g := range h.c.DescribeGroups(req).Groups {
			h.printf("describe %s: %s state=%s type=%s protocol=%s", g.Group, code(g.ErrorCode), g.State, g.ProtocolType, g.Protocol)
			for _, m := range g.Members {
				inst := ""
				if m.InstanceID != nil {
					inst = " instance=" + *m.InstanceID
				}
				var meta kmsg.ConsumerMemberMetadata
				topics := "-"
				if len(m.ProtocolMetadata) > 0 && meta.ReadFrom(m.ProtocolMetadata) == nil {
					topics = strings.Join(meta.Topics, ",")
				}
				if d.HasArg("decode") {
					var a kmsg.ConsumerMemberAssignment
					if err := a.ReadFrom(m.MemberAssignment); err == nil {
						var parts []string
						for _, t := range a.Topics {
							for _, p := range t.Partitions {
								parts = append(parts, fmt.Sprintf("%s/%d", t.Topic, p))
							}
						}
						h.printf("  %s client=%s%s topics=%s assigned=[%s]", m.MemberID, m.ClientID, inst, topics, strings.Join(parts, " "))
						continue
					}
				}
				h.printf("  %s client=%s%s topics=%s assignment=%q", m.MemberID, m.ClientID, inst, topics, m.MemberAssignment)
			}
		}
	case "list":
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = int16(h.int(d, "v", 5))
		req.StatesFilter = h.args(d, "states")
		req.TypesFilter = h.args(d, "types")
		resp := h.c.ListGroups(req)
		var parts []string
		for _, g := range resp.Groups {
			parts = append(parts, fmt.Sprintf("%s(%s,%s,%s)", g.Group, g.GroupState, g.ProtocolType, g.GroupType))
		}
		h.printf("list: %s %s", code(resp.ErrorCode), strings.Join(parts, " "))
	case "tick":
		step := d.CmdArgs[0].Key
		dd, err := time.ParseDuration(strings.TrimPrefix(step, "+"))
		if err != nil {
			d.Fatalf(t, "tick: %v", err)
		}
		// Advance in 1s steps (Start ticks every 100ms) so timers fire
		// near when they are due.
		for end := h.now.Add(dd); h.now.Before(end); {
			next := h.now.Add(time.Second)
			if next.After(end) {
				next = end
			}
			h.now = next
			h.c.Tick(h.now)
		}
		h.printf("now +%s", h.now.Sub(epoch))
	case "store":
		switch {
		case d.HasArg("durable"):
			h.printf("store: %d writes durable", h.store.complete(nil))
		case d.HasArg("fail"):
			h.printf("store: %d writes failed", h.store.complete(errors.New("disk on fire")))
		case d.HasArg("mode"):
			h.store.mu.Lock()
			switch m := h.arg(d, "mode", ""); m {
			case "inline":
				h.store.inline, h.store.failErr = true, nil
			case "manual":
				h.store.inline, h.store.failErr = false, nil
			case "fail-inline":
				h.store.inline, h.store.failErr = true, kerr.NotEnoughReplicas
			case "not-leader":
				h.store.inline, h.store.failErr = true, ErrNotCoordinator
			default:
				d.Fatalf(t, "store mode %q", m)
			}
			h.store.mu.Unlock()
			return "ok"
		}
	case "records":
		h.printRecords()
	case "reload":
		// A new coordinator (another node, or this one restarted) loads
		// the partitions from what the store made durable.
		h.c = h.newCoordinator()
		h.loadAll(h.c)
		h.printState(d)
	case "state":
		h.printState(d)
	case "load":
		p := int32(h.int(d, "p", -1))
		if d.HasArg("group") {
			p = metadata.PartitionForKey(h.arg(d, "group", ""), h.c.cfg.OffsetsTopicPartitions)
		}
		switch {
		case d.HasArg("begin"):
			h.c.BeginLoad(p)
		case d.HasArg("replay"):
			h.store.mu.Lock()
			recs := slices.Clone(h.store.log[p])
			h.store.mu.Unlock()
			for _, r := range recs {
				h.c.LoadRecord(p, r.Key, r.Value)
			}
		case d.HasArg("finish"):
			h.c.FinishLoad(p)
		case d.HasArg("unload"):
			h.c.Unload(p)
		}
		h.printf("partition %d", p)
	case "owns":
		g := h.arg(d, "group", "g")
		ok, loading := h.c.Owns(g)
		h.printf("owns %s (partition %d): ok=%v loading=%v", g, metadata.PartitionForKey(g, h.c.cfg.OffsetsTopicPartitions), ok, loading)
	default:
		if !h.runConsumer(d) && !h.runShare(d) {
			d.Fatalf(t, "unknown command %s", d.Cmd)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.out.String()
	h.out.Reset()
	if s == "" {
		return "(no response)\n"
	}
	return s
}

func (h *harness) join(d *datadriven.TestData) {
	alias := h.arg(d, "member", "")
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = int16(h.int(d, "v", 9))
	req.Group = h.arg(d, "group", "g")
	req.SessionTimeoutMillis = int32(h.dur(d, "session", "10s").Milliseconds())
	req.RebalanceTimeoutMillis = int32(h.dur(d, "rebalance", "30s").Milliseconds())
	req.ProtocolType = h.arg(d, "type", "consumer")
	h.mu.Lock()
	known, ok := h.members[alias]
	h.mu.Unlock()
	req.MemberID = ""
	if ok {
		req.MemberID = known
	}
	if d.HasArg("id") {
		req.MemberID = h.arg(d, "id", "")
	}
	if d.HasArg("instance") {
		req.InstanceID = ptr(h.arg(d, "instance", ""))
	}
	topics := h.args(d, "topics")
	if topics == nil {
		topics = []string{"t"}
	}
	protos := h.args(d, "protocols")
	if protos == nil {
		protos = []string{"range"}
	}
	if d.HasArg("noprotocols") {
		protos = nil
	}
	for _, p := range protos {
		req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: subscription(topics)})
	}
	client := h.arg(d, "client", alias)
	h.c.JoinGroup(req, client, "/10.0.0.1", func(resp *kmsg.JoinGroupResponse) {
		h.mu.Lock()
		if resp.MemberID != "" {
			h.members[alias] = resp.MemberID
		}
		if resp.ErrorCode == 0 {
			h.gens[alias] = resp.Generation
		}
		h.mu.Unlock()
		var b strings.Builder
		fmt.Fprintf(&b, "join %s: %s", alias, code(resp.ErrorCode))
		if resp.ErrorCode == 0 {
			proto := ""
			if resp.Protocol != nil {
				proto = *resp.Protocol
			}
			fmt.Fprintf(&b, " gen=%d member=%s leader=%s protocol=%s", resp.Generation, resp.MemberID, resp.LeaderID, proto)
			if resp.SkipAssignment {
				b.WriteString(" skip-assignment")
			}
			if len(resp.Members) > 0 {
				var ms []string
				for _, m := range resp.Members {
					ms = append(ms, m.MemberID)
				}
				fmt.Fprintf(&b, " members=[%s]", strings.Join(ms, " "))
			}
		} else if resp.MemberID != "" {
			fmt.Fprintf(&b, " member=%s", resp.MemberID)
		}
		h.printf("%s", b.String())
	})
}

func (h *harness) sync(d *datadriven.TestData) {
	alias := h.arg(d, "member", "")
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = int16(h.int(d, "v", 5))
	req.Group = h.arg(d, "group", "g")
	req.MemberID = h.memberID(d, alias)
	req.Generation = h.gen(d, alias, -1)
	if d.HasArg("instance") {
		req.InstanceID = ptr(h.arg(d, "instance", ""))
	}
	if d.HasArg("ptype") {
		req.ProtocolType = ptr(h.arg(d, "ptype", ""))
	}
	if d.HasArg("proto") {
		req.Protocol = ptr(h.arg(d, "proto", ""))
	}
	for _, a := range h.args(d, "assign") {
		who, what, _ := strings.Cut(a, ":")
		h.mu.Lock()
		id, ok := h.members[who]
		h.mu.Unlock()
		if !ok {
			id = who
		}
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(what)})
	}
	h.c.SyncGroup(req, func(resp *kmsg.SyncGroupResponse) {
		if resp.ErrorCode != 0 {
			h.printf("sync %s: %s", alias, code(resp.ErrorCode))
			return
		}
		h.printf("sync %s: NONE assignment=%q", alias, resp.MemberAssignment)
	})
}

func (h *harness) leave(d *datadriven.TestData) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = int16(h.int(d, "v", 5))
	req.Group = h.arg(d, "group", "g")
	for _, alias := range h.args(d, "member") {
		h.mu.Lock()
		id, ok := h.members[alias]
		h.mu.Unlock()
		if !ok {
			id = alias
		}
		req.Members = append(req.Members, kmsg.LeaveGroupRequestMember{MemberID: id})
	}
	for _, inst := range h.args(d, "instance") {
		// "inst" or "inst:alias" (with that alias's member id)
		i, alias, _ := strings.Cut(inst, ":")
		m := kmsg.LeaveGroupRequestMember{InstanceID: ptr(i)}
		if alias != "" {
			h.mu.Lock()
			m.MemberID = h.members[alias]
			h.mu.Unlock()
		}
		req.Members = append(req.Members, m)
	}
	if req.Version < 3 && len(req.Members) > 0 {
		req.MemberID = req.Members[0].MemberID
		req.Members = nil
	}
	h.c.LeaveGroup(req, func(resp *kmsg.LeaveGroupResponse) {
		var parts []string
		for _, m := range resp.Members {
			who := m.MemberID
			if m.InstanceID != nil {
				who += "/" + *m.InstanceID
			}
			parts = append(parts, who+"="+code(m.ErrorCode))
		}
		h.printf("leave: %s %s", code(resp.ErrorCode), strings.Join(parts, " "))
	})
}

func (h *harness) commit(d *datadriven.TestData) {
	alias := h.arg(d, "member", "")
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = int16(h.int(d, "v", 9))
	req.Group = h.arg(d, "group", "g")
	req.MemberID = ""
	req.Generation = -1
	if alias != "" {
		req.MemberID = h.memberID(d, alias)
		req.Generation = h.gen(d, alias, -1)
	} else if d.HasArg("gen") {
		req.Generation = int32(h.int(d, "gen", -1))
	}
	if d.HasArg("instance") {
		req.InstanceID = ptr(h.arg(d, "instance", ""))
	}
	if d.HasArg("retention") {
		req.RetentionTimeMillis = h.dur(d, "retention", "0s").Milliseconds()
	}
	meta := h.arg(d, "meta", "")
	if n := h.int(d, "meta-bytes", 0); n > 0 {
		meta = strings.Repeat("x", n)
	}
	tps, vals := tpArgs(d)
	for i, tp := range tps {
		off, ep, hasEpoch := strings.Cut(vals[i], "@")
		o, _ := strconv.ParseInt(off, 10, 64)
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.Metadata = tp.partition, o, ptr(meta)
		if hasEpoch {
			e, _ := strconv.Atoi(ep)
			p.LeaderEpoch = int32(e)
		}
		j := slices.IndexFunc(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return t.Topic == tp.topic })
		if j < 0 {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = tp.topic
			t.TopicID, _ = h.topics.TopicID(tp.topic)
			if req.Version >= 10 {
				copy(t.TopicID[:], tp.topic) // ids for unknown topics too
			}
			req.Topics = append(req.Topics, t)
			j = len(req.Topics) - 1
		}
		req.Topics[j].Partitions = append(req.Topics[j].Partitions, p)
	}
	h.c.OffsetCommit(req, func(resp *kmsg.OffsetCommitResponse) {
		var parts []string
		for _, t := range resp.Topics {
			name := t.Topic
			if req.Version >= 10 {
				name = strings.TrimRight(string(t.TopicID[:]), "\x00") + "(id)"
			}
			for _, p := range t.Partitions {
				parts = append(parts, fmt.Sprintf("%s/%d=%s", name, p.Partition, code(p.ErrorCode)))
			}
		}
		h.printf("commit: %s", strings.Join(parts, " "))
	})
}

func (h *harness) fetch(d *datadriven.TestData) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = int16(h.int(d, "v", 7))
	if d.HasArg("member") && !d.HasArg("v") {
		req.Version = 9
	}
	req.RequireStable = req.Version >= 7
	tps, _ := tpArgs(d)
	var topics []kmsg.OffsetFetchRequestGroupTopic
	for _, tp := range tps {
		j := slices.IndexFunc(topics, func(t kmsg.OffsetFetchRequestGroupTopic) bool { return t.Topic == tp.topic })
		if j < 0 {
			t := kmsg.NewOffsetFetchRequestGroupTopic()
			t.Topic = tp.topic
			copy(t.TopicID[:], tp.topic)
			topics = append(topics, t)
			j = len(topics) - 1
		}
		topics[j].Partitions = append(topics[j].Partitions, tp.partition)
	}
	groups := h.args(d, "groups")
	if groups == nil {
		groups = []string{h.arg(d, "group", "g")}
	}
	fmtPart := func(topic string, p int32, off int64, epoch int32, meta *string, ec int16) string {
		s := fmt.Sprintf("%s/%d=%d", topic, p, off)
		if epoch >= 0 {
			s += fmt.Sprintf("@%d", epoch)
		}
		if meta != nil && *meta != "" {
			s += "(" + short(*meta) + ")"
		}
		if ec != 0 {
			s += ":" + code(ec)
		}
		return s
	}
	if req.Version >= 8 {
		for _, g := range groups {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group, rg.Topics = g, topics
			if alias := h.arg(d, "member", ""); alias != "" {
				id := h.memberID(d, alias)
				rg.MemberID, rg.MemberEpoch = &id, h.gen(d, alias, -1)
			}
			req.Groups = append(req.Groups, rg)
		}
		for _, g := range h.c.OffsetFetch(req).Groups {
			var parts []string
			for _, t := range g.Topics {
				name := t.Topic
				if req.Version >= 10 {
					name = strings.TrimRight(string(t.TopicID[:]), "\x00") + "(id)"
				}
				for _, p := range t.Partitions {
					parts = append(parts, fmtPart(name, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode))
				}
			}
			h.printf("fetch %s: %s %s", g.Group, code(g.ErrorCode), strings.Join(parts, " "))
		}
		return
	}
	req.Group = groups[0]
	for _, t := range topics {
		req.Topics = append(req.Topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
	}
	resp := h.c.OffsetFetch(req)
	var parts []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, fmtPart(t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode))
		}
	}
	h.printf("fetch %s: %s %s", req.Group, code(resp.ErrorCode), strings.Join(parts, " "))
}

// printState prints every group's state, members and offsets from the
// inside, plus the Groups/Committed snapshots' view.
func (h *harness) printState(d *datadriven.TestData) {
	only := h.arg(d, "group", "")
	for _, g := range h.c.snapshot() {
		if only != "" && g.id != only {
			continue
		}
		g.mu.Lock()
		if g.isShare() {
			h.printShareState(g)
			g.mu.Unlock()
			continue
		}
		if g.isConsumer() {
			h.printConsumerState(g)
			g.mu.Unlock()
			continue
		}
		h.printf("%s: %s gen=%d type=%s protocol=%s leader=%s rebalances=%d", g.id, g.state, g.generation, g.protocolType, g.protocol, g.leader, g.rebalances)
		for _, m := range g.ordered() {
			inst := ""
			if m.instanceID != nil {
				inst = " instance=" + *m.instanceID
			}
			h.printf("  member %s client=%s%s session=%s rebalance=%s assignment=%q", m.id, m.clientID, inst, m.sessionTimeout, m.rebalanceTimeout, m.assignment)
		}
		for _, id := range slices.Sorted(maps.Keys(g.pending)) {
			h.printf("  pending %s until +%s", id, g.pending[id].Sub(epoch))
		}
		for _, tp := range slices.SortedFunc(maps.Keys(g.offsets), compareTP) {
			o := g.offsets[tp]
			h.printf("  offset %s/%d=%d epoch=%d meta=%s committed=+%s", tp.topic, tp.partition, o.offset, o.leaderEpoch, short(o.metadata), time.UnixMilli(o.commitMillis).Sub(epoch))
		}
		g.mu.Unlock()
	}
	if only == "" && len(h.c.snapshot()) == 0 {
		h.printf("(no groups)")
	}
}

func (h *harness) printRecords() {
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(h.store.log)) {
		for _, r := range h.store.log[p] {
			if isShareRecordKey(r.Key) {
				h.printfLocked("p%d: %s", p, shareRecord(r))
				continue
			}
			k, err := decodeKey(r.Key)
			if err != nil {
				h.printfLocked("p%d: %v", p, err)
				continue
			}
			if k.typ >= recConsumerMetadata {
				h.printfLocked("p%d: %s", p, h.consumerRecord(k, r.Value))
				continue
			}
			switch {
			case k.isOffset && r.Value == nil:
				h.printfLocked("p%d: offset %s %s/%d tombstone", p, k.group, k.tp.topic, k.tp.partition)
			case k.isOffset:
				o, err := decodeOffsetValue(r.Value)
				if err != nil {
					h.printfLocked("p%d: %v", p, err)
					continue
				}
				h.printfLocked("p%d: offset %s %s/%d v%d=%d epoch=%d meta=%s expire=%d", p, k.group, k.tp.topic, k.tp.partition, int16(r.Value[0])<<8|int16(r.Value[1]), o.offset, o.leaderEpoch, short(o.metadata), o.expireMillis)
			case r.Value == nil:
				h.printfLocked("p%d: group %s tombstone", p, k.group)
			default:
				v, err := decodeGroupValue(r.Value)
				if err != nil {
					h.printfLocked("p%d: %v", p, err)
					continue
				}
				var ms []string
				for _, m := range v.Members {
					ms = append(ms, fmt.Sprintf("%s:%q", m.MemberID, m.Assignment))
				}
				proto, leader := "", ""
				if v.Protocol != nil {
					proto = *v.Protocol
				}
				if v.Leader != nil {
					leader = *v.Leader
				}
				h.printfLocked("p%d: group %s v%d gen=%d type=%s protocol=%s leader=%s members=[%s]", p, k.group, v.Version, v.Generation, v.ProtocolType, proto, leader, strings.Join(ms, " "))
			}
		}
	}
}

func (h *harness) printfLocked(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(&h.out, format+"\n", args...)
}

// TestDataDriven runs the scripts in testdata/ (not its subdirectories:
// testdata/sharegroup holds the scripts of the share group membership
// state machine, run by TestShareMembershipDataDriven and
// TestShareAssignDataDriven). Regenerate the expected output with
// -rewrite.
func TestDataDriven(t *testing.T) {
	paths, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		if fi, err := os.Stat(path); err != nil || fi.IsDir() {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			h := newHarness(t)
			datadriven.RunTest(t, path, h.run)
		})
	}
}
