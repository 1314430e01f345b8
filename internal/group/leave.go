package group

// LeaveGroup, versions 0-5: v3+ leaves a batch of members, each by member
// id or by group.instance.id (KIP-345), with an error per member.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup serves a LeaveGroup request; respond is called once.
func (c *Coordinator) LeaveGroup(req *kmsg.LeaveGroupRequest, respond func(*kmsg.LeaveGroupResponse)) {
	now := c.cfg.Now()
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	finish := func() {
		if req.Version < 3 && len(resp.Members) == 1 && resp.ErrorCode == 0 {
			resp.ErrorCode = resp.Members[0].ErrorCode
		}
		if req.Version < 3 {
			resp.Members = nil
		}
		respond(resp)
	}
	perMember := func(code int16) {
		for _, l := range leaving {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = l.MemberID, l.InstanceID, code
			resp.Members = append(resp.Members, rm)
		}
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		finish()
		return
	}
	g, code := c.acquire(req.Group, false)
	if code != 0 {
		resp.ErrorCode = code
		finish()
		return
	}
	if g == nil {
		perMember(kerr.UnknownMemberID.Code)
		finish()
		return
	}
	var f fx
	defer c.release(g, &f)
	defer f.add(finish)
	if g.state == stateDead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	for _, l := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = l.MemberID, l.InstanceID
		rm.ErrorCode = c.leave(g, l, now, &f)
		resp.Members = append(resp.Members, rm)
	}
}

// leave removes one member; the code is its answer.
func (c *Coordinator) leave(g *group, l kmsg.LeaveGroupRequestMember, now time.Time, f *fx) int16 {
	reason := "left the group"
	if l.Reason != nil {
		reason += ": " + *l.Reason
	}
	if l.InstanceID != nil {
		id, ok := g.static[*l.InstanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case l.MemberID != "" && l.MemberID != id:
			return kerr.FencedInstanceID.Code
		}
		c.removeMember(g, g.members[id], reason, now, f)
		return 0
	}
	if _, ok := g.pending[l.MemberID]; ok {
		delete(g.pending, l.MemberID)
		if g.state == statePreparingRebalance {
			c.maybeCompleteJoin(g, now, f)
		}
		return 0
	}
	m := g.members[l.MemberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	c.removeMember(g, m, reason, now, f)
	return 0
}
