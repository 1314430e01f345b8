package group

// KIP-848 consumer groups: the state kept for a group of type "consumer"
// (group.cg), the epochs, partition ownership, the target assignment and
// the reconciliation of each member towards its target (Kafka's
// CurrentAssignmentBuilder). The APIs are in consumer_heartbeat.go and
// consumer_describe.go, the assignors in assignor.go, the records in
// consumer_records.go.

import (
	"bytes"
	"cmp"
	"maps"
	"regexp"
	"slices"
	"time"
)

// memberState is a consumer group member's reconciliation state, with
// Kafka's MemberState values (they are persisted).
type memberState int8

const (
	// memberStable: reconciled with the target of its epoch.
	memberStable memberState = 0
	// memberUnrevoked: must revoke partitions before it moves on.
	memberUnrevoked memberState = 1
	// memberUnreleased: at the target epoch, waiting for partitions
	// other members have not revoked yet.
	memberUnreleased memberState = 2
	// memberUnknown: a state a newer Kafka wrote; the member is fenced
	// unless it owns nothing.
	memberUnknown memberState = 127
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "stable"
	case memberUnrevoked:
		return "unrevoked_partitions"
	case memberUnreleased:
		return "unreleased_partitions"
	default:
		return "unknown"
	}
}

// leaveEpoch and staticLeaveEpoch are the member epochs of a leave and
// of a static member's temporary leave (KIP-848's -1 and -2).
const (
	leaveEpoch       = -1
	staticLeaveEpoch = -2
)

// topicRefreshInterval bounds how often a heartbeat looks for topic
// changes (partitions added, topics created or deleted, new regex
// matches) that move the group to a new epoch.
const topicRefreshInterval = time.Second

// assignment is a set of partitions by topic id; partitions are sorted
// and a topic has at least one.
type assignment map[[16]byte][]int32

func (a assignment) topicIDs() [][16]byte {
	ids := slices.Collect(maps.Keys(a))
	slices.SortFunc(ids, func(x, y [16]byte) int { return bytes.Compare(x[:], y[:]) })
	return ids
}

func (a assignment) has(id [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(a[id], p)
	return ok
}

func (a assignment) add(id [16]byte, p int32) {
	ps := a[id]
	if i, ok := slices.BinarySearch(ps, p); !ok {
		a[id] = slices.Insert(ps, i, p)
	}
}

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) equal(b assignment) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]int32])
}

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for id, ps := range a {
		out[id] = slices.Clone(ps)
	}
	return out
}

// each calls fn for every partition, in topic id and partition order.
func (a assignment) each(fn func(id [16]byte, p int32)) {
	for _, id := range a.topicIDs() {
		for _, p := range a[id] {
			fn(id, p)
		}
	}
}

// tpid is a partition by topic id.
type tpid struct {
	topic     [16]byte
	partition int32
}

// topicMeta is a subscribed topic as of the last look at the topics.
type topicMeta struct {
	name       string
	id         [16]byte
	partitions int32
}

// cmember is one member of a consumer group.
type cmember struct {
	id               string
	instanceID       *string
	rackID           *string
	clientID         string
	clientHost       string
	topics           []string // SubscribedTopicNames, sorted
	regex            string   // SubscribedTopicRegex; "" for none
	re               *regexp.Regexp
	assignor         string // ServerAssignor; "" for none
	rebalanceTimeout time.Duration

	memberAssign

	// lastHeartbeat starts the session (group.consumer.session.timeout.ms).
	lastHeartbeat time.Time
	// revokeDeadline is when a member that has not revoked what it was
	// asked to is removed (its rebalance timeout); zero unless
	// state is memberUnrevoked.
	revokeDeadline time.Time
}

// memberAssign is a member's reconciliation state: what
// ConsumerGroupCurrentMemberAssignment records. Its assignments are
// replaced (setAssign), never changed in place, so a copy of a
// memberAssign is a snapshot.
type memberAssign struct {
	epoch, prevEpoch int32
	state            memberState
	assigned         assignment // the member owns (or may take) these
	revoking         assignment // the member must revoke these
}

func (a memberAssign) equal(b memberAssign) bool {
	return a.epoch == b.epoch && a.prevEpoch == b.prevEpoch && a.state == b.state &&
		a.assigned.equal(b.assigned) && a.revoking.equal(b.revoking)
}

func (a memberAssign) clone() memberAssign {
	a.assigned, a.revoking = a.assigned.clone(), a.revoking.clone()
	return a
}

