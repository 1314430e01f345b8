package group

// ConsumerGroupHeartbeat, versions 0-1 (KIP-848): joins (member epoch 0),
// heartbeats, leaves (-1) and static members' temporary leaves (-2). v0
// members may omit their member id and get one; v1 members bring their
// own. RackID is stored but no assignor uses racks.

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cgRequest is one ConsumerGroupHeartbeat being served.
type cgRequest struct {
	req                  *kmsg.ConsumerGroupHeartbeatRequest
	clientID, clientHost string
	re                   *regexp.Regexp // the compiled SubscribedTopicRegex
	now                  time.Time
}

// cgError is a failed heartbeat: a code and Kafka's message.
type cgError struct {
	code int16
	msg  string
}

func cgErr(e *kerr.Error, format string, args ...any) *cgError {
	return &cgError{code: e.Code, msg: fmt.Sprintf(format, args...)}
}

// ConsumerGroupHeartbeat serves a ConsumerGroupHeartbeat request.
// respond is called exactly once, once the records the heartbeat wrote
// (if any, or those in flight for the group) are durable; possibly from
// another goroutine.
func (c *Coordinator) ConsumerGroupHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string, respond func(*kmsg.ConsumerGroupHeartbeatResponse)) {
	fail := func(e *cgError) {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = e.code
		if e.msg != "" {
			msg := e.msg
			resp.ErrorMessage = &msg
		}
		respond(resp)
	}
	hb := &cgRequest{req: req, clientID: clientID, clientHost: clientHost, now: c.cfg.Now()}
	if e := c.validateHeartbeat(hb); e != nil {
		fail(e)
		return
	}
	g, code := c.acquire(req.Group, req.MemberEpoch == 0)
	if code != 0 {
		fail(&cgError{code: code})
		return
	}
	if g == nil {
		fail(cgErr(kerr.GroupIDNotFound, "Consumer group %s not found.", req.Group))
		return
	}
	var f fx
	defer c.release(g, &f)
	var r consumerRecords
	resp, e := c.consumerHeartbeat(g, hb, &r)
	if e != nil {
		f.add(func() { fail(e) })
		return
	}
	reply := func(err error) {
		if err != nil {
			c.log.Warn("writing consumer group records failed", "group", g.id, "err", err)
			fail(&cgError{code: storeErrorCode(err, false)})
			return
		}
		respond(resp)
	}
	cg := g.cg
	switch {
	case len(r) > 0 || cg.dirty:
		c.persist(g, r, reply)
	case cg.inflight > 0:
		// Answer no earlier than the writes this answer reflects.
		cg.waiters = append(cg.waiters, reply)
	default:
		f.add(func() { respond(resp) })
	}
}

// validateHeartbeat is Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid,
// except that a static leave (epoch -2) may omit its instance id: kgo
// (v1.22) sends it without one, Kafka answers INVALID_REQUEST, and the
// member then holds its partitions until its session expires. Berth
// finds the member by its id instead (see consumerLeave).
func (c *Coordinator) validateHeartbeat(hb *cgRequest) *cgError {
	req := hb.req
	invalid := func(msg string) *cgError { return cgErr(kerr.InvalidRequest, "%s", msg) }
	switch {
	case (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == leaveEpoch) && req.MemberID == "":
		return invalid("MemberId can't be empty.")
	case req.Group == "":
		return invalid("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return invalid("RackId can't be empty.")
	}
	switch {
	case req.MemberEpoch == 0:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		case req.Topics == nil || len(req.Topics) > 0:
			return invalid("TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case req.MemberEpoch < staticLeaveEpoch:
		return invalid("MemberEpoch is invalid.")
	}
	if a := req.ServerAssignor; a != nil && !slices.Contains(c.cfg.ConsumerAssignors, *a) {
		return cgErr(kerr.UnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %v.", *a, c.cfg.ConsumerAssignors)
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		// Kafka matches the whole topic name (RE2/J, whose syntax Go's
		// regexp shares).
		_, err := regexp.Compile(*req.SubscribedTopicRegex)
		if err == nil {
			hb.re, err = regexp.Compile("^(?:" + *req.SubscribedTopicRegex + ")$")
		}
		if err != nil {
			return cgErr(kerr.InvalidRegularExpression, "SubscribedTopicRegex %s is not a valid regular expression: %v.", *req.SubscribedTopicRegex, err)
		}
	}
	return nil
}

// consumerHeartbeat serves a valid heartbeat with g locked.
func (c *Coordinator) consumerHeartbeat(g *group, hb *cgRequest, r *consumerRecords) (*kmsg.ConsumerGroupHeartbeatResponse, *cgError) {
	req := hb.req
	switch {
	case g.state == stateDead:
		// Being deleted or moved: the client looks the coordinator up again.
		return nil, &cgError{code: kerr.CoordinatorNotAvailable.Code}
	case !g.isConsumer() && (req.MemberEpoch != 0 || !g.emptyClassic()):
		// Berth converts only empty classic groups; a classic group with
		// members is Kafka's answer under group.consumer.migration.policy=disabled.
		return nil, cgErr(kerr.GroupIDNotFound, "Group %s is not a consumer group.", g.id)
	}
	switch req.MemberEpoch {
	case 0:
		return c.consumerJoin(g, hb, r)
	case leaveEpoch, staticLeaveEpoch:
		return c.consumerLeave(g, hb, r)
	default:
		return c.consumerBeat(g, hb, r)
	}
}

func (c *Coordinator) heartbeatResponse(hb *cgRequest, m *cmember) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := hb.req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	id := m.id
	resp.MemberID = &id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval / time.Millisecond)
	return resp
}

func responseAssignment(a assignment) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	out.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, id := range a.topicIDs() {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID, t.Partitions = id, slices.Clone(a[id])
		out.Topics = append(out.Topics, t)
	}
	return &out
}

