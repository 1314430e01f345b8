package group

// JoinGroup, versions 0-9 (classic protocol). KIP-394 member ids (v4+),
// KIP-345 static membership (v5+), KIP-814 SkipAssignment (v9). Reason
// (v8+) is only logged.

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup serves a JoinGroup request. respond is called exactly once,
// possibly later and from another goroutine: a join waits for the
// rebalance to complete.
func (c *Coordinator) JoinGroup(req *kmsg.JoinGroupRequest, clientID, clientHost string, respond func(*kmsg.JoinGroupResponse)) {
	now := c.cfg.Now()
	fail := func(code int16, memberID string) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = code
		resp.MemberID = memberID
		respond(resp)
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	switch {
	case req.Group == "":
		fail(kerr.InvalidGroupID.Code, req.MemberID)
		return
	case session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout:
		fail(kerr.InvalidSessionTimeout.Code, req.MemberID)
		return
	}
	g, code := c.acquire(req.Group, req.MemberID == "")
	if code != 0 {
		fail(code, req.MemberID)
		return
	}
	if g == nil {
		fail(kerr.UnknownMemberID.Code, req.MemberID)
		return
	}
	var f fx
	defer c.release(g, &f)
	j := &join{req: req, clientID: clientID, clientHost: clientHost, respond: respond, now: now}
	if code := c.join(g, j, &f); code != 0 {
		memberID := req.MemberID
		if code == kerr.GroupMaxSizeReached.Code {
			memberID = ""
		}
		f.add(func() { fail(code, memberID) })
	}
}

// join is one JoinGroup in flight.
type join struct {
	req                  *kmsg.JoinGroupRequest
	clientID, clientHost string
	respond              func(*kmsg.JoinGroupResponse)
	now                  time.Time
}

func (j *join) sessionTimeout() time.Duration {
	return time.Duration(j.req.SessionTimeoutMillis) * time.Millisecond
}

// rebalanceTimeout: v0 has none and uses the session timeout.
func (j *join) rebalanceTimeout() time.Duration {
	if j.req.Version == 0 || j.req.RebalanceTimeoutMillis <= 0 {
		return j.sessionTimeout()
	}
	return time.Duration(j.req.RebalanceTimeoutMillis) * time.Millisecond
}

func (j *join) protocols() []protocol {
	ps := make([]protocol, 0, len(j.req.Protocols))
	for _, p := range j.req.Protocols {
		ps = append(ps, protocol{name: p.Name, metadata: bytes.Clone(p.Metadata)})
	}
	return ps
}

// join runs Kafka's doJoinGroup with g locked; a non-zero code is the
// answer.
func (c *Coordinator) join(g *group, j *join, f *fx) int16 {
	req := j.req
	switch {
	case g.state == stateDead:
		// Being deleted or moved: the client looks the coordinator up again.
		return kerr.CoordinatorNotAvailable.Code
	case g.isShare():
		// Kafka's answer to a classic join of a share group.
		return kerr.InconsistentGroupProtocol.Code
	case g.isConsumer() && len(g.cg.members) > 0:
		// Kafka lets classic members join a consumer group (KIP-848's
		// online migration); Berth does not.
		return kerr.InconsistentGroupProtocol.Code
	case !c.acceptJoining(g, req.MemberID):
		return kerr.GroupMaxSizeReached.Code
	case !g.supportsProtocols(req):
		return kerr.InconsistentGroupProtocol.Code
	}
	if g.isConsumer() {
		// An empty consumer group becomes a classic group, as in Kafka.
		c.toClassic(g, j.now)
	}
	if req.MemberID == "" {
		return c.joinUnknown(g, j, f)
	}
	return c.joinKnown(g, j, f)
}

func (c *Coordinator) joinUnknown(g *group, j *join, f *fx) int16 {
	req := j.req
	// Kafka prefixes a static member's id with its instance id.
	prefix := j.clientID
	if req.InstanceID != nil {
		prefix = *req.InstanceID
	}
	newID := c.cfg.NewMemberID(prefix)
	if req.InstanceID != nil {
		if oldID, ok := g.static[*req.InstanceID]; ok {
			return c.rejoinStatic(g, g.members[oldID], newID, j, f)
		}
		c.addMember(g, newID, j, f)
		return 0
	}
	if req.Version >= 4 {
		// KIP-394: hand out the id; the member joins with it within its
		// session timeout, so a client that never comes back costs little.
		g.pending[newID] = j.now.Add(j.sessionTimeout())
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.MemberIDRequired.Code
		resp.MemberID = newID
		f.add(func() { j.respond(resp) })
		return 0
	}
	c.addMember(g, newID, j, f)
	return 0
}