// subscribes reports whether m subscribes to the topic named name, by
// name or by its regular expression.
func (m *cmember) subscribes(name string) bool {
	if _, ok := slices.BinarySearch(m.topics, name); ok {
		return true
	}
	return m.re != nil && m.re.MatchString(name)
}

// consumerGroup is the KIP-848 state of a group of type "consumer". It is
// guarded by its group's mu.
type consumerGroup struct {
	epoch           int32  // the group epoch, bumped by membership, subscription and topic changes
	assignmentEpoch int32  // the epoch of the target assignment
	assignor        string // the assignor of the target assignment

	members map[string]*cmember
	static  map[string]string     // group.instance.id -> member id
	target  map[string]assignment // member id -> target assignment
	owner   map[tpid]string       // partition -> the member that owns it (assigned or revoking)

	topics   map[string]topicMeta // subscribed topics that exist, by name
	topicsAt time.Time            // when topics was computed

	// Writes: heartbeats are answered once their records are durable;
	// one without records waits for those in flight (waiters). A failed
	// write leaves memory ahead of the log: dirty makes the next
	// heartbeat rewrite the whole group.
	inflight int
	waiters  []func(error)
	dirty    bool
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members: make(map[string]*cmember),
		static:  make(map[string]string),
		target:  make(map[string]assignment),
		owner:   make(map[tpid]string),
		topics:  make(map[string]topicMeta),
	}
}

// ordered returns the members sorted by member id.
func (cg *consumerGroup) ordered() []*cmember {
	out := slices.Collect(maps.Values(cg.members))
	slices.SortFunc(out, func(a, b *cmember) int { return cmp.Compare(a.id, b.id) })
	return out
}

