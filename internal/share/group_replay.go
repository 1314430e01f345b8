package share

// Rebuilding share groups from their __consumer_offsets records, as a
// coordinator taking over a partition does. Records are replayed in log
// order (the latest record for a key wins, a tombstone deletes); Finish
// builds the groups. A group exists while its ShareGroupMetadata record
// does; member records of a group without one are dropped. Loaded
// members keep their epochs and assignments (they go on heartbeating as
// if nothing happened) and their sessions start at the load.

import (
	"maps"
	"slices"
	"time"
)

// GroupLoader replays share group records. Its zero value is not usable;
// see NewGroupLoader.
type GroupLoader struct {
	groups map[string]*loadingGroup
}

// loadingGroup is what the records replayed so far say about one group.
type loadingGroup struct {
	meta        *groupEpochValue
	targetEpoch int32
	members     map[string]*groupMemberValue
	targets     map[string]GroupAssignment
	current     map[string]*groupCurrentValue
}

// NewGroupLoader returns an empty loader.
func NewGroupLoader() *GroupLoader { return &GroupLoader{groups: make(map[string]*loadingGroup)} }

// Add replays one record. A record that does not decode returns an error
// wrapping ErrCorruptGroupRecord and changes nothing (the caller logs it
// and goes on); record types Berth does not read (9, 15) are ignored.
func (l *GroupLoader) Add(r GroupRecord) error {
	k, err := decodeGroupKey(r.Key)
	if err != nil {
		return err
	}
	var v any
	if r.Value != nil {
		if v, err = decodeGroupValue(k.typ, r.Value); err != nil {
			return err
		}
	}
	lg := l.groups[k.group]
	if lg == nil {
		lg = &loadingGroup{
			members: make(map[string]*groupMemberValue),
			targets: make(map[string]GroupAssignment),
			current: make(map[string]*groupCurrentValue),
		}
		l.groups[k.group] = lg
	}
	tomb := r.Value == nil
	switch k.typ {
	case groupRecMetadata:
		if tomb {
			lg.meta = nil
		} else {
			m := v.(groupEpochValue)
			lg.meta = &m
		}
	case groupRecTargetMeta:
		lg.targetEpoch = 0
		if !tomb {
			lg.targetEpoch = v.(int32)
		}
	case groupRecMember:
		delete(lg.members, k.member)
		if !tomb {
			lg.members[k.member] = v.(*groupMemberValue)
		}
	case groupRecTarget:
		delete(lg.targets, k.member)
		if !tomb {
			lg.targets[k.member] = v.(GroupAssignment)
		}
	case groupRecCurrent:
		delete(lg.current, k.member)
		if !tomb {
			lg.current[k.member] = v.(*groupCurrentValue)
		}
	}
	return nil
}

// Finish builds the groups replayed (those whose metadata record is
// live), sorted by id; their members' sessions start at now.
func (l *GroupLoader) Finish(cfg GroupConfig, topics GroupTopics, now time.Time) []*ShareGroup {
	var out []*ShareGroup
	for _, id := range slices.Sorted(maps.Keys(l.groups)) {
		lg := l.groups[id]
		if lg.meta == nil {
			continue
		}
		g := NewShareGroup(id, cfg, topics)
		g.epoch, g.metadataHash = lg.meta.epoch, lg.meta.hash
		g.assignmentEpoch = lg.targetEpoch
		for mid, mv := range lg.members {
			m := &groupMember{
				id: mid, rackID: mv.rackID, clientID: mv.clientID, clientHost: mv.clientHost,
				topics: mv.topics, assigned: make(GroupAssignment), lastHeartbeat: now,
			}
			if cv := lg.current[mid]; cv != nil {
				m.epoch, m.prevEpoch, m.assigned = cv.epoch, cv.prevEpoch, cv.assigned
			}
			g.members[mid] = m
			g.target[mid] = lg.targets[mid]
			if g.target[mid] == nil {
				g.target[mid] = make(GroupAssignment)
			}
		}
		g.resolve() // names the subscribed topics for Describe
		out = append(out, g)
	}
	return out
}
