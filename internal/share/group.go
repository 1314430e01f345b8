package share

// Share group membership (KIP-932): the members of one share group, their
// subscriptions, the group epoch, the target assignment (the simple
// assignor, assign.go) and each member's epoch and assignment. It is a
// deterministic state machine with no I/O: ShareGroupHeartbeat
// (group_heartbeat.go), session expiry (Expire), ShareGroupDescribe
// (group_describe.go) and deletion change it and return the
// __consumer_offsets records to write (group_records.go); a coordinator
// taking over the partition rebuilds the group from them
// (group_replay.go).
//
// A ShareGroup is not safe for concurrent use: its owner (the group
// coordinator) serializes the calls, under the group's lock, and writes
// the returned records before it answers.
//
// Share groups have no revocation protocol. A member's assignment simply
// changes at its next heartbeat, which moves it to the assignment epoch;
// records it still holds on a partition it lost stay acquired until it
// acknowledges them or their locks expire. A member that leaves or whose
// session expires is reported (GroupRemoval) so that the share partitions
// release its records at once.

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Broker settings of share group membership (Kafka's names).
const (
	BrokerGroupSessionTimeoutMs    = "group.share.session.timeout.ms"
	BrokerGroupHeartbeatIntervalMs = "group.share.heartbeat.interval.ms"
	BrokerGroupMaxSize             = "group.share.max.size"
)

// ErrInvalidGroupConfig is returned by GroupConfig.Validate.
var ErrInvalidGroupConfig = errors.New("share: invalid share group config")

// GroupConfig holds the membership settings of share groups.
type GroupConfig struct {
	// SessionTimeout: a member that does not heartbeat for this long is
	// removed (group.share.session.timeout.ms, 45 s).
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told to heartbeat at
	// (group.share.heartbeat.interval.ms, 5 s).
	HeartbeatInterval time.Duration
	// MaxSize bounds the members of a group (group.share.max.size, 200).
	MaxSize int
	// NewMemberID names a member that joins without an id (only
	// ShareGroupHeartbeat v0 may); nil: a random UUID.
	NewMemberID func() string
}

// DefaultGroupConfig returns Kafka's defaults.
func DefaultGroupConfig() GroupConfig {
	return GroupConfig{SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, MaxSize: 200}
}

// Validate checks c.
func (c GroupConfig) Validate() error {
	switch {
	case c.SessionTimeout <= 0:
		return fmt.Errorf("%w: %s must be positive", ErrInvalidGroupConfig, BrokerGroupSessionTimeoutMs)
	case c.HeartbeatInterval <= 0:
		return fmt.Errorf("%w: %s must be positive", ErrInvalidGroupConfig, BrokerGroupHeartbeatIntervalMs)
	case c.HeartbeatInterval >= c.SessionTimeout:
		return fmt.Errorf("%w: %s must be less than %s", ErrInvalidGroupConfig, BrokerGroupHeartbeatIntervalMs, BrokerGroupSessionTimeoutMs)
	case c.MaxSize < 1:
		return fmt.Errorf("%w: %s must be at least 1", ErrInvalidGroupConfig, BrokerGroupMaxSize)
	}
	return nil
}

func (c GroupConfig) newMemberID() string {
	if c.NewMemberID != nil {
		return c.NewMemberID()
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// GroupTopics looks topics up by name in the cluster's metadata (a
// snapshot; it is called with the group's owner's lock held and must not
// call back into the group).
type GroupTopics interface {
	GroupTopic(name string) (GroupTopic, bool)
}

// GroupClient is who sent a request.
type GroupClient struct {
	ID, Host string
}

// GroupRemoval is a member that left the group or whose session expired:
// the share partitions release what it holds.
type GroupRemoval struct {
	MemberID string
	Reason   string // "left", "session expired"
	// Assigned is what the member was last told it has.
	Assigned GroupAssignment
}

// GroupChange is what a call changed: the records to write to the
// group's __consumer_offsets partition (in order, before answering), and
// the members removed.
type GroupChange struct {
	Records []GroupRecord
	Removed []GroupRemoval
}

func (c *GroupChange) add(recs ...GroupRecord) { c.Records = append(c.Records, recs...) }

// Group states (ShareGroupDescribe's GroupState, ListGroups' state).
const (
	GroupStateEmpty  = "Empty"
	GroupStateStable = "Stable"
	GroupStateDead   = "Dead"
)

// GroupTypeShare is the group type ListGroups reports.
const GroupTypeShare = "share"

// groupMember is one member of a share group.
type groupMember struct {
	id         string
	rackID     *string
	clientID   string
	clientHost string
	topics     []string // SubscribedTopicNames, sorted and unique

	epoch, prevEpoch int32
	assigned         GroupAssignment // what the member was last told

	lastHeartbeat time.Time // starts the session
}

// ShareGroup is one share group's membership and assignment.
type ShareGroup struct {
	id     string
	cfg    GroupConfig
	topics GroupTopics

	epoch           int32 // bumped by membership, subscription and topic changes; 0: not created
	assignmentEpoch int32 // the epoch of target
	metadataHash    int64 // groupTopicsHash of the subscribed topics when the epoch was last bumped
	dead            bool

	members map[string]*groupMember
	target  map[string]GroupAssignment
	// names names the topic ids of assignments (the subscribed topics as
	// of the last look, and those assigned before), for describe.
	names map[[16]byte]string
}

// NewShareGroup returns a group that does not exist yet: a join (member
// epoch 0) creates it; any other heartbeat answers GROUP_ID_NOT_FOUND and
// leaves it as it is (Exists reports false: the owner drops it).
func NewShareGroup(id string, cfg GroupConfig, topics GroupTopics) *ShareGroup {
	return &ShareGroup{
		id: id, cfg: cfg, topics: topics,
		members: make(map[string]*groupMember),
		target:  make(map[string]GroupAssignment),
		names:   make(map[[16]byte]string),
	}
}

// Reconfigure replaces the group's settings (a per-group
// share.session.timeout.ms or share.heartbeat.interval.ms was altered):
// sessions run with the new timeout from their last heartbeat, members
// learn the new interval at their next heartbeat.
func (g *ShareGroup) Reconfigure(cfg GroupConfig) { g.cfg = cfg }

// ID is the group id.
func (g *ShareGroup) ID() string { return g.id }

// Exists reports whether the group was created (a member joined, or it
// was loaded) and not deleted.
func (g *ShareGroup) Exists() bool { return g.epoch > 0 && !g.dead }

// Epoch is the group epoch.
func (g *ShareGroup) Epoch() int32 { return g.epoch }

// AssignmentEpoch is the epoch of the target assignment.
func (g *ShareGroup) AssignmentEpoch() int32 { return g.assignmentEpoch }

// Len is the number of members.
func (g *ShareGroup) Len() int { return len(g.members) }

// State is Empty (no members), Stable (members) or Dead (deleted).
func (g *ShareGroup) State() string {
	switch {
	case g.dead:
		return GroupStateDead
	case len(g.members) == 0:
		return GroupStateEmpty
	}
	return GroupStateStable
}

// HasMember reports whether id is a member.
func (g *ShareGroup) HasMember(id string) bool { return g.members[id] != nil }

// Assigned returns a copy of what member id was last told it has (nil if
// it is not a member).
func (g *ShareGroup) Assigned(id string) GroupAssignment {
	if m := g.members[id]; m != nil {
		return m.assigned.Clone()
	}
	return nil
}

// MemberIDs returns the member ids, sorted.
func (g *ShareGroup) MemberIDs() []string { return slices.Sorted(maps.Keys(g.members)) }

// SubscribedTopics returns the names of the topics some member
// subscribes to, sorted.
func (g *ShareGroup) SubscribedTopics() []string {
	set := make(map[string]bool)
	for _, m := range g.members {
		for _, t := range m.topics {
			set[t] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func (g *ShareGroup) ordered() []*groupMember {
	out := slices.Collect(maps.Values(g.members))
	slices.SortFunc(out, func(a, b *groupMember) int { return cmp.Compare(a.id, b.id) })
	return out
}

// resolve looks up the subscribed topics that exist, sorted by name.
func (g *ShareGroup) resolve() []GroupTopic {
	var out []GroupTopic
	for _, name := range g.SubscribedTopics() {
		if t, ok := g.topics.GroupTopic(name); ok && t.Partitions > 0 {
			t.Name = name
			out = append(out, t)
			g.names[t.ID] = name
		}
	}
	return out
}

// groupTopicsHash hashes the subscribed topics that exist (FNV-64a over
// names, ids and partition counts, in name order): the group epoch moves
// when it changes. It stands in ShareGroupMetadataValue's MetadataHash,
// which Kafka computes differently (Murmur3 over its topic image): a
// Kafka coordinator loading Berth's records sees another hash and bumps
// the epoch once, which members follow.
func groupTopicsHash(ts []GroupTopic) int64 {
	if len(ts) == 0 {
		return 0
	}
	h := fnv.New64a()
	var b []byte
	for _, t := range ts {
		b = kbin.AppendString(b[:0], t.Name)
		b = append(b, t.ID[:]...)
		b = kbin.AppendInt32(b, t.Partitions)
		h.Write(b)
	}
	return int64(h.Sum64())
}

// bump moves the group to a new epoch and computes the target assignment
// (Kafka computes it at the next heartbeat; members see no difference).
func (g *ShareGroup) bump(ch *GroupChange) {
	topics := g.resolve()
	g.epoch++
	g.metadataHash = groupTopicsHash(topics)
	ch.add(groupEpochRecord(g.id, g.epoch, g.metadataHash))
	members := make([]AssignMember, 0, len(g.members))
	for _, m := range g.ordered() {
		members = append(members, AssignMember{ID: m.id, Topics: m.topics})
	}
	next := AssignSimple(members, topics, g.target)
	for _, m := range members {
		a := next[m.ID]
		if old, ok := g.target[m.ID]; !ok || !old.Equal(a) {
			g.target[m.ID] = a
			ch.add(groupTargetRecord(g.id, m.ID, a))
		}
	}
	for id := range g.target {
		if g.members[id] == nil {
			delete(g.target, id)
		}
	}
	g.assignmentEpoch = g.epoch
	ch.add(groupTargetEpochRecord(g.id, g.assignmentEpoch))
}

// topicsChanged reports whether the subscribed topics changed since the
// epoch was last bumped (created, deleted, partitions added).
func (g *ShareGroup) topicsChanged() bool {
	return groupTopicsHash(g.resolve()) != g.metadataHash
}

// reconcile moves m to the target assignment and its epoch (share groups
// have no revocation: this is immediate) and reports whether it changed.
func (g *ShareGroup) reconcile(m *groupMember, ch *GroupChange) bool {
	target := g.target[m.id]
	if target == nil {
		target = make(GroupAssignment)
	}
	if m.epoch == g.assignmentEpoch && m.assigned.Equal(target) {
		return false
	}
	m.prevEpoch, m.epoch = m.epoch, g.assignmentEpoch
	m.assigned = target.Clone()
	ch.add(groupCurrentRecord(g.id, m))
	return true
}

// remove takes m out of the group and moves the group to a new epoch.
func (g *ShareGroup) remove(m *groupMember, reason string, ch *GroupChange) {
	delete(g.members, m.id)
	delete(g.target, m.id)
	ch.add(groupMemberTombstones(g.id, m.id)...)
	ch.Removed = append(ch.Removed, GroupRemoval{MemberID: m.id, Reason: reason, Assigned: m.assigned})
	g.bump(ch)
}

// Expire removes the members whose session expired by now (no heartbeat
// for the session timeout), in member id order, and reports them.
func (g *ShareGroup) Expire(now time.Time) GroupChange {
	var ch GroupChange
	if g.dead {
		return ch
	}
	for _, m := range g.ordered() {
		if !now.Before(m.lastHeartbeat.Add(g.cfg.SessionTimeout)) {
			g.remove(m, "session expired", &ch)
		}
	}
	return ch
}

// NextExpiry is when the next session expires (false without members).
func (g *ShareGroup) NextExpiry() (time.Time, bool) {
	var next time.Time
	for _, m := range g.members {
		if at := m.lastHeartbeat.Add(g.cfg.SessionTimeout); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// Create makes the group exist with no members, as AlterShareGroupOffsets
// does for a group id no group has (Kafka 4.2): the group moves to epoch
// 1 with an empty assignment, and the returned records (its metadata and
// target assignment epoch) make a coordinator that replays them load it,
// Empty. A group that exists already, or is being deleted, is left as it
// is (no records).
func (g *ShareGroup) Create() GroupChange {
	var ch GroupChange
	if g.epoch > 0 || g.dead {
		return ch
	}
	g.bump(&ch)
	return ch
}

// Delete deletes an empty group (DeleteGroups): it returns the group's
// tombstones and the group is Dead (heartbeats answer
// COORDINATOR_NOT_AVAILABLE) until the owner drops it once they are
// durable, or calls UndoDelete if the write failed. A group with members
// answers NON_EMPTY_GROUP (a code, 0 when deleted).
func (g *ShareGroup) Delete() ([]GroupRecord, int16) {
	switch {
	case g.dead || g.epoch == 0:
		return nil, kerr.GroupIDNotFound.Code
	case len(g.members) > 0:
		return nil, kerr.NonEmptyGroup.Code
	}
	g.dead = true
	return groupTombstones(g.id, nil), 0
}

// UndoDelete brings a group back from Delete (its tombstones were not
// written).
func (g *ShareGroup) UndoDelete() { g.dead = false }

// Snapshot is every record of the group's current state, in the order a
// replay needs: written after a failed write, it brings the log up to
// date with memory.
func (g *ShareGroup) Snapshot() []GroupRecord {
	if g.epoch == 0 {
		return nil
	}
	recs := []GroupRecord{groupEpochRecord(g.id, g.epoch, g.metadataHash)}
	for _, m := range g.ordered() {
		recs = append(recs, groupMemberRecord(g.id, m))
		recs = append(recs, groupTargetRecord(g.id, m.id, g.target[m.id]))
		recs = append(recs, groupCurrentRecord(g.id, m))
	}
	return append(recs, groupTargetEpochRecord(g.id, g.assignmentEpoch))
}