// consumerJoin serves member epoch 0: a new member, a static member
// replacing its released predecessor, or a known member rejoining.
//
// A known member rejoining with epoch 0 (after FENCED_MEMBER_EPOCH, or a
// lost response) owns nothing, as the request says: it starts over from
// its target at once. Kafka instead fences such a rejoin until the
// member's session expires, unless the member never got past its first
// epoch; clients keep their member id and rejoin, so Berth takes them
// back without that wait.
func (c *Coordinator) consumerJoin(g *group, hb *cgRequest, r *consumerRecords) (*kmsg.ConsumerGroupHeartbeatResponse, *cgError) {
	req := hb.req
	cg := g.cg
	if cg == nil {
		cg = newConsumerGroup() // an empty classic group, converted below
	}
	memberID := req.MemberID
	if memberID == "" { // v0: the coordinator names the member
		memberID = c.cfg.NewMemberID(hb.clientID)
	}
	m := cg.members[memberID]
	var prev *cmember // a released static member this one replaces
	if req.InstanceID != nil {
		if id, ok := cg.static[*req.InstanceID]; ok && id != memberID {
			prev = cg.members[id]
			if prev != nil && prev.epoch != staticLeaveEpoch {
				return nil, cgErr(kerr.UnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, *req.InstanceID, id)
			}
		}
	}
	if max := c.cfg.ConsumerMaxGroupSize; m == nil && prev == nil && max > 0 && len(cg.members) >= max {
		return nil, cgErr(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", max)
	}

	// Valid: from here on the join changes the group.
	if !g.isConsumer() {
		c.toConsumer(g, r, hb.now)
		cg = g.cg
	}
	bump, reason := cg.epoch == 0, "new group"
	var before memberAssign
	switch {
	case prev != nil:
		// The new member takes the old one's place: its subscription, its
		// target, and (below) the partitions of that target.
		m = &cmember{
			id: memberID, instanceID: prev.instanceID, rackID: prev.rackID,
			topics: prev.topics, regex: prev.regex, re: prev.re, assignor: prev.assignor,
			rebalanceTimeout: prev.rebalanceTimeout,
			memberAssign:     memberAssign{assigned: make(assignment), revoking: make(assignment)},
		}
		if m != nil {
			// The member id was in the group under another instance id
			// (or none): that member is replaced too.
			cg.setAssign(m, memberAssign{assigned: make(assignment), revoking: make(assignment)})
			if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
				delete(cg.static, *m.instanceID)
			}
		}
		target := cg.target[prev.id]
		cg.setAssign(prev, memberAssign{assigned: make(assignment), revoking: make(assignment)})
		delete(cg.members, prev.id)
		delete(cg.target, prev.id)
		r.memberGone(g.id, prev.id)
		cg.members[m.id] = m
		cg.static[*m.instanceID] = m.id
		cg.target[m.id] = target
		r.target(g.id, m.id, target)
		c.log.Info("static member rejoined", "group", g.id, "instance", *req.InstanceID, "old", prev.id, "new", m.id)
	case m == nil:
		m = &cmember{id: memberID, memberAssign: memberAssign{assigned: make(assignment), revoking: make(assignment)}}
		cg.members[m.id] = m
		cg.target[m.id] = make(assignment)
		bump, reason = true, "member "+m.id+" joined"
		c.log.Info("member joins consumer group", "group", g.id, "member", m.id)
	default:
		before = m.memberAssign
		c.log.Info("member rejoins consumer group", "group", g.id, "member", m.id, "epoch", m.epoch)
	}
	// The member owns nothing: start over from epoch 0.
	cg.setAssign(m, memberAssign{assigned: make(assignment), revoking: make(assignment)})
	m.revokeDeadline = time.Time{}
	m.lastHeartbeat = hb.now
	subscribed, changed := c.applyMemberFields(cg, m, hb)
	if changed || prev != nil || before.assigned == nil {
		r.member(g.id, m)
	}
	switch {
	case subscribed && !bump:
		bump, reason = true, "member "+m.id+" changed its subscription"
	case !bump && c.refreshTopics(g, hb.now, false):
		bump, reason = true, "subscribed topics changed"
	}
	if bump {
		c.bumpEpoch(g, reason, hb.now, r)
	}
	c.reconcileMember(g, m, before, make(assignment), true, hb.now, r)
	g.syncConsumerState(hb.now)
	resp := c.heartbeatResponse(hb, m)
	resp.Assignment = responseAssignment(m.assigned)
	return resp, nil
}

