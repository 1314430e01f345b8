package group

// Share group membership (KIP-932): the members of one share group, their
// subscriptions, the group epoch, the target assignment (the simple
// assignor, share_assignor.go) and each member's epoch and assignment. It
// is a deterministic state machine with no I/O: ShareGroupHeartbeat
// (share_heartbeat.go), session expiry (Expire), ShareGroupDescribe
// (share_describe.go) and deletion change it and return the
// __consumer_offsets records to write (share_records.go); a coordinator
// taking over the partition rebuilds the group from them
// (share_replay.go). The coordinator's side (share.go) keeps one per
// share group.
//
// A shareMembership is not safe for concurrent use: its owner (the group
// coordinator) serializes the calls, under the group's lock, and writes
// the returned records before it answers.
//
// Share groups have no revocation protocol. A member's assignment simply
// changes at its next heartbeat, which moves it to the assignment epoch;
// records it still holds on a partition it lost stay acquired until it
// acknowledges them or their locks expire. A member that leaves or whose
// session expires is reported (ShareRemoval) so that the share partitions
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
	brokerShareSessionTimeoutMs    = "group.share.session.timeout.ms"
	brokerShareHeartbeatIntervalMs = "group.share.heartbeat.interval.ms"
	brokerShareMaxSize             = "group.share.max.size"
)

// errInvalidShareConfig is returned by shareGroupConfig.Validate.
var errInvalidShareConfig = errors.New("share: invalid share group config")

