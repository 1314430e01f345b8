package handler

// Heartbeat (key 12), versions 0-4, of the classic group protocol, from
// the group coordinator (internal/group/heartbeat.go):
// REBALANCE_IN_PROGRESS while the group prepares a rebalance, so members
// rejoin; members that stop heartbeating are removed after their session
// timeout.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(12, 0, 4, (*Broker).heartbeat) }

func (b *Broker) heartbeat(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.HeartbeatRequest)
	if b.groupDenied(req, opRead, r.Group) {
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp), nil
	}
	return now(b.Groups.Heartbeat(r)), nil
}