// consumerBeat serves a heartbeat of a member in the group.
func (c *Coordinator) consumerBeat(g *group, hb *cgRequest, r *consumerRecords) (*kmsg.ConsumerGroupHeartbeatResponse, *cgError) {
	req := hb.req
	cg := g.cg
	if req.InstanceID != nil {
		id, ok := cg.static[*req.InstanceID]
		switch {
		case !ok:
			return nil, cgErr(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		case id != req.MemberID:
			return nil, cgErr(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, id)
		}
	}
	m := cg.members[req.MemberID]
	if m == nil {
		return nil, cgErr(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.id)
	}
	owned, known := ownedPartitions(req.Topics)
	switch {
	case req.MemberEpoch > m.epoch:
		return nil, cgErr(kerr.FencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch)
	case req.MemberEpoch < m.epoch && (req.MemberEpoch != m.prevEpoch || !known || !subset(owned, m.assigned)):
		// The previous epoch is accepted with a subset of the assignment:
		// the answer that bumped the epoch may have been lost.
		return nil, cgErr(kerr.FencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch)
	}
	if m.state == memberUnknown && (!known || owned.count() > 0) {
		return nil, cgErr(kerr.FencedMemberEpoch, "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")
	}
	m.lastHeartbeat = hb.now
	before := m.memberAssign // assignments are replaced, never changed in place
	subscribed, changed := c.applyMemberFields(cg, m, hb)
	if changed {
		r.member(g.id, m)
	}
	switch {
	case subscribed:
		c.bumpEpoch(g, "member "+m.id+" changed its subscription", hb.now, r)
	case c.refreshTopics(g, hb.now, false):
		c.bumpEpoch(g, "subscribed topics changed", hb.now, r)
	}
	c.reconcileMember(g, m, before, owned, known, hb.now, r)
	resp := c.heartbeatResponse(hb, m)
	// A full request (sent on errors, or when the client's view changed)
	// always gets the assignment back, so a lost answer heals.
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if full || !m.assigned.equal(before.assigned) {
		resp.Assignment = responseAssignment(m.assigned)
	}
	return resp, nil
}

// reconcileMember moves m towards its target and records the change
// (before is its state when the request came in).
func (c *Coordinator) reconcileMember(g *group, m *cmember, before memberAssign, owned assignment, known bool, now time.Time, r *consumerRecords) {
	cg := g.cg
	next := cg.reconcile(m, owned, known)
	changed := !next.equal(m.memberAssign)
	if changed {
		cg.setAssign(m, next)
	}
	if changed && m.state == memberUnrevoked {
		m.revokeDeadline = now.Add(m.rebalanceTimeout)
	} else if m.state != memberUnrevoked {
		m.revokeDeadline = time.Time{}
	}
	if before.assigned == nil || !m.memberAssign.equal(before) {
		r.current(g.id, m)
		c.log.Debug("consumer group member reconciled", "group", g.id, "member", m.id, "epoch", m.epoch,
			"state", m.state, "assigned", m.assigned.count(), "revoking", m.revoking.count())
	}
}

// applyMemberFields applies a heartbeat's member fields (nil: unchanged) and
// reports whether the subscription changed and whether anything
// persisted did.
func (c *Coordinator) applyMemberFields(cg *consumerGroup, m *cmember, hb *cgRequest) (subscribed, changed bool) {
	req := hb.req
	if m.clientID != hb.clientID || m.clientHost != hb.clientHost {
		m.clientID, m.clientHost, changed = hb.clientID, hb.clientHost, true
	}
	if req.InstanceID != nil && (m.instanceID == nil || *m.instanceID != *req.InstanceID) {
		if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
			delete(cg.static, *m.instanceID)
		}
		inst := *req.InstanceID
		m.instanceID, changed = &inst, true
		cg.static[inst] = m.id
	}
	if req.RackID != nil && (m.rackID == nil || *m.rackID != *req.RackID) {
		rack := *req.RackID
		m.rackID, changed = &rack, true
	}
	if req.RebalanceTimeoutMillis >= 0 {
		if d := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond; d != m.rebalanceTimeout {
			m.rebalanceTimeout, changed = d, true
		}
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor, changed = *req.ServerAssignor, true
	}
	if req.SubscribedTopicNames != nil {
		topics := slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
		if !slices.Equal(topics, m.topics) || m.topics == nil {
			subscribed = subscribed || !slices.Equal(topics, m.topics)
			m.topics, changed = topics, true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex, m.re = *req.SubscribedTopicRegex, hb.re
		subscribed, changed = true, true
	}
	return subscribed, changed
}

// ownedPartitions is what a heartbeat says the member owns; known is
// false when it did not say (a keepalive).
func ownedPartitions(topics []kmsg.ConsumerGroupHeartbeatRequestTopic) (assignment, bool) {
	if topics == nil {
		return nil, false
	}
	a := make(assignment)
	for _, t := range topics {
		for _, p := range t.Partitions {
			a.add(t.TopicID, p)
		}
	}
	return a, true
}

func subset(a, of assignment) bool {
	for id, ps := range a {
		for _, p := range ps {
			if !of.has(id, p) {
				return false
			}
		}
	}
	return true
}

// consumerLeave serves member epochs -1 (leave) and -2 (a static member's
// temporary leave: it keeps its partitions, unassigned to others, until it
// rejoins under a new member id or its session expires). A -2 from a
// dynamic member is a leave, as in Kafka.
func (c *Coordinator) consumerLeave(g *group, hb *cgRequest, r *consumerRecords) (*kmsg.ConsumerGroupHeartbeatResponse, *cgError) {
	req := hb.req
	cg := g.cg
	var m *cmember
	if req.InstanceID == nil {
		// By member id; for -2 the member's own instance id stands in
		// for the one the request left out.
		if m = cg.members[req.MemberID]; m == nil {
			return nil, cgErr(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.id)
		}
	} else {
		id, ok := cg.static[*req.InstanceID]
		switch {
		case !ok:
			return nil, cgErr(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		case id != req.MemberID:
			return nil, cgErr(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, id)
		}
		m = cg.members[id]
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	id := req.MemberID
	resp.MemberID, resp.MemberEpoch = &id, req.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval / time.Millisecond)
	if req.MemberEpoch == staticLeaveEpoch && m.instanceID != nil {
		// Keep the assignment (others do not get it) but not what was
		// being revoked; the session keeps running.
		c.log.Info("static member leaves temporarily", "group", g.id, "member", m.id, "instance", *m.instanceID)
		next := m.memberAssign.clone()
		next.epoch, next.revoking = staticLeaveEpoch, make(assignment)
		cg.setAssign(m, next)
		m.revokeDeadline = time.Time{}
		r.current(g.id, m)
		return resp, nil
	}
	c.removeConsumerMember(g, m, "member left", hb.now, r)
	return resp, nil
}