// shareGroupConfig holds the membership settings of share groups.
type shareGroupConfig struct {
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

// defaultShareGroupConfig returns Kafka's defaults.
func defaultShareGroupConfig() shareGroupConfig {
	return shareGroupConfig{SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, MaxSize: 200}
}

// Validate checks c.
func (c shareGroupConfig) Validate() error {
	switch {
	case c.SessionTimeout <= 0:
		return fmt.Errorf("%w: %s must be positive", errInvalidShareConfig, brokerShareSessionTimeoutMs)
	case c.HeartbeatInterval <= 0:
		return fmt.Errorf("%w: %s must be positive", errInvalidShareConfig, brokerShareHeartbeatIntervalMs)
	case c.HeartbeatInterval >= c.SessionTimeout:
		return fmt.Errorf("%w: %s must be less than %s", errInvalidShareConfig, brokerShareHeartbeatIntervalMs, brokerShareSessionTimeoutMs)
	case c.MaxSize < 1:
		return fmt.Errorf("%w: %s must be at least 1", errInvalidShareConfig, brokerShareMaxSize)
	}
	return nil
}

func (c shareGroupConfig) newMemberID() string {
	if c.NewMemberID != nil {
		return c.NewMemberID()
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// shareTopics looks topics up by name in the cluster's metadata (a
// snapshot; it is called with the group's owner's lock held and must not
// call back into the group).
type shareTopics interface {
	GroupTopic(name string) (shareTopic, bool)
}

// shareClient is who sent a request.
type shareClient struct {
	ID, Host string
}

// ShareRemoval is a member that left the group or whose session expired:
// the share partitions release what it holds.
type ShareRemoval struct {
	MemberID string
	Reason   string // "left", "session expired"
	// Assigned is what the member was last told it has.
	Assigned shareAssignment
}

// shareChange is what a call changed: the records to write to the
// group's __consumer_offsets partition (in order, before answering), and
// the members removed.
type shareChange struct {
	Records []Record
	Removed []ShareRemoval
}

func (c *shareChange) add(recs ...Record) { c.Records = append(c.Records, recs...) }

// Group states (ShareGroupDescribe's GroupState, ListGroups' state).
const (
	shareStateEmpty  = "Empty"
	shareStateStable = "Stable"
	shareStateDead   = "Dead"
)

// shareGroupType is the group type ListGroups reports.
const shareGroupType = "share"

// shareMember is one member of a share group.
type shareMember struct {
	id         string
	rackID     *string
	clientID   string
	clientHost string
	topics     []string // SubscribedTopicNames, sorted and unique

	epoch, prevEpoch int32
	assigned         shareAssignment // what the member was last told

	lastHeartbeat time.Time // starts the session
}

// shareMembership is one share group's membership and assignment.
type shareMembership struct {
	id     string
	cfg    shareGroupConfig
	topics shareTopics

	epoch           int32 // bumped by membership, subscription and topic changes; 0: not created
	assignmentEpoch int32 // the epoch of target
	metadataHash    int64 // shareTopicsHash of the subscribed topics when the epoch was last bumped
	dead            bool

	members map[string]*shareMember
	target  map[string]shareAssignment
	// names names the topic ids of assignments (the subscribed topics as
	// of the last look, and those assigned before), for describe.
	names map[[16]byte]string
}

// newShareMembership returns a group that does not exist yet: a join (member
// epoch 0) creates it; any other heartbeat answers GROUP_ID_NOT_FOUND and
// leaves it as it is (Exists reports false: the owner drops it).
func newShareMembership(id string, cfg shareGroupConfig, topics shareTopics) *shareMembership {
	return &shareMembership{
		id: id, cfg: cfg, topics: topics,
		members: make(map[string]*shareMember),
		target:  make(map[string]shareAssignment),
		names:   make(map[[16]byte]string),
	}
}

// Reconfigure replaces the group's settings (a per-group
// share.session.timeout.ms or share.heartbeat.interval.ms was altered):
// sessions run with the new timeout from their last heartbeat, members
// learn the new interval at their next heartbeat.
func (g *shareMembership) Reconfigure(cfg shareGroupConfig) { g.cfg = cfg }

// ID is the group id.
func (g *shareMembership) ID() string { return g.id }

// Exists reports whether the group was created (a member joined, or it
// was loaded) and not deleted.
func (g *shareMembership) Exists() bool { return g.epoch > 0 && !g.dead }

// Epoch is the group epoch.
func (g *shareMembership) Epoch() int32 { return g.epoch }

// AssignmentEpoch is the epoch of the target assignment.
func (g *shareMembership) AssignmentEpoch() int32 { return g.assignmentEpoch }

// Len is the number of members.
func (g *shareMembership) Len() int { return len(g.members) }

// State is Empty (no members), Stable (members) or Dead (deleted).
func (g *shareMembership) State() string {
	switch {
	case g.dead:
		return shareStateDead
	case len(g.members) == 0:
		return shareStateEmpty
	}
	return shareStateStable
}

// HasMember reports whether id is a member.
func (g *shareMembership) HasMember(id string) bool { return g.members[id] != nil }

// Assigned returns a copy of what member id was last told it has (nil if
// it is not a member).
func (g *shareMembership) Assigned(id string) shareAssignment {
	if m := g.members[id]; m != nil {
		return m.assigned.Clone()
	}
	return nil
}

// MemberIDs returns the member ids, sorted.
func (g *shareMembership) MemberIDs() []string { return slices.Sorted(maps.Keys(g.members)) }

// SubscribedTopics returns the names of the topics some member
// subscribes to, sorted.
func (g *shareMembership) SubscribedTopics() []string {
	set := make(map[string]bool)
	for _, m := range g.members {
		for _, t := range m.topics {
			set[t] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func (g *shareMembership) ordered() []*shareMember {
	out := slices.Collect(maps.Values(g.members))
	slices.SortFunc(out, func(a, b *shareMember) int { return cmp.Compare(a.id, b.id) })
	return out
}

// resolve looks up the subscribed topics that exist, sorted by name.
func (g *shareMembership) resolve() []shareTopic {
	var out []shareTopic
	for _, name := range g.SubscribedTopics() {
		if t, ok := g.topics.GroupTopic(name); ok && t.Partitions > 0 {
			t.Name = name
			out = append(out, t)
			g.names[t.ID] = name
		}
	}
	return out
}

// shareTopicsHash hashes the subscribed topics that exist (FNV-64a over
// names, ids and partition counts, in name order): the group epoch moves
// when it changes. It stands in ShareGroupMetadataValue's MetadataHash,
// which Kafka computes differently (Murmur3 over its topic image): a
// Kafka coordinator loading Berth's records sees another hash and bumps
// the epoch once, which members follow.
func shareTopicsHash(ts []shareTopic) int64 {
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
func (g *shareMembership) bump(ch *shareChange) {
	topics := g.resolve()
	g.epoch++
	g.metadataHash = shareTopicsHash(topics)
	ch.add(shareEpochRecord(g.id, g.epoch, g.metadataHash))
	members := make([]shareAssignMember, 0, len(g.members))
	for _, m := range g.ordered() {
		members = append(members, shareAssignMember{ID: m.id, Topics: m.topics})
	}
	next := assignShareSimple(members, topics, g.target)
	for _, m := range members {
		a := next[m.ID]
		if old, ok := g.target[m.ID]; !ok || !old.Equal(a) {
			g.target[m.ID] = a
			ch.add(shareTargetRecord(g.id, m.ID, a))
		}
	}
	for id := range g.target {
		if g.members[id] == nil {
			delete(g.target, id)
		}
	}
	g.assignmentEpoch = g.epoch
	ch.add(shareTargetEpochRecord(g.id, g.assignmentEpoch))
}

// topicsChanged reports whether the subscribed topics changed since the
// epoch was last bumped (created, deleted, partitions added).
func (g *shareMembership) topicsChanged() bool {
	return shareTopicsHash(g.resolve()) != g.metadataHash
}

// reconcile moves m to the target assignment and its epoch (share groups
// have no revocation: this is immediate) and reports whether it changed.
func (g *shareMembership) reconcile(m *shareMember, ch *shareChange) bool {
	target := g.target[m.id]
	if target == nil {
		target = make(shareAssignment)
	}
	if m.epoch == g.assignmentEpoch && m.assigned.Equal(target) {
		return false
	}
	m.prevEpoch, m.epoch = m.epoch, g.assignmentEpoch
	m.assigned = target.Clone()
	ch.add(shareCurrentRecord(g.id, m))
	return true
}

// remove takes m out of the group and moves the group to a new epoch.
func (g *shareMembership) remove(m *shareMember, reason string, ch *shareChange) {
	delete(g.members, m.id)
	delete(g.target, m.id)
	ch.add(shareMemberTombstones(g.id, m.id)...)
	ch.Removed = append(ch.Removed, ShareRemoval{MemberID: m.id, Reason: reason, Assigned: m.assigned})
	g.bump(ch)
}

// Expire removes the members whose session expired by now (no heartbeat
// for the session timeout), in member id order, and reports them.
func (g *shareMembership) Expire(now time.Time) shareChange {
	var ch shareChange
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
func (g *shareMembership) NextExpiry() (time.Time, bool) {
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
func (g *shareMembership) Create() shareChange {
	var ch shareChange
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
func (g *shareMembership) Delete() ([]Record, int16) {
	switch {
	case g.dead || g.epoch == 0:
		return nil, kerr.GroupIDNotFound.Code
	case len(g.members) > 0:
		return nil, kerr.NonEmptyGroup.Code
	}
	g.dead = true
	return shareTombstones(g.id, nil), 0
}

// UndoDelete brings a group back from Delete (its tombstones were not
// written).
func (g *shareMembership) UndoDelete() { g.dead = false }

// Snapshot is every record of the group's current state, in the order a
// replay needs: written after a failed write, it brings the log up to
// date with memory.
func (g *shareMembership) Snapshot() []Record {
	if g.epoch == 0 {
		return nil
	}
	recs := []Record{shareEpochRecord(g.id, g.epoch, g.metadataHash)}
	for _, m := range g.ordered() {
		recs = append(recs, shareMemberRecord(g.id, m))
		recs = append(recs, shareTargetRecord(g.id, m.id, g.target[m.id]))
		recs = append(recs, shareCurrentRecord(g.id, m))
	}
	return append(recs, shareTargetEpochRecord(g.id, g.assignmentEpoch))
}
