package handler

// JoinGroup (key 11), versions 0-9: the classic group protocol, handed to
// the group coordinator (internal/group/join.go): generations, KIP-394
// member ids (MEMBER_ID_REQUIRED, v4+), session and rebalance timeouts
// bounded by group.min/max.session.timeout.ms,
// group.initial.rebalance.delay.ms, the protocol vote, static membership
// (KIP-345, FENCED_INSTANCE_ID, v5+), KIP-814 SkipAssignment (v9),
// group.max.size. Answered, on the write loop, when the rebalance
// completes.
//
// Not honoured: Reason (v8+) is only logged.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(11, 0, 9, (*Broker).joinGroup) }

func (b *Broker) joinGroup(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.JoinGroupRequest)
	if b.groupDenied(req, opRead, r.Group) {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = kerr.GroupAuthorizationFailed.Code, -1
		return now(resp), nil
	}
	return later(req.Conn, func(respond func(*kmsg.JoinGroupResponse)) {
		b.Groups.JoinGroup(r, req.ClientID, clientHost(req), respond)
	}), nil
}
