package handler

// LeaveGroup (key 13), versions 0-5, of the classic group protocol,
// handed to the group coordinator (internal/group/leave.go): v3+ leaves a
// batch of members, each by member id or by group.instance.id (KIP-345),
// with an error per member, answered on the write loop.
//
// Not honoured: a member's Reason (v5+) is only logged.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(13, 0, 5, (*Broker).leaveGroup) }

func (b *Broker) leaveGroup(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.LeaveGroupRequest)
	if b.groupDenied(req, opRead, r.Group) {
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp), nil
	}
	return later(req.Conn, func(respond func(*kmsg.LeaveGroupResponse)) { b.Groups.LeaveGroup(r, respond) }), nil
}