func (c *Coordinator) joinKnown(g *group, j *join, f *fx) int16 {
	req := j.req
	if _, ok := g.pending[req.MemberID]; ok {
		c.addMember(g, req.MemberID, j, f)
		return 0
	}
	if g.fenced(req.InstanceID, req.MemberID) {
		return kerr.FencedInstanceID.Code
	}
	m := g.members[req.MemberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	switch g.state {
	case statePreparingRebalance:
		c.updateMember(g, m, j, "member rejoined", f)
	case stateCompletingRebalance:
		if m.matches(req) {
			// A resend of the join that completed: same answer.
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			c.fillJoin(g, m, resp, m.id == g.leader)
			f.add(func() { j.respond(resp) })
		} else {
			c.updateMember(g, m, j, "member changed its protocols", f)
		}
	case stateStable:
		if m.id == g.leader || !m.matches(req) {
			// The leader rejoining means it wants a new assignment
			// (metadata changed, say); so does a changed subscription.
			c.updateMember(g, m, j, "leader or changed member rejoined", f)
		} else {
			m.lastHeartbeat = j.now
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			c.fillJoin(g, m, resp, false)
			f.add(func() { j.respond(resp) })
		}
	default:
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// addMember is Kafka's addMemberAndRebalance.
func (c *Coordinator) addMember(g *group, id string, j *join, f *fx) {
	req := j.req
	m := &member{
		id:               id,
		clientID:         j.clientID,
		clientHost:       j.clientHost,
		protocolType:     req.ProtocolType,
		sessionTimeout:   j.sessionTimeout(),
		rebalanceTimeout: j.rebalanceTimeout(),
		protocols:        j.protocols(),
		isNew:            true,
		lastHeartbeat:    j.now,
	}
	if req.InstanceID != nil {
		inst := *req.InstanceID
		m.instanceID = &inst
	}
	m.joinReq, m.joinReply = req, j.respond
	m.joinSeq++
	if g.state == statePreparingRebalance && g.initialDelay {
		g.newMemberAdded = true
	}
	g.add(m)
	c.maybePrepareRebalance(g, "adding new member "+id, j.now, f)
	c.maybeCompleteJoin(g, j.now, f)
}

// updateMember is Kafka's updateMemberAndRebalance.
func (c *Coordinator) updateMember(g *group, m *member, j *join, reason string, f *fx) {
	c.setJoin(m, j, f)
	c.maybePrepareRebalance(g, reason+" "+m.id, j.now, f)
	c.maybeCompleteJoin(g, j.now, f)
}

// setJoin records a member's (re)join: protocols, timeouts, the waiting
// answer.
func (c *Coordinator) setJoin(m *member, j *join, f *fx) {
	if m.joinReply != nil {
		// A second join while one waits: the first is superseded.
		c.answerJoinError(m, kerr.RebalanceInProgress.Code, f)
	}
	m.protocols = j.protocols()
	m.protocolType = j.req.ProtocolType
	m.sessionTimeout = j.sessionTimeout()
	m.rebalanceTimeout = j.rebalanceTimeout()
	m.lastHeartbeat = j.now
	m.joinReq, m.joinReply = j.req, j.respond
	m.joinSeq++
}

// rejoinStatic is Kafka's updateStaticMemberAndRebalance: a static member
// restarted and joined without its member id. It takes over the old
// member's place under a new id; the old id is fenced. In a Stable group
// whose protocol would not change, there is no rebalance: the new id is
// persisted and the member gets the current generation (it then syncs
// for its assignment).
func (c *Coordinator) rejoinStatic(g *group, m *member, newID string, j *join, f *fx) int16 {
	oldID := m.id
	oldLeader := g.leader
	if m.joinReply != nil {
		c.answerJoinError(m, kerr.FencedInstanceID.Code, f)
	}
	if m.syncReply != nil {
		c.answerSyncError(m, kerr.FencedInstanceID.Code, f)
	}
	g.replaceID(m, newID)
	old := *m
	c.setJoin(m, j, f)
	c.log.Info("static member rejoined with a new member id", "group", g.id, "instance", *m.instanceID, "old", oldID, "new", newID)

	switch g.state {
	case stateStable:
		if g.selectProtocol() != g.protocol {
			c.prepareRebalance(g, "static member "+newID+" changed protocols", j.now, f)
			return 0
		}
		seq := m.joinSeq
		req := j.req
		c.storeGroup(g, nil, func(err error) {
			var f fx
			g.mu.Lock()
			if m.joinReply != nil && m.joinSeq == seq {
				if err != nil {
					code := storeErrorCode(err, false)
					c.log.Warn("persisting static member failed; reverting", "group", g.id, "member", newID, "err", err)
					reply := m.joinReply
					m.joinReply, m.joinReq = nil, nil
					if g.members[newID] == m {
						m.protocols, m.protocolType = old.protocols, old.protocolType
						m.sessionTimeout, m.rebalanceTimeout = old.sessionTimeout, old.rebalanceTimeout
						g.replaceID(m, oldID)
					}
					resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
					resp.ErrorCode = code
					f.add(func() { reply(resp) })
				} else {
					resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
					if req.Version >= 9 {
						isLeader := g.leader == m.id
						c.fillJoin(g, m, resp, isLeader)
						resp.SkipAssignment = isLeader
					} else {
						// Older clients: name the old leader, so a
						// restarted leader does not run a pointless
						// assignment a Stable group would ignore.
						c.fillJoin(g, m, resp, false)
						resp.LeaderID = oldLeader
					}
					c.answerJoin(m, resp, &f)
				}
			}
			g.mu.Unlock()
			f.run()
		})
	case stateCompletingRebalance:
		// The leader may be assigning under the old id: start over.
		c.prepareRebalance(g, "static member "+newID+" rejoined during sync", j.now, f)
	case statePreparingRebalance:
		c.maybeCompleteJoin(g, j.now, f)
	}
	return 0
}
