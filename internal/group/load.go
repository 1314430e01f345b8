package group

// Ownership of __consumer_offsets partitions. A partition being loaded
// answers COORDINATOR_LOAD_IN_PROGRESS; one this node does not own
// answers by what the metadata says of it (Config.Leader, NotOwnedError):
// NOT_COORDINATOR only when another node leads it. Loading replays the partition's records
// in log order into a buffer (latest record per key wins, tombstones
// delete), and FinishLoad turns the buffer into groups: classic groups
// from their GroupMetadata record, consumer groups from their KIP-848
// records, share groups from theirs (key versions 9-15, replayed by a
// shareLoader).

import (
	"bytes"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadingGroup is what the records replayed so far say about one group.
type loadingGroup struct {
	meta     *kmsg.GroupMetadataValue
	offsets  map[topicPartition]offset
	consumer *loadingConsumer // KIP-848 records (key versions 3-8)
	// consumerLast: the latest group record was a consumer group's (a
	// group converted from one protocol to the other has both).
	consumerLast bool
}

// loadingConsumer is what the consumer group records replayed so far say.
type loadingConsumer struct {
	epoch           *int32 // nil: no live ConsumerGroupMetadata record
	assignmentEpoch int32
	members         map[string]*memberMetaValue
	targets         map[string]assignment
	current         map[string]*currentValue
}

func newLoadingConsumer() *loadingConsumer {
	return &loadingConsumer{
		members: make(map[string]*memberMetaValue),
		targets: make(map[string]assignment),
		current: make(map[string]*currentValue),
	}
}

// BeginLoad marks partition p owned and loading. If p was already loaded,
// its groups are dropped first and rebuilt from the records replayed.
func (c *Coordinator) BeginLoad(p int32) {
	var f fx
	c.mu.Lock()
	c.dropPartition(p, &f)
	c.parts[p] = &offsetsPartition{loading: true, loaded: make(map[string]*loadingGroup), shares: newShareLoader()}
	c.mu.Unlock()
	f.run()
}

// LoadRecord replays one record of partition p, in log order. Records of
// a partition not loading are ignored; records that do not decode are
// logged and skipped (so it returns nil: it implements
// replica.Coordinator, whose loader logs what others return).
func (c *Coordinator) LoadRecord(p int32, key, value []byte) error {
	c.loadRecord(p, Record{Key: key, Value: value})
	return nil
}

func (c *Coordinator) loadRecord(p int32, r Record) {
	if isShareRecordKey(r.Key) {
		c.loadShareRecord(p, r)
		return
	}
	if isTxnOffsetKey(r.Key) {
		c.loadTxnOffset(p, r)
		return
	}
	k, err := decodeKey(r.Key)
	if err != nil {
		c.log.Warn("skipping __consumer_offsets record", "partition", p, "err", err)
		return
	}
	var (
		o    offset
		meta *kmsg.GroupMetadataValue
		cv   any // a decoded consumer group value
	)
	if r.Value != nil {
		switch {
		case k.isOffset:
			o, err = decodeOffsetValue(r.Value)
		case k.typ == 2:
			meta, err = decodeGroupValue(r.Value)
		default:
			cv, err = decodeConsumerValue(k.typ, r.Value)
		}
		if err != nil {
			c.log.Warn("skipping __consumer_offsets record", "partition", p, "group", k.group, "err", err)
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.parts[p]
	if ps == nil || !ps.loading {
		c.log.Warn("record for a partition not loading", "partition", p)
		return
	}
	lg := ps.loaded[k.group]
	if lg == nil {
		lg = &loadingGroup{offsets: make(map[topicPartition]offset)}
		ps.loaded[k.group] = lg
	}
	switch {
	case k.isOffset && r.Value == nil:
		delete(lg.offsets, k.tp)
	case k.isOffset:
		lg.offsets[k.tp] = o
	case k.typ == 2:
		lg.meta = meta // nil for a tombstone
		if meta != nil {
			lg.consumerLast = false
		}
	default:
		lg.loadConsumer(k, cv)
	}
}

// decodeConsumerValue decodes the value of a consumer group record.
func decodeConsumerValue(typ int16, b []byte) (any, error) {
	switch typ {
	case recConsumerMetadata, recConsumerTargetMeta:
		return decodeEpochValue(b)
	case recConsumerMember:
		return decodeMemberMetaValue(b)
	case recConsumerTarget:
		return decodeTargetValue(b)
	case recConsumerCurrent:
		return decodeCurrentValue(b)
	}
	return nil, nil // ConsumerGroupPartitionMetadata: not needed
}

// loadConsumer replays one consumer group record (v nil: a tombstone).
func (lg *loadingGroup) loadConsumer(k decodedKey, v any) {
	if lg.consumer == nil {
		lg.consumer = newLoadingConsumer()
	}
	lc := lg.consumer
	switch k.typ {
	case recConsumerMetadata:
		if v == nil {
			lc.epoch = nil
			return
		}
		e := v.(int32)
		lc.epoch = &e
		lg.consumerLast = true
	case recConsumerTargetMeta:
		lc.assignmentEpoch = 0
		if v != nil {
			lc.assignmentEpoch = v.(int32)
		}
	case recConsumerMember:
		if v == nil {
			delete(lc.members, k.member)
		} else {
			lc.members[k.member] = v.(*memberMetaValue)
		}
	case recConsumerTarget:
		if v == nil {
			delete(lc.targets, k.member)
		} else {
			lc.targets[k.member] = v.(assignment)
		}
	case recConsumerCurrent:
		if v == nil {
			delete(lc.current, k.member)
		} else {
			lc.current[k.member] = v.(*currentValue)
		}
	}
}

// FinishLoad ends the load of p: its groups are served from now on. A
// group with members comes back Stable with fresh sessions, so members
// that are gone expire after their session timeout.
func (c *Coordinator) FinishLoad(p int32) {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.parts[p]
	if ps == nil || !ps.loading {
		return
	}
	var topics []TopicInfo
	if c.topics != nil {
		topics = c.topics.Topics()
	}
	shares := ps.shares.Finish(c.shareConfig(""), groupTopics{c}, now)
	for _, sg := range shares {
		sg.Reconfigure(c.shareConfig(sg.ID()))
	}
	for id, lg := range ps.loaded {
		consumer := lg.consumer != nil && lg.consumer.epoch != nil && (lg.meta == nil || lg.consumerLast)
		if lg.meta == nil && len(lg.offsets) == 0 && !consumer {
			continue
		}
		if consumer {
			lg.meta = nil
		}
		g := loadGroup(id, p, lg, now)
		if consumer {
			c.loadConsumerGroup(g, lg.consumer, topics, now)
		}
		c.groups[id] = g
	}
	for _, sg := range shares {
		if old := c.groups[sg.ID()]; old != nil && (old.persisted || old.isConsumer()) {
			// Both a classic or consumer group and a share group: the
			// log was not written by one coordinator. Keep the other.
			c.log.Warn("share group records beside another group's; ignoring them", "partition", p, "group", sg.ID())
			continue
		}
		g := newGroup(sg.ID(), p, time.Time{})
		if old := c.groups[sg.ID()]; old != nil {
			g = old // offsets only (Kafka keeps none for share groups)
		}
		loadShareGroup(g, sg)
		c.groups[sg.ID()] = g
	}
	ps.loading, ps.loaded, ps.shares = false, nil, nil
}

func loadGroup(id string, p int32, lg *loadingGroup, now time.Time) *group {
	g := newGroup(id, p, time.Time{})
	for tp, o := range lg.offsets {
		g.offsets[tp] = o
	}
	v := lg.meta
	if v == nil {
		return g // offsets only: an Empty group
	}
	g.persisted = true
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.CurrentStateTimestamp > 0 {
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, vm := range v.Members {
		if g.members[vm.MemberID] != nil {
			continue // a corrupt record; Kafka's map keeps one too
		}
		m := &member{
			id:               vm.MemberID,
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			protocolType:     v.ProtocolType,
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			protocols:        []protocol{{name: g.protocol, metadata: bytes.Clone(vm.Subscription)}},
			assignment:       bytes.Clone(vm.Assignment),
			lastHeartbeat:    now,
		}
		if vm.RebalanceTimeoutMillis <= 0 { // value v0 has none
			m.rebalanceTimeout = m.sessionTimeout
		}
		if vm.InstanceID != nil {
			inst := *vm.InstanceID
			m.instanceID = &inst
		}
		g.add(m)
	}
	g.protocolType = v.ProtocolType
	if len(g.members) > 0 {
		g.state = stateStable
		if v.Leader != nil && g.members[*v.Leader] != nil {
			g.leader = *v.Leader
		}
	}
	return g
}

// loadConsumerGroup makes g a consumer group from its records. Members
// come back with their epochs and assignments, their sessions (and the
// rebalance timeouts of those revoking) starting now, so clients carry on
// heartbeating to the new coordinator without rejoining.
func (c *Coordinator) loadConsumerGroup(g *group, lc *loadingConsumer, topics []TopicInfo, now time.Time) {
	cg := newConsumerGroup()
	g.cg = cg
	g.persisted = true
	g.protocolType = consumerProtocolType
	cg.epoch, cg.assignmentEpoch = *lc.epoch, lc.assignmentEpoch
	for _, id := range slices.Sorted(maps.Keys(lc.members)) {
		v := lc.members[id]
		m := &cmember{
			id: id, instanceID: v.instanceID, rackID: v.rackID, clientID: v.clientID, clientHost: v.clientHost,
			topics:           slices.Compact(slices.Sorted(slices.Values(v.topics))),
			rebalanceTimeout: time.Duration(v.rebalanceTimeoutMs) * time.Millisecond,
			lastHeartbeat:    now,
		}
		if v.regex != nil && *v.regex != "" {
			m.regex = *v.regex
			m.re, _ = regexp.Compile("^(?:" + m.regex + ")$") // nil (matches nothing) if it no longer compiles
		}
		if v.assignor != nil {
			m.assignor = *v.assignor
		}
		next := memberAssign{assigned: make(assignment), revoking: make(assignment)}
		if cur := lc.current[id]; cur != nil {
			next = memberAssign{epoch: cur.epoch, prevEpoch: cur.prevEpoch, state: cur.state, assigned: cur.assigned, revoking: cur.revoking}
		}
		m.memberAssign = memberAssign{assigned: make(assignment), revoking: make(assignment)}
		cg.setAssign(m, next)
		if m.state == memberUnrevoked {
			m.revokeDeadline = now.Add(m.rebalanceTimeout)
		}
		cg.members[id] = m
		cg.target[id] = lc.targets[id]
		if cg.target[id] == nil {
			cg.target[id] = make(assignment)
		}
		if m.instanceID != nil {
			cg.static[*m.instanceID] = id
		}
	}
	if topics != nil {
		cg.topics = resolveTopicsFrom(cg, topics)
		cg.topicsAt = now
	}
	cg.assignor = c.preferredAssignor(cg)
	g.state = stateEmpty
	if len(cg.members) > 0 {
		g.state = stateStable
	}
}

// loadShareRecord replays one share group record of partition p.
func (c *Coordinator) loadShareRecord(p int32, r Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.parts[p]
	if ps == nil || !ps.loading {
		c.log.Warn("record for a partition not loading", "partition", p)
		return
	}
	if err := ps.shares.Add(r); err != nil {
		c.log.Warn("skipping __consumer_offsets record", "partition", p, "err", err)
	}
}

// Unload gives up partition p (lost leadership): its groups are dropped
// and their waiting joins and syncs answered NOT_COORDINATOR.
func (c *Coordinator) Unload(p int32) {
	var f fx
	c.mu.Lock()
	c.dropPartition(p, &f)
	delete(c.parts, p)
	c.mu.Unlock()
	f.run()
}

// dropPartition removes p's groups; c.mu is held.
func (c *Coordinator) dropPartition(p int32, f *fx) {
	for id, g := range c.groups {
		if g.partition != p {
			continue
		}
		g.mu.Lock()
		c.failWaiters(g, kerr.NotCoordinator.Code, f)
		g.state = stateDead
		g.removed = true
		g.mu.Unlock()
		delete(c.groups, id)
	}
}
