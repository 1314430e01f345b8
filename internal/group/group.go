package group

import (
	"bytes"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// state is a classic group's state, named as Kafka names them.
type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

// offset is one committed offset.
type offset struct {
	offset       int64
	leaderEpoch  int32
	metadata     string
	commitMillis int64
	expireMillis int64  // from a v1 value (explicit retention), else 0
	seq          uint64 // the commit that wrote it; 0 when loaded
}

type protocol struct {
	name     string
	metadata []byte
}

// member is one member of a classic group.
type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	protocolType     string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocols        []protocol
	assignment       []byte

	// isNew is set from a member's first join until its generation
	// completes (Kafka's MemberMetadata.isNew).
	isNew bool
	// lastHeartbeat is when the member last proved alive; it expires
	// sessionTimeout later unless it waits on a join or sync.
	lastHeartbeat time.Time

	joinReq   *kmsg.JoinGroupRequest // set with joinReply
	joinReply func(*kmsg.JoinGroupResponse)
	joinSeq   uint64 // bumped per waiting join, so a late answer finds its own
	syncReq   *kmsg.SyncGroupRequest
	syncReply func(*kmsg.SyncGroupResponse)
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// matches is Kafka's MemberMetadata.matches: the same protocols, in the
// same order, with the same metadata.
func (m *member) matches(req *kmsg.JoinGroupRequest) bool {
	if len(req.Protocols) != len(m.protocols) {
		return false
	}
	for i, p := range req.Protocols {
		if p.Name != m.protocols[i].name || !bytes.Equal(p.Metadata, m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// group is one group, classic or (with cg) consumer. mu guards every
// field; it is taken after the coordinator's mu when both are held.
type group struct {
	mu        sync.Mutex
	id        string
	partition int32 // of __consumer_offsets

	state        state
	stateSince   time.Time // Kafka's currentStateTimestamp; zero if unknown
	protocolType string
	protocol     string // selected protocol, "" when none
	generation   int32
	leader       string

	members map[string]*member
	order   []string             // member ids in join order; the leader is elected from its head
	static  map[string]string    // group.instance.id -> member id
	pending map[string]time.Time // KIP-394 member ids handed out, until when they may join

	// pendingSync holds the members of the current generation that have
	// not sent SyncGroup; they are removed at syncDeadline.
	pendingSync  map[string]bool
	syncDeadline time.Time

	// rebalanceDeadline ends PreparingRebalance. With initialDelay it is
	// the end of the current initial-delay window (Kafka's
	// InitialDelayedJoin), extended while members keep arriving.
	rebalanceDeadline time.Time
	initialDelay      bool
	newMemberAdded    bool
	delayRemaining    time.Duration

	offsets        map[topicPartition]offset
	pendingCommits map[topicPartition]int // commits written but not yet durable
	nextSeq        uint64
	// deletedAt is the sequence of an OffsetDelete tombstone already
	// durable while older commits of the partition are still in flight:
	// their late done must not bring the offset back.
	deletedAt map[topicPartition]uint64

	// cg is the KIP-848 state of a consumer group, nil for a classic
	// group. A consumer group's state is Empty (no members) or Stable
	// here, Dead while deleted; its own states are cg.stateName's.
	cg *consumerGroup
	// sh is the state of a share group (KIP-932), nil for other types.
	// Its state here is Empty or Stable, Dead while deleted.
	sh *shareGroup

	rebalances int64 // times the group entered PreparingRebalance, or a consumer group's epoch was bumped
	persisted  bool  // a metadata record was loaded or written for it
	deleting   bool  // DeleteGroups: Dead, waiting for the tombstones
	removed    bool  // out of the coordinator's map (deleted or unloaded)
}

func newGroup(id string, p int32, now time.Time) *group {
	return &group{
		id:             id,
		partition:      p,
		state:          stateEmpty,
		stateSince:     now,
		members:        make(map[string]*member),
		static:         make(map[string]string),
		pending:        make(map[string]time.Time),
		offsets:        make(map[topicPartition]offset),
		pendingCommits: make(map[topicPartition]int),
		deletedAt:      make(map[topicPartition]uint64),
	}
}

func (g *group) transition(s state, now time.Time) {
	g.state = s
	g.stateSince = now
}

// ordered returns the members in join order.
func (g *group) ordered() []*member {
	out := make([]*member, 0, len(g.order))
	for _, id := range g.order {
		out = append(out, g.members[id])
	}
	return out
}

func (g *group) add(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	if g.leader == "" {
		g.leader = m.id
	}
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	delete(g.pending, m.id)
}

// remove drops a member; a removed leader is replaced by the next member
// in join order (Kafka takes the next in its map).
func (g *group) remove(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	delete(g.members, id)
	g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == id })
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
	delete(g.pendingSync, id)
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
}

// replaceID renames a static member (Kafka's replaceStaticMember).
func (g *group) replaceID(m *member, newID string) {
	old := m.id
	delete(g.members, old)
	m.id = newID
	g.members[newID] = m
	for i, id := range g.order {
		if id == old {
			g.order[i] = newID
		}
	}
	if g.leader == old {
		g.leader = newID
	}
	if m.instanceID != nil {
		g.static[*m.instanceID] = newID
	}
	if g.pendingSync[old] {
		delete(g.pendingSync, old)
		g.pendingSync[newID] = true
	}
}

// fenced is Kafka's isStaticMemberFenced: the instance id is known under
// another member id.
func (g *group) fenced(instanceID *string, memberID string) bool {
	if instanceID == nil {
		return false
	}
	id, ok := g.static[*instanceID]
	return ok && id != memberID
}

// rebalanceTimeout is the largest of the members' rebalance timeouts.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// supportsProtocols is Kafka's GroupMetadata.supportsProtocols.
func (g *group) supportsProtocols(req *kmsg.JoinGroupRequest) bool {
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return false
	}
	if g.state == stateEmpty {
		return true
	}
	if req.ProtocolType != g.protocolType {
		return false
	}
	for _, p := range req.Protocols {
		if g.supportedBy(p.Name) == len(g.members) {
			return true
		}
	}
	return false
}

func (g *group) supportedBy(name string) int {
	n := 0
	for _, m := range g.members {
		if slices.ContainsFunc(m.protocols, func(p protocol) bool { return p.name == name }) {
			n++
		}
	}
	return n
}

// selectProtocol is Kafka's vote: of the protocols every member
// supports, each member votes for the first in its own preference order;
// the most votes win. Ties go to the protocol the earliest member prefers
// (Kafka breaks them by hash order).
func (g *group) selectProtocol() string {
	ms := g.ordered()
	if len(ms) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range ms[0].protocols {
		if g.supportedBy(p.name) == len(ms) {
			candidates = append(candidates, p.name)
		}
	}
	votes := make(map[string]int)
	for _, m := range ms {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.name) {
				votes[p.name]++
				break
			}
		}
	}
	best, n := "", -1
	for _, name := range candidates {
		if votes[name] > n {
			best, n = name, votes[name]
		}
	}
	return best
}

