package group

// OffsetCommit (versions 0-10), OffsetFetch (0-10, multi-group from v8)
// and OffsetDelete (0), plus offset expiry. Commits are applied in memory
// only once the Store made them durable. Members of KIP-848 consumer
// groups commit with their member epoch (v9+) and fetch with their member
// id and epoch (v9+): STALE_MEMBER_EPOCH when it is not the current one.
// RequireStable (v7+): a partition with transactional offsets pending
// (txn_offsets.go) answers UNSTABLE_OFFSET_COMMIT, which clients retry.

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitItem is one partition of an OffsetCommit that passed validation.
type commitItem struct {
	ti, pi int
	tp     topicPartition
	o      offset
}

// commitTopic is the name of a committed topic given by name, or by id
// when byID (OffsetCommit v10+, TxnOffsetCommit v6+), with
// UNKNOWN_TOPIC_ID for an id the cluster does not know.
func (c *Coordinator) commitTopic(byID bool, name string, id [16]byte) (string, int16) {
	if !byID {
		return name, 0
	}
	if n, ok := c.topics.TopicName(id); ok {
		return n, 0
	}
	return name, kerr.UnknownTopicID.Code
}

// commitCode is the error code of one partition's commit, 0 when it may
// be committed: the topic's code, an unknown partition, metadata too
// large.
func (c *Coordinator) commitCode(topic string, topicCode int16, partition int32, meta string) int16 {
	switch {
	case topicCode != 0:
		return topicCode
	case !c.topics.PartitionExists(topic, partition):
		return kerr.UnknownTopicOrPartition.Code
	case len(meta) > c.cfg.MaxMetadataBytes:
		return kerr.OffsetMetadataTooLarge.Code
	}
	return 0
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// OffsetCommit serves an OffsetCommit request; respond is called once the
// offsets are durable (or the write failed).
func (c *Coordinator) OffsetCommit(req *kmsg.OffsetCommitRequest, respond func(*kmsg.OffsetCommitResponse)) {
	now := c.cfg.Now()
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	var items []commitItem
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, topicCode := c.commitTopic(req.Version >= 10, t.Topic, t.TopicID)
		for pi, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			meta := derefString(p.Metadata)
			if rp.ErrorCode = c.commitCode(name, topicCode, p.Partition, meta); rp.ErrorCode == 0 {
				o := offset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: meta, commitMillis: now.UnixMilli()}
				if req.Version < 6 {
					o.leaderEpoch = -1
				}
				if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis > 0 {
					o.expireMillis = o.commitMillis + req.RetentionTimeMillis
				}
				items = append(items, commitItem{ti: ti, pi: pi, tp: topicPartition{name, p.Partition}, o: o})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	setAll := func(code int16) {
		for _, it := range items {
			resp.Topics[it.ti].Partitions[it.pi].ErrorCode = code
		}
	}
	if len(items) == 0 {
		respond(resp)
		return
	}
	g, code := c.acquire(req.Group, req.Generation < 0)
	if code != 0 {
		setAll(code)
		respond(resp)
		return
	}
	if g == nil {
		// Not a group we know, and not a simple (generation -1) commit:
		// a member of a generation long gone.
		setAll(kerr.IllegalGeneration.Code)
		respond(resp)
		return
	}
	var f fx
	defer c.release(g, &f)
	if code := c.validateCommit(g, req); code != 0 {
		setAll(code)
		f.add(func() { respond(resp) })
		return
	}
	if m := g.members[req.MemberID]; m != nil {
		m.lastHeartbeat = now
	}
	g.nextSeq++
	seq := g.nextSeq
	recs := make([]Record, 0, len(items))
	for i := range items {
		items[i].o.seq = seq
		g.pendingCommits[items[i].tp]++
		recs = append(recs, offsetRecord(g.id, items[i].tp, items[i].o))
	}
	c.write(g.partition, recs, func(err error) {
		g.mu.Lock()
		for _, it := range items {
			// Stores may finish writes out of order: an older commit
			// never replaces a newer one, nor undoes a later delete.
			if err == nil && !g.removed && seq > g.deletedAt[it.tp] {
				if cur, ok := g.offsets[it.tp]; !ok || cur.seq <= seq {
					g.offsets[it.tp] = it.o
				}
			}
			if g.pendingCommits[it.tp]--; g.pendingCommits[it.tp] <= 0 {
				delete(g.pendingCommits, it.tp)
				delete(g.deletedAt, it.tp)
			}
		}
		g.mu.Unlock()
		if err != nil {
			c.log.Warn("writing offset commit failed", "group", g.id, "err", err)
			setAll(storeErrorCode(err, true))
		}
		respond(resp)
	})
}

// validateCommit is Kafka's doCommitOffsets checks, in Kafka's order.
func (c *Coordinator) validateCommit(g *group, req *kmsg.OffsetCommitRequest) int16 {
	if g.isShare() {
		return kerr.GroupIDNotFound.Code // share groups commit no offsets
	}
	if g.isConsumer() {
		return c.validateConsumerCommit(g, req)
	}
	switch {
	case g.state == stateDead:
		return kerr.CoordinatorNotAvailable.Code
	case req.Generation < 0 && g.state == stateEmpty:
		return 0 // offsets-only group: simple consumers, admin resets
	case g.state == stateCompletingRebalance:
		return kerr.RebalanceInProgress.Code
	case g.fenced(req.InstanceID, req.MemberID):
		return kerr.FencedInstanceID.Code
	case g.members[req.MemberID] == nil:
		return kerr.UnknownMemberID.Code
	case req.Generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// validateConsumerCommit is Kafka's ConsumerGroup.validateOffsetCommit:
// the generation of a commit is the member epoch (OffsetCommit v9+), which
// must be the member's current one. Simple commits (generation -1) are
// accepted while the group has no members.
func (c *Coordinator) validateConsumerCommit(g *group, req *kmsg.OffsetCommitRequest) int16 {
	cg := g.cg
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if req.Generation < 0 && len(cg.members) == 0 {
		return 0
	}
	m := cg.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case req.Version < 9:
		// Kafka: members of the consumer protocol commit with v9+.
		return kerr.UnsupportedVersion.Code
	case req.Generation != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// validateConsumerFetch is Kafka's ConsumerGroup.validateOffsetFetch
// (OffsetFetch v9+): a fetch that names a member must carry its current
// epoch; admin fetches name none.
func validateConsumerFetch(g *group, memberID *string, memberEpoch int32) int16 {
	if memberID == nil && memberEpoch < 0 {
		return 0
	}
	var m *cmember
	if memberID != nil {
		m = g.cg.members[*memberID]
	}
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case memberEpoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// fetchTopic is one topic asked for, or answered, by OffsetFetch.
type fetchTopic struct {
	name  string
	id    [16]byte
	code  int16 // for every partition (UNKNOWN_TOPIC_ID)
	parts []fetchPartition
}

type fetchPartition struct {
	partition int32
	o         offset
	code      int16
}

// OffsetFetch serves an OffsetFetch request (v0-10; v8+ for many groups).
func (c *Coordinator) OffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var ask []fetchTopic
			for _, t := range rg.Topics {
				ft := fetchTopic{name: t.Topic, id: t.TopicID}
				if req.Version >= 10 {
					if n, ok := c.topics.TopicName(t.TopicID); ok {
						ft.name = n
					} else {
						ft.code = kerr.UnknownTopicID.Code
					}
				}
				for _, p := range t.Partitions {
					ft.parts = append(ft.parts, fetchPartition{partition: p})
				}
				ask = append(ask, ft)
			}
			out := kmsg.NewOffsetFetchResponseGroup()
			out.Group = rg.Group
			var memberID *string
			memberEpoch := int32(-1)
			if req.Version >= 9 {
				memberID, memberEpoch = rg.MemberID, rg.MemberEpoch
			}
			code, got := c.fetchGroup(rg.Group, ask, rg.Topics == nil, req.Version >= 10, memberID, memberEpoch)
			if req.RequireStable {
				c.markUnstable(rg.Group, got)
			}
			out.ErrorCode = code
			for _, ft := range got {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic, rt.TopicID = ft.name, ft.id
				for _, fp := range ft.parts {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.ErrorCode = fp.partition, fp.code
					rp.Offset, rp.LeaderEpoch = fp.o.offset, fp.o.leaderEpoch
					meta := fp.o.metadata
					rp.Metadata = &meta
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
			resp.Groups = append(resp.Groups, out)
		}
		return resp
	}
	var ask []fetchTopic
	for _, t := range req.Topics {
		ft := fetchTopic{name: t.Topic}
		for _, p := range t.Partitions {
			ft.parts = append(ft.parts, fetchPartition{partition: p})
		}
		ask = append(ask, ft)
	}
	all := req.Topics == nil && req.Version >= 2
	code, got := c.fetchGroup(req.Group, ask, all, false, nil, -1)
	if req.Version >= 7 && req.RequireStable {
		c.markUnstable(req.Group, got)
	}
	if code != 0 {
		if req.Version >= 2 {
			resp.ErrorCode = code
			return resp
		}
		// v0-1 have no group error: every partition carries it.
		got = ask
		for i := range got {
			for j := range got[i].parts {
				got[i].parts[j] = fetchPartition{partition: got[i].parts[j].partition, o: noOffset, code: code}
			}
		}
	}
	for _, ft := range got {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = ft.name
		for _, fp := range ft.parts {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = fp.partition, fp.code
			rp.Offset, rp.LeaderEpoch = fp.o.offset, fp.o.leaderEpoch
			meta := fp.o.metadata
			rp.Metadata = &meta
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// noOffset is what a partition without a committed offset answers.
var noOffset = offset{offset: -1, leaderEpoch: -1}

// fetchGroup answers the topics asked (or all with all) from a group's
// committed offsets; withIDs fills topic ids for v10. A consumer group
// checks the member id and epoch of v9+ (classic groups ignore them).
func (c *Coordinator) fetchGroup(id string, ask []fetchTopic, all, withIDs bool, memberID *string, memberEpoch int32) (int16, []fetchTopic) {
	g, code := c.acquire(id, false)
	if code != 0 {
		return code, nil
	}
	var offsets map[topicPartition]offset
	if g != nil {
		if g.isConsumer() && g.state != stateDead {
			code = validateConsumerFetch(g, memberID, memberEpoch)
		}
		if g.isShare() {
			code = kerr.GroupIDNotFound.Code // share groups commit no offsets
		}
		if g.state != stateDead {
			offsets = maps.Clone(g.offsets)
		}
		g.mu.Unlock()
	}
	if code != 0 {
		return code, nil
	}
	if !all {
		for i := range ask {
			for j := range ask[i].parts {
				fp := &ask[i].parts[j]
				fp.o, fp.code = noOffset, ask[i].code
				if o, ok := offsets[topicPartition{ask[i].name, fp.partition}]; ok && fp.code == 0 {
					fp.o = o
				}
			}
		}
		return 0, ask
	}
	byTopic := make(map[string][]fetchPartition)
	for tp, o := range offsets {
		byTopic[tp.topic] = append(byTopic[tp.topic], fetchPartition{partition: tp.partition, o: o})
	}
	var out []fetchTopic
	for _, name := range slices.Sorted(maps.Keys(byTopic)) {
		ft := fetchTopic{name: name, parts: byTopic[name]}
		if withIDs {
			var ok bool
			if ft.id, ok = c.topics.TopicID(name); !ok {
				continue // a deleted topic has no id to answer with
			}
		}
		slices.SortFunc(ft.parts, func(a, b fetchPartition) int { return cmp.Compare(a.partition, b.partition) })
		out = append(out, ft)
	}
	return 0, out
}

// OffsetDelete serves an OffsetDelete request (KIP-496): offsets of an
// Empty group, or of topics a consumer group is not subscribed to.
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest, respond func(*kmsg.OffsetDeleteResponse)) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	g, code := c.acquire(req.Group, false)
	if code != 0 {
		resp.ErrorCode = code
		respond(resp)
		return
	}
	if g == nil {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		respond(resp)
		return
	}
	var f fx
	defer c.release(g, &f)
	subscribed := func(string) bool { return false }
	switch {
	case g.state == stateDead || g.isShare():
		resp.ErrorCode = kerr.GroupIDNotFound.Code
	case g.state == stateEmpty:
	default:
		if g.protocolType != consumerProtocolType {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			break
		}
		topics, ok := g.subscribedTopics()
		subscribed = func(t string) bool { return !ok || topics[t] }
	}
	if resp.ErrorCode != 0 {
		f.add(func() { respond(resp) })
		return
	}
	type item struct{ ti, pi int }
	var items []item
	var tps []topicPartition
	var recs []Record
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for pi, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			tp := topicPartition{t.Topic, p.Partition}
			switch {
			case !c.topics.PartitionExists(t.Topic, p.Partition):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case subscribed(t.Topic):
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				_, has := g.offsets[tp]
				if has || g.pendingCommits[tp] > 0 {
					items = append(items, item{ti, pi})
					tps = append(tps, tp)
					recs = append(recs, offsetTombstone(g.id, tp))
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) == 0 {
		f.add(func() { respond(resp) })
		return
	}
	g.nextSeq++
	seq := g.nextSeq
	c.write(g.partition, recs, func(err error) {
		g.mu.Lock()
		if err == nil {
			for _, tp := range tps {
				if o, ok := g.offsets[tp]; ok && o.seq < seq {
					delete(g.offsets, tp)
				}
				if g.pendingCommits[tp] > 0 {
					g.deletedAt[tp] = max(g.deletedAt[tp], seq)
				}
			}
		}
		g.mu.Unlock()
		if err != nil {
			c.log.Warn("writing offset tombstones failed", "group", g.id, "err", err)
			for _, it := range items {
				resp.Topics[it.ti].Partitions[it.pi].ErrorCode = storeErrorCode(err, false)
			}
		}
		respond(resp)
	})
}

const consumerProtocolType = "consumer"

// subscribedTopics is the union of the members' subscriptions, decoded
// from their consumer protocol metadata; ok is false when any cannot be
// decoded (then every topic counts as subscribed, as in Kafka).
func (g *group) subscribedTopics() (map[string]bool, bool) {
	if g.isConsumer() {
		// Kafka's isSubscribedToTopic: named topics and regex matches.
		topics := make(map[string]bool)
		for name := range g.cg.topics {
			topics[name] = true
		}
		for _, m := range g.cg.members {
			for _, t := range m.topics {
				topics[t] = true
			}
		}
		return topics, true
	}
	if g.protocol == "" {
		return nil, false
	}
	topics := make(map[string]bool)
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil, false
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics, true
}

// expireOffsets deletes offsets past offsets.retention.minutes, only while
// the group is Empty (KIP-211: counted from when it became Empty, or from
// the commit if later), then deletes an Empty group left without offsets.
// Expiry for topics a Stable group no longer subscribes to (KIP-496's
// second half) is not done.
func (c *Coordinator) expireOffsets(g *group, now time.Time, f *fx) {
	if g.state != stateEmpty || g.isShare() {
		return
	}
	nowMs := now.UnixMilli()
	retention := c.cfg.OffsetsRetention.Milliseconds()
	var recs []Record
	for _, tp := range slices.SortedFunc(maps.Keys(g.offsets), compareTP) {
		o := g.offsets[tp]
		if g.pendingCommits[tp] > 0 {
			continue
		}
		var expired bool
		if o.expireMillis > 0 {
			expired = nowMs >= o.expireMillis
		} else {
			base := o.commitMillis
			if !g.stateSince.IsZero() {
				base = max(base, g.stateSince.UnixMilli())
			}
			expired = nowMs-base >= retention
		}
		if expired {
			delete(g.offsets, tp)
			recs = append(recs, offsetTombstone(g.id, tp))
		}
	}
	if len(recs) > 0 {
		c.log.Info("expired offsets", "group", g.id, "count", len(recs))
	}
	if len(g.offsets) == 0 && len(g.pendingCommits) == 0 && len(g.members) == 0 && len(g.pending) == 0 {
		g.transition(stateDead, now)
		switch {
		case g.isConsumer():
			recs = append(recs, g.cg.tombstones(g.id)...)
		case g.persisted || g.generation > 0:
			recs = append(recs, groupTombstone(g.id))
		}
		c.log.Info("deleting empty group without offsets", "group", g.id)
	}
	if len(recs) > 0 {
		c.write(g.partition, recs, func(err error) {
			if err != nil {
				c.log.Warn("writing expiry tombstones failed", "group", g.id, "err", err)
			}
		})
	}
}

func compareTP(a, b topicPartition) int {
	if a.topic != b.topic {
		if a.topic < b.topic {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.partition, b.partition)
}
