package handler

// SyncGroup (key 14), versions 0-5, of the classic group protocol, handed
// to the group coordinator (internal/group/sync.go): the leader's
// assignment is written to __consumer_offsets with the generation, and
// every member is answered, on the write loop, once that write is
// durable. v5 checks ProtocolType and Protocol
// (INCONSISTENT_GROUP_PROTOCOL).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(14, 0, 5, (*Broker).syncGroup) }

func (b *Broker) syncGroup(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.SyncGroupRequest)
	if b.groupDenied(req, opRead, r.Group) {
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp), nil
	}
	return later(req.Conn, func(respond func(*kmsg.SyncGroupResponse)) { b.Groups.SyncGroup(r, respond) }), nil
}