// hasAllJoined: every member waits on a join and no KIP-394 member id is
// outstanding.
func (g *group) hasAllJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinReply == nil {
			return false
		}
	}
	return true
}

func (g *group) numAwaitingJoin() int {
	n := 0
	for _, m := range g.members {
		if m.joinReply != nil {
			n++
		}
	}
	return n
}

// acceptJoining is Kafka's acceptJoiningMember (group.max.size).
func (c *Coordinator) acceptJoining(g *group, memberID string) bool {
	max := c.cfg.MaxGroupSize
	if max <= 0 {
		return true
	}
	m := g.members[memberID]
	switch g.state {
	case stateEmpty, stateDead:
		return true
	case statePreparingRebalance:
		return (m != nil && m.joinReply != nil) || g.numAwaitingJoin() < max
	default:
		return m != nil || len(g.members) < max
	}
}

// maybePrepareRebalance starts a rebalance unless one is under way.
func (c *Coordinator) maybePrepareRebalance(g *group, reason string, now time.Time, f *fx) {
	switch g.state {
	case stateStable, stateCompletingRebalance, stateEmpty:
		c.prepareRebalance(g, reason, now, f)
	}
}

func (c *Coordinator) prepareRebalance(g *group, reason string, now time.Time, f *fx) {
	if g.state == stateCompletingRebalance {
		c.resetAssignment(g, kerr.RebalanceInProgress.Code, f)
	}
	g.pendingSync = nil
	timeout := g.rebalanceTimeout()
	if delay := c.cfg.InitialRebalanceDelay; g.state == stateEmpty && delay > 0 {
		// Kafka's InitialDelayedJoin: let more members arrive before the
		// first generation.
		g.initialDelay, g.newMemberAdded = true, false
		g.delayRemaining = max(timeout-delay, 0)
		g.rebalanceDeadline = now.Add(delay)
	} else {
		g.initialDelay = false
		g.rebalanceDeadline = now.Add(timeout)
	}
	c.log.Info("preparing to rebalance group", "group", g.id, "generation", g.generation, "reason", reason)
	g.transition(statePreparingRebalance, now)
	g.rebalances++
	// Like Kafka's DelayedJoin, try to complete at once: a group whose
	// last member left has nobody to wait for.
	c.maybeCompleteJoin(g, now, f)
}

