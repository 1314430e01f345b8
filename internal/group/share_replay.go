package group

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

// shareLoader replays share group records. Its zero value is not usable;
// see newShareLoader.
type shareLoader struct {
	groups map[string]*loadingShare
}

// loadingShare is what the records replayed so far say about one group.
type loadingShare struct {
	meta        *shareEpochValue
	targetEpoch int32
	members     map[string]*shareMemberValue
	targets     map[string]shareAssignment
	current     map[string]*shareCurrentValue
}

// newShareLoader returns an empty loader.
func newShareLoader() *shareLoader { return &shareLoader{groups: make(map[string]*loadingShare)} }

// Add replays one record. A record that does not decode returns an error
// wrapping errCorruptShareRecord and changes nothing (the caller logs it
// and goes on); record types Berth does not read (9, 15) are ignored.
func (l *shareLoader) Add(r Record) error {
	k, err := decodeShareKey(r.Key)
	if err != nil {
		return err
	}
	var v any
	if r.Value != nil {
		if v, err = decodeShareValue(k.typ, r.Value); err != nil {
			return err
		}
	}
	lg := l.groups[k.group]
	if lg == nil {
		lg = &loadingShare{
			members: make(map[string]*shareMemberValue),
			targets: make(map[string]shareAssignment),
			current: make(map[string]*shareCurrentValue),
		}
		l.groups[k.group] = lg
	}
	tomb := r.Value == nil
	switch k.typ {
	case shareRecMetadata:
		if tomb {
			lg.meta = nil
		} else {
			m := v.(shareEpochValue)
			lg.meta = &m
		}
	case shareRecTargetMeta:
		lg.targetEpoch = 0
		if !tomb {
			lg.targetEpoch = v.(int32)
		}
	case shareRecMember:
		delete(lg.members, k.member)
		if !tomb {
			lg.members[k.member] = v.(*shareMemberValue)
		}
	case shareRecTarget:
		delete(lg.targets, k.member)
		if !tomb {
			lg.targets[k.member] = v.(shareAssignment)
		}
	case shareRecCurrent:
		delete(lg.current, k.member)
		if !tomb {
			lg.current[k.member] = v.(*shareCurrentValue)
		}
	}
	return nil
}

// Finish builds the groups replayed (those whose metadata record is
// live), sorted by id; their members' sessions start at now.
func (l *shareLoader) Finish(cfg shareGroupConfig, topics shareTopics, now time.Time) []*shareMembership {
	var out []*shareMembership
	for _, id := range slices.Sorted(maps.Keys(l.groups)) {
		lg := l.groups[id]
		if lg.meta == nil {
			continue
		}
		g := newShareMembership(id, cfg, topics)
		g.epoch, g.metadataHash = lg.meta.epoch, lg.meta.hash
		g.assignmentEpoch = lg.targetEpoch
		for mid, mv := range lg.members {
			m := &shareMember{
				id: mid, rackID: mv.rackID, clientID: mv.clientID, clientHost: mv.clientHost,
				topics: mv.topics, assigned: make(shareAssignment), lastHeartbeat: now,
			}
			if cv := lg.current[mid]; cv != nil {
				m.epoch, m.prevEpoch, m.assigned = cv.epoch, cv.prevEpoch, cv.assigned
			}
			g.members[mid] = m
			g.target[mid] = lg.targets[mid]
			if g.target[mid] == nil {
				g.target[mid] = make(shareAssignment)
			}
		}
		g.resolve() // names the subscribed topics for Describe
		out = append(out, g)
	}
	return out
}
