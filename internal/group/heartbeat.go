package group

// Heartbeat, versions 0-4. REBALANCE_IN_PROGRESS while the group prepares
// a rebalance, so members rejoin.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat serves a Heartbeat request.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	now := c.cfg.Now()
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	g, code := c.acquire(req.Group, false)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	var f fx
	defer c.release(g, &f)
	m := g.members[req.MemberID]
	switch {
	case g.state == stateDead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	case g.state == stateEmpty:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case g.fenced(req.InstanceID, req.MemberID):
		resp.ErrorCode = kerr.FencedInstanceID.Code
	case m == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case req.Generation != g.generation:
		resp.ErrorCode = kerr.IllegalGeneration.Code
	case g.state == statePreparingRebalance:
		m.lastHeartbeat = now
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	default: // Stable; CompletingRebalance, where the member already has the new generation
		m.lastHeartbeat = now
	}
	return resp
}