// maybeCompleteJoin completes the join phase once every member rejoined
// (never during the initial delay, which always runs its course).
func (c *Coordinator) maybeCompleteJoin(g *group, now time.Time, f *fx) {
	if g.state == statePreparingRebalance && !g.initialDelay && g.hasAllJoined() {
		c.completeJoin(g, now, f)
	}
}

// completeJoin is Kafka's onCompleteJoin + initNextGeneration.
func (c *Coordinator) completeJoin(g *group, now time.Time, f *fx) {
	g.initialDelay = false
	// Dynamic members that did not rejoin are dropped; static ones stay
	// until their session times out.
	for _, m := range g.ordered() {
		if m.joinReply == nil && m.instanceID == nil {
			c.log.Info("member did not rejoin; removing", "group", g.id, "member", m.id)
			g.remove(m.id)
		}
	}
	if lm := g.members[g.leader]; len(g.members) > 0 && (lm == nil || lm.joinReply == nil) {
		leader := ""
		for _, m := range g.ordered() {
			if m.joinReply != nil {
				leader = m.id
				break
			}
		}
		if leader == "" {
			// Only static members that have not rejoined remain: wait
			// another rebalance timeout for them (or their sessions).
			g.rebalanceDeadline = now.Add(g.rebalanceTimeout())
			return
		}
		g.leader = leader
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.transition(stateEmpty, now)
		c.log.Info("group is empty", "group", g.id, "generation", g.generation)
		c.storeGroup(g, nil, func(err error) {
			if err != nil {
				c.log.Warn("writing empty group metadata", "group", g.id, "err", err)
			}
		})
		return
	}
	g.protocol = g.selectProtocol()
	g.transition(stateCompletingRebalance, now)
	g.pendingSync = make(map[string]bool, len(g.members))
	for id := range g.members {
		g.pendingSync[id] = true
	}
	g.syncDeadline = now.Add(g.rebalanceTimeout())
	c.log.Info("group rebalanced", "group", g.id, "generation", g.generation, "protocol", g.protocol, "leader", g.leader, "members", len(g.members))
	for _, m := range g.ordered() {
		if m.joinReply == nil {
			continue
		}
		resp := m.joinReq.ResponseKind().(*kmsg.JoinGroupResponse)
		c.fillJoin(g, m, resp, m.id == g.leader)
		m.isNew = false
		m.lastHeartbeat = now
		c.answerJoin(m, resp, f)
	}
}

// fillJoin fills a successful JoinGroup response; the leader gets the
// members and their metadata for the selected protocol.
func (c *Coordinator) fillJoin(g *group, m *member, resp *kmsg.JoinGroupResponse, withMembers bool) {
	resp.ErrorCode = 0
	resp.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	resp.LeaderID = g.leader
	resp.MemberID = m.id
	if withMembers {
		for _, o := range g.ordered() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = o.id
			rm.InstanceID = o.instanceID
			rm.ProtocolMetadata = o.metadataFor(g.protocol)
			resp.Members = append(resp.Members, rm)
		}
	}
}

func (c *Coordinator) answerJoin(m *member, resp *kmsg.JoinGroupResponse, f *fx) {
	reply := m.joinReply
	m.joinReply, m.joinReq = nil, nil
	f.add(func() { reply(resp) })
}

func (c *Coordinator) answerJoinError(m *member, code int16, f *fx) {
	resp := m.joinReq.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = code
	resp.MemberID = m.id
	c.answerJoin(m, resp, f)
}

func (c *Coordinator) answerSync(m *member, resp *kmsg.SyncGroupResponse, f *fx) {
	reply := m.syncReply
	m.syncReply, m.syncReq = nil, nil
	f.add(func() { reply(resp) })
}

func (c *Coordinator) answerSyncError(m *member, code int16, f *fx) {
	resp := m.syncReq.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = code
	c.answerSync(m, resp, f)
}

// resetAssignment is Kafka's resetAndPropagateAssignmentError.
func (c *Coordinator) resetAssignment(g *group, code int16, f *fx) {
	for _, m := range g.ordered() {
		m.assignment = nil
		if m.syncReply != nil {
			c.answerSyncError(m, code, f)
		}
	}
}

// propagateAssignment is Kafka's setAndPropagateAssignment.
func (c *Coordinator) propagateAssignment(g *group, assignment map[string][]byte, f *fx) {
	for _, m := range g.ordered() {
		m.assignment = assignment[m.id]
		if m.assignment == nil {
			m.assignment = []byte{}
		}
		if m.syncReply != nil {
			c.answerSyncOK(g, m, f)
		}
	}
}

func (c *Coordinator) answerSyncOK(g *group, m *member, f *fx) {
	resp := m.syncReq.ResponseKind().(*kmsg.SyncGroupResponse)
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	resp.MemberAssignment = m.assignment
	c.answerSync(m, resp, f)
}

