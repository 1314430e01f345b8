package group

// Ownership of __consumer_offsets partitions. A partition this node does
// not own answers NOT_COORDINATOR; one being loaded answers
// COORDINATOR_LOAD_IN_PROGRESS. Loading replays the partition's records
// in log order into a buffer (latest record per key wins, tombstones
// delete), and FinishLoad turns the buffer into groups.

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadingGroup is what the records replayed so far say about one group.
type loadingGroup struct {
	meta    *kmsg.GroupMetadataValue
	offsets map[topicPartition]offset
}

// BeginLoad marks partition p owned and loading. If p was already loaded,
// its groups are dropped first and rebuilt from the records replayed.
func (c *Coordinator) BeginLoad(p int32) {
	var f fx
	c.mu.Lock()
	c.dropPartition(p, &f)
	c.parts[p] = &offsetsPartition{loading: true, loaded: make(map[string]*loadingGroup)}
	c.mu.Unlock()
	f.run()
}

// LoadRecord replays one record of partition p, in log order. Records of
// a partition not loading are ignored; records that do not decode are
// logged and skipped.
func (c *Coordinator) LoadRecord(p int32, r Record) {
	k, err := decodeKey(r.Key)
	if err != nil {
		c.log.Warn("skipping __consumer_offsets record", "partition", p, "err", err)
		return
	}
	var (
		o    offset
		meta *kmsg.GroupMetadataValue
	)
	if r.Value != nil {
		if k.isOffset {
			o, err = decodeOffsetValue(r.Value)
		} else {
			meta, err = decodeGroupValue(r.Value)
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
	default:
		lg.meta = meta // nil for a tombstone
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
	for id, lg := range ps.loaded {
		if lg.meta == nil && len(lg.offsets) == 0 {
			continue
		}
		c.groups[id] = loadGroup(id, p, lg, now)
	}
	ps.loading, ps.loaded = false, nil
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