// stateName is Kafka's ConsumerGroupState: Empty, Assigning (the target
// lags the group epoch), Reconciling (a member is not at the target), or
// Stable.
func (cg *consumerGroup) stateName() string {
	if len(cg.members) == 0 {
		return "Empty"
	}
	if cg.epoch > cg.assignmentEpoch {
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// topicName names a topic id for answers: from the subscribed topics, else
// ask the resolver ("" if the topic is gone).
func (c *Coordinator) topicName(cg *consumerGroup, id [16]byte) string {
	for _, t := range cg.topics {
		if t.id == id {
			return t.name
		}
	}
	if c.topics != nil {
		if name, ok := c.topics.TopicName(id); ok {
			return name
		}
	}
	return ""
}

// setAssign replaces m's reconciliation state, moving partition ownership.
func (cg *consumerGroup) setAssign(m *cmember, next memberAssign) {
	release := func(id [16]byte, p int32) {
		if cg.owner[tpid{id, p}] == m.id {
			delete(cg.owner, tpid{id, p})
		}
	}
	m.assigned.each(release)
	m.revoking.each(release)
	m.memberAssign = next
	claim := func(id [16]byte, p int32) { cg.owner[tpid{id, p}] = m.id }
	m.assigned.each(claim)
	m.revoking.each(claim)
}

// reconcile is Kafka's CurrentAssignmentBuilder: m's next state given its
// target, the target epoch and the partitions it reports owning (owned;
// unknown when the heartbeat did not say). A member gives up partitions
// before it moves to a new epoch, and gets a partition only once its
// previous owner has revoked it.
func (cg *consumerGroup) reconcile(m *cmember, owned assignment, known bool) memberAssign {
	if m.epoch == cg.assignmentEpoch && m.state == memberStable {
		return m.memberAssign
	}
	ownsRevoked := func(revoking assignment) bool {
		if !known {
			return true
		}
		for id, ps := range owned {
			for _, p := range ps {
				if revoking.has(id, p) {
					return true
				}
			}
		}
		return false
	}
	if m.state == memberUnrevoked && ownsRevoked(m.revoking) {
		return m.memberAssign
	}
	// A member in an unknown state (a newer Kafka wrote it) gets here
	// owning nothing (consumerBeat fences it otherwise) and starts over.
	return cg.nextAssignment(m, m.epoch, ownsRevoked)
}

// nextAssignment is Kafka's computeNextAssignment from m's assigned
// partitions towards its target.
func (cg *consumerGroup) nextAssignment(m *cmember, memberEpoch int32, ownsRevoked func(assignment) bool) memberAssign {
	target := cg.target[m.id]
	assigned, revoking, pending := make(assignment), make(assignment), make(assignment)
	unreleased := false
	ids := make(map[[16]byte]bool)
	for id := range target {
		ids[id] = true
	}
	for id := range m.assigned {
		ids[id] = true
	}
	for id := range ids {
		for _, p := range m.assigned[id] {
			if target.has(id, p) {
				assigned.add(id, p)
			} else {
				revoking.add(id, p)
			}
		}
		for _, p := range target[id] {
			if assigned.has(id, p) {
				continue
			}
			// A partition still owned by another member (assigned or
			// being revoked) is not released yet.
			if o, ok := cg.owner[tpid{id, p}]; ok && o != m.id {
				unreleased = true
				continue
			}
			pending.add(id, p)
		}
	}
	next := memberAssign{prevEpoch: m.epoch, assigned: assigned, revoking: make(assignment)}
	switch {
	case len(revoking) > 0 && ownsRevoked(revoking):
		// Stay at this epoch until the revocation is acknowledged.
		next.state, next.epoch, next.revoking = memberUnrevoked, memberEpoch, revoking
	case len(pending) > 0 || unreleased:
		next.state, next.epoch = memberStable, cg.assignmentEpoch
		if unreleased {
			next.state = memberUnreleased
		}
		pending.each(next.assigned.add)
	default:
		next.state, next.epoch = memberStable, cg.assignmentEpoch
	}
	return next
}

// consumerRecords collects the records of one change to a consumer group.
type consumerRecords []Record

func (r *consumerRecords) add(recs ...Record) { *r = append(*r, recs...) }

func (r *consumerRecords) epoch(gid string, e int32) {
	r.add(Record{Key: consumerGroupKey(recConsumerMetadata, gid), Value: epochValue(e)})
}

func (r *consumerRecords) targetEpoch(gid string, e int32) {
	r.add(Record{Key: consumerGroupKey(recConsumerTargetMeta, gid), Value: epochValue(e)})
}

func (r *consumerRecords) member(gid string, m *cmember) {
	v := memberMetaValue{
		instanceID: m.instanceID, rackID: m.rackID, clientID: m.clientID, clientHost: m.clientHost,
		topics: m.topics, rebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond),
	}
	if v.topics == nil {
		v.topics = []string{}
	}
	if m.regex != "" {
		re := m.regex
		v.regex = &re
	}
	if m.assignor != "" {
		a := m.assignor
		v.assignor = &a
	}
	r.add(Record{Key: consumerMemberKey(recConsumerMember, gid, m.id), Value: v.appendTo(nil)})
}

func (r *consumerRecords) target(gid, mid string, a assignment) {
	r.add(Record{Key: consumerMemberKey(recConsumerTarget, gid, mid), Value: targetValue(a)})
}

func (r *consumerRecords) current(gid string, m *cmember) {
	v := currentValue{epoch: m.epoch, prevEpoch: m.prevEpoch, state: m.state, assigned: m.assigned, revoking: m.revoking}
	r.add(Record{Key: consumerMemberKey(recConsumerCurrent, gid, m.id), Value: v.appendTo(nil)})
}

// memberGone writes a member's tombstones, in Kafka's order.
func (r *consumerRecords) memberGone(gid, mid string) {
	r.add(Record{Key: consumerMemberKey(recConsumerCurrent, gid, mid)},
		Record{Key: consumerMemberKey(recConsumerTarget, gid, mid)},
		Record{Key: consumerMemberKey(recConsumerMember, gid, mid)})
}

// tombstones deletes a consumer group's records (not its offsets).
func (cg *consumerGroup) tombstones(gid string) []Record {
	var r consumerRecords
	for _, m := range cg.ordered() {
		r.memberGone(gid, m.id)
	}
	r.add(Record{Key: consumerGroupKey(recConsumerTargetMeta, gid)},
		Record{Key: consumerGroupKey(recConsumerPartitions, gid)},
		Record{Key: consumerGroupKey(recConsumerMetadata, gid)})
	return r
}

// snapshot is every record of the group's current state.
func (cg *consumerGroup) snapshot(gid string) consumerRecords {
	var r consumerRecords
	r.epoch(gid, cg.epoch)
	for _, m := range cg.ordered() {
		r.member(gid, m)
		r.target(gid, m.id, cg.target[m.id])
		r.current(gid, m)
	}
	r.targetEpoch(gid, cg.assignmentEpoch)
	return r
}

// isConsumer reports whether g is a KIP-848 consumer group.
func (g *group) isConsumer() bool { return g.cg != nil }

// typeName is the group type ListGroups reports.
func (g *group) typeName() string {
	if g.isShare() {
		return shareGroupType
	}
	if g.isConsumer() {
		return "consumer"
	}
	return "classic"
}

// stateName is the state DescribeGroups and ListGroups report.
func (g *group) stateName() string {
	if g.isConsumer() && g.state != stateDead {
		return g.cg.stateName()
	}
	if g.isShare() && g.state != stateDead {
		return g.sh.sg.State()
	}
	return g.state.String()
}

// emptyClassic reports whether g is a classic group nobody is in, which
// an 848 member may convert.
func (g *group) emptyClassic() bool {
	return !g.isConsumer() && !g.isShare() && g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0
}

// toConsumer converts an empty classic group into a consumer group
// (KIP-848's upgrade of an empty group); its offsets stay. The classic
// metadata record is deleted.
func (c *Coordinator) toConsumer(g *group, r *consumerRecords, now time.Time) {
	if g.persisted || g.generation > 0 {
		r.add(groupTombstone(g.id))
	}
	c.log.Info("converting empty classic group to a consumer group", "group", g.id)
	g.cg = newConsumerGroup()
	g.protocolType, g.protocol, g.leader, g.generation = consumerProtocolType, "", "", 0
	g.persisted = false
	g.transition(stateEmpty, now)
}

// toClassic converts an empty consumer group back into a classic group
// (a classic JoinGroup, as Kafka does); its records are deleted, its
// offsets stay.
func (c *Coordinator) toClassic(g *group, now time.Time) {
	c.log.Info("converting empty consumer group to a classic group", "group", g.id)
	recs := g.cg.tombstones(g.id)
	g.cg = nil
	g.protocolType, g.generation, g.persisted = "", 0, false
	g.transition(stateEmpty, now)
	c.write(g.partition, recs, func(err error) {
		if err != nil {
			c.log.Warn("writing consumer group tombstones failed", "group", g.id, "err", err)
		}
	})
}

// syncConsumerState keeps g.state, which the classic code and offset
// expiry read, in line with a consumer group: Empty without members,
// else Stable. The consumer group's own state is cg.stateName.
func (g *group) syncConsumerState(now time.Time) {
	want := stateStable
	if len(g.cg.members) == 0 {
		want = stateEmpty
	}
	if g.state != want && g.state != stateDead {
		g.transition(want, now)
	}
}

// refreshTopics recomputes the subscribed topics (at most every
// topicRefreshInterval unless forced) and reports whether they changed.
func (c *Coordinator) refreshTopics(g *group, now time.Time, force bool) bool {
	cg := g.cg
	if c.topics == nil || (!force && now.Before(cg.topicsAt.Add(topicRefreshInterval))) {
		return false
	}
	cg.topicsAt = now
	resolved := c.resolveTopics(cg)
	changed := !maps.Equal(resolved, cg.topics)
	cg.topics = resolved
	return changed
}

// resolveTopics is the topics some member subscribes to, by name or
// regular expression, that exist.
func (c *Coordinator) resolveTopics(cg *consumerGroup) map[string]topicMeta {
	return resolveTopicsFrom(cg, c.topics.Topics())
}

func resolveTopicsFrom(cg *consumerGroup, all []TopicInfo) map[string]topicMeta {
	names := make(map[string]bool)
	res := make(map[string]*regexp.Regexp)
	for _, m := range cg.members {
		for _, t := range m.topics {
			names[t] = true
		}
		if m.re != nil {
			res[m.regex] = m.re
		}
	}
	out := make(map[string]topicMeta)
	if len(names) == 0 && len(res) == 0 {
		return out
	}
	for _, t := range all {
		match := names[t.Name]
		for _, re := range res {
			if match {
				break
			}
			match = re.MatchString(t.Name)
		}
		if match && t.Partitions > 0 {
			out[t.Name] = topicMeta{name: t.Name, id: t.ID, partitions: t.Partitions}
		}
	}
	return out
}

// bumpEpoch moves the group to a new epoch and computes its target
// assignment (Kafka computes it on the next heartbeat; doing it at once
// is the same to members, and Assigning is never seen).
func (c *Coordinator) bumpEpoch(g *group, reason string, now time.Time, r *consumerRecords) {
	cg := g.cg
	c.refreshTopics(g, now, true)
	cg.epoch++
	g.rebalances++
	r.epoch(g.id, cg.epoch)
	c.computeTarget(g, r)
	c.log.Info("consumer group epoch bumped", "group", g.id, "epoch", cg.epoch, "reason", reason, "members", len(cg.members), "assignor", cg.assignor)
}

// computeTarget runs the group's assignor and records the targets that
// changed.
func (c *Coordinator) computeTarget(g *group, r *consumerRecords) {
	cg := g.cg
	cg.assignor = c.preferredAssignor(cg)
	members := make([]assignMember, 0, len(cg.members))
	for _, m := range cg.ordered() {
		am := assignMember{id: m.id, topics: make(map[string]bool)}
		for name := range cg.topics {
			if m.subscribes(name) {
				am.topics[name] = true
			}
		}
		members = append(members, am)
	}
	topics := slices.SortedFunc(maps.Values(cg.topics), func(a, b topicMeta) int { return cmp.Compare(a.name, b.name) })
	var out map[string]assignment
	if cg.assignor == "range" {
		out = assignRange(members, topics)
	} else {
		out = assignUniform(members, topics, cg.target)
	}
	for _, m := range members {
		a := out[m.id]
		if a == nil {
			a = make(assignment)
		}
		if old, ok := cg.target[m.id]; !ok || !old.equal(a) {
			cg.target[m.id] = a
			r.target(g.id, m.id, a)
		}
	}
	for id := range cg.target {
		if cg.members[id] == nil {
			delete(cg.target, id)
		}
	}
	cg.assignmentEpoch = cg.epoch
	r.targetEpoch(g.id, cg.assignmentEpoch)
}

// preferredAssignor is Kafka's: the server assignor most members ask for
// (ties to the earlier in group.consumer.assignors), else the first
// configured.
func (c *Coordinator) preferredAssignor(cg *consumerGroup) string {
	votes := make(map[string]int)
	for _, m := range cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best, n := c.cfg.ConsumerAssignors[0], 0
	for _, name := range c.cfg.ConsumerAssignors {
		if votes[name] > n {
			best, n = name, votes[name]
		}
	}
	return best
}

// removeConsumerMember fences m out of the group: a leave, an expired
// session or rebalance timeout. Its partitions are free at once and the
// group moves to a new epoch.
func (c *Coordinator) removeConsumerMember(g *group, m *cmember, reason string, now time.Time, r *consumerRecords) {
	cg := g.cg
	c.log.Info("removing consumer group member", "group", g.id, "member", m.id, "epoch", m.epoch, "reason", reason)
	cg.setAssign(m, memberAssign{assigned: make(assignment), revoking: make(assignment)})
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	r.memberGone(g.id, m.id)
	c.bumpEpoch(g, reason, now, r)
	g.syncConsumerState(now)
}

// tickConsumer runs a consumer group's timers: session timeouts and
// rebalance (revocation) timeouts.
func (c *Coordinator) tickConsumer(g *group, now time.Time) {
	cg := g.cg
	due := func(m *cmember) bool {
		return !now.Before(m.lastHeartbeat.Add(c.cfg.ConsumerSessionTimeout)) ||
			(m.state == memberUnrevoked && !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline))
	}
	// Tick runs every 100ms: sort (for a deterministic record order) only
	// when a timer is due.
	anyDue := false
	for _, m := range cg.members {
		if anyDue = due(m); anyDue {
			break
		}
	}
	if !anyDue {
		return
	}
	var r consumerRecords
	for _, m := range cg.ordered() {
		switch {
		case !now.Before(m.lastHeartbeat.Add(c.cfg.ConsumerSessionTimeout)):
			c.removeConsumerMember(g, m, "session timeout", now, &r)
		case m.state == memberUnrevoked && !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline):
			c.removeConsumerMember(g, m, "partitions not revoked within the rebalance timeout", now, &r)
		}
	}
	if len(r) > 0 {
		c.persist(g, r, func(err error) {
			if err != nil {
				c.log.Warn("writing consumer group records failed", "group", g.id, "err", err)
			}
		})
	}
}

// persist queues recs (the whole group instead when an earlier write
// failed) and calls done, with no lock held, once they are durable or
// failed. g is a locked consumer group.
func (c *Coordinator) persist(g *group, recs consumerRecords, done func(error)) {
	cg := g.cg
	if cg.dirty {
		recs = cg.snapshot(g.id)
		cg.dirty = false
	}
	cg.inflight++
	g.persisted = true
	c.write(g.partition, recs, func(err error) {
		g.mu.Lock()
		cg.inflight--
		if err != nil {
			cg.dirty = true
		}
		var ws []func(error)
		if cg.inflight == 0 {
			ws, cg.waiters = cg.waiters, nil
		}
		g.mu.Unlock()
		done(err)
		for _, w := range ws {
			w(err)
		}
	})
}