// removeMember is Kafka's removeMemberAndUpdateGroup: a leave or an
// expired session.
func (c *Coordinator) removeMember(g *group, m *member, reason string, now time.Time, f *fx) {
	c.log.Info("removing member", "group", g.id, "member", m.id, "reason", reason)
	if m.joinReply != nil {
		c.answerJoinError(m, kerr.UnknownMemberID.Code, f)
	}
	if m.syncReply != nil {
		c.answerSyncError(m, kerr.UnknownMemberID.Code, f)
	}
	g.remove(m.id)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		c.maybePrepareRebalance(g, reason, now, f)
	case statePreparingRebalance:
		c.maybeCompleteJoin(g, now, f)
	}
}

// newMemberJoinTimeout bounds how long a new member's first join may wait
// (Kafka's GroupCoordinator.NewMemberJoinTimeoutMs), should the
// rebalance drag on (a KIP-394 id outstanding, say).
const newMemberJoinTimeout = 5 * time.Minute

// expired reports whether m's session ran out; members waiting on a join
// or a sync are kept alive by the rebalance timeouts instead (Kafka's
// hasSatisfiedHeartbeat), except new members, which get
// newMemberJoinTimeout.
func (m *member) expired(now time.Time) bool {
	switch {
	case m.syncReply != nil:
		return false
	case m.joinReply != nil && m.isNew:
		return !now.Before(m.lastHeartbeat.Add(newMemberJoinTimeout))
	case m.joinReply != nil:
		return false
	}
	return !now.Before(m.lastHeartbeat.Add(m.sessionTimeout))
}

// tickGroup runs g's timers.
func (c *Coordinator) tickGroup(g *group, now time.Time, f *fx) {
	if g.state == stateDead {
		return
	}
	if g.isConsumer() {
		c.tickConsumer(g, now)
		return
	}
	if g.isShare() {
		c.tickShare(g, now, f)
		return
	}
	for id, until := range g.pending {
		if !now.Before(until) {
			c.log.Info("pending member id expired", "group", g.id, "member", id)
			delete(g.pending, id)
		}
	}
	for _, m := range g.ordered() {
		if g.members[m.id] == m && m.expired(now) {
			c.removeMember(g, m, "session timeout", now, f)
		}
	}
	if g.state == statePreparingRebalance {
		switch {
		case now.Before(g.rebalanceDeadline):
			c.maybeCompleteJoin(g, now, f)
		case g.initialDelay && g.newMemberAdded && g.delayRemaining > 0:
			delay := min(c.cfg.InitialRebalanceDelay, g.delayRemaining)
			g.delayRemaining = max(g.delayRemaining-delay, 0)
			g.newMemberAdded = false
			g.rebalanceDeadline = now.Add(delay)
		default:
			c.completeJoin(g, now, f)
		}
	}
	if (g.state == stateCompletingRebalance || g.state == stateStable) && len(g.pendingSync) > 0 && !now.Before(g.syncDeadline) {
		for _, m := range g.ordered() {
			if g.pendingSync[m.id] {
				c.log.Info("member did not sync in time; removing", "group", g.id, "member", m.id)
				if m.joinReply != nil {
					c.answerJoinError(m, kerr.UnknownMemberID.Code, f)
				}
				g.remove(m.id)
			}
		}
		c.maybePrepareRebalance(g, "members did not sync in time", now, f)
	}
}

// groupValue is the GroupMetadataValue of g with the given assignments
// (nil: the members' current ones).
func (g *group) groupValue(assignment map[string][]byte) *kmsg.GroupMetadataValue {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = nowMillis(g.stateSince)
	for _, m := range g.ordered() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		vm.InstanceID = m.instanceID
		vm.ClientID = m.clientID
		vm.ClientHost = m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout / time.Millisecond)
		vm.SessionTimeoutMillis = int32(m.sessionTimeout / time.Millisecond)
		vm.Subscription = m.metadataFor(g.protocol)
		if vm.Subscription == nil {
			vm.Subscription = []byte{}
		}
		a := m.assignment
		if assignment != nil {
			a = assignment[m.id]
		}
		if a == nil {
			a = []byte{}
		}
		vm.Assignment = a
		v.Members = append(v.Members, vm)
	}
	return &v
}

// storeGroup queues g's metadata record; done runs once it is durable or
// failed, with no lock held.
func (c *Coordinator) storeGroup(g *group, assignment map[string][]byte, done func(error)) {
	v := g.groupValue(assignment)
	c.write(g.partition, []Record{{Key: groupKey(g.id), Value: v.AppendTo(nil)}}, func(err error) {
		if err == nil {
			g.mu.Lock()
			g.persisted = true
			g.mu.Unlock()
		}
		done(err)
	})
}
