package group

// SyncGroup, versions 0-5. The leader's assignment is written to
// __consumer_offsets with the generation, and every member is answered
// once that write is durable. v5 checks ProtocolType and Protocol.

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup serves a SyncGroup request. respond is called exactly once;
// followers wait until the leader's assignment is durable.
func (c *Coordinator) SyncGroup(req *kmsg.SyncGroupRequest, respond func(*kmsg.SyncGroupResponse)) {
	now := c.cfg.Now()
	fail := func(code int16) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		respond(resp)
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	g, code := c.acquire(req.Group, false)
	if code != 0 {
		fail(code)
		return
	}
	if g == nil {
		fail(kerr.UnknownMemberID.Code)
		return
	}
	var f fx
	defer c.release(g, &f)

	m := g.members[req.MemberID]
	switch {
	case g.state == stateDead:
		code = kerr.CoordinatorNotAvailable.Code
	case g.fenced(req.InstanceID, req.MemberID):
		code = kerr.FencedInstanceID.Code
	case m == nil:
		code = kerr.UnknownMemberID.Code
	case req.Generation != g.generation:
		code = kerr.IllegalGeneration.Code
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		code = kerr.InconsistentGroupProtocol.Code
	case g.state == stateEmpty:
		code = kerr.UnknownMemberID.Code
	case g.state == statePreparingRebalance:
		code = kerr.RebalanceInProgress.Code
	}
	if code != 0 {
		f.add(func() { fail(code) })
		return
	}
	m.lastHeartbeat = now
	delete(g.pendingSync, m.id)
	if g.state == stateStable {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		pt, p := g.protocolType, g.protocol
		resp.ProtocolType, resp.Protocol = &pt, &p
		resp.MemberAssignment = m.assignment
		f.add(func() { respond(resp) })
		return
	}

	// CompletingRebalance: wait for the leader's assignment.
	if m.syncReply != nil {
		c.answerSyncError(m, kerr.RebalanceInProgress.Code, &f)
	}
	m.syncReq, m.syncReply = req, respond
	if m.id != g.leader {
		return
	}
	assignment := make(map[string][]byte, len(g.members))
	for _, a := range req.GroupAssignment {
		if g.members[a.MemberID] != nil {
			assignment[a.MemberID] = bytes.Clone(a.MemberAssignment)
		}
	}
	for id := range g.members {
		if assignment[id] == nil {
			assignment[id] = []byte{}
		}
	}
	gen := g.generation
	c.storeGroup(g, assignment, func(err error) {
		var f fx
		g.mu.Lock()
		if g.state == stateCompletingRebalance && g.generation == gen && !g.removed {
			if err != nil {
				c.log.Warn("writing group assignment failed", "group", g.id, "generation", gen, "err", err)
				c.resetAssignment(g, storeErrorCode(err, false), &f)
				c.maybePrepareRebalance(g, "failed to persist the assignment", c.cfg.Now(), &f)
			} else {
				c.propagateAssignment(g, assignment, &f)
				g.transition(stateStable, c.cfg.Now())
			}
		}
		g.mu.Unlock()
		c.flush()
		f.run()
	})
}
