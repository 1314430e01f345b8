package handler

// ShareGroupHeartbeat (key 76), versions 0-1: share group membership
// (KIP-932). The group coordinator (internal/group) serves it on its
// share group membership state machine; a heartbeat is answered once
// the group records it wrote are durable. v0 (Kafka 4.0's early access)
// members may leave their member id to the coordinator on their join; v1
// members bring their own. Every member subscribed to a topic is
// assigned some of its partitions (the simple assignor), sharing them
// when there are more members than partitions.
//
// Not honoured: RackID (stored and described; the assignor ignores
// racks). Records are fetched and acknowledged with ShareFetch and
// ShareAcknowledge (78_share_fetch.go, 79_share_acknowledge.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(76, 0, 1, (*Broker).shareGroupHeartbeat) }

func (b *Broker) shareGroupHeartbeat(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ShareGroupHeartbeatRequest)
	if c, msg := b.heartbeatDenied(req, r.GroupID, r.SubscribedTopicNames); c != 0 {
		resp := r.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode, resp.ErrorMessage = c, msg
		return now(resp), nil
	}
	return later(req.Conn, func(respond func(*kmsg.ShareGroupHeartbeatResponse)) {
		b.Groups.ShareGroupHeartbeat(r, req.ClientID, clientHost(req), respond)
	}), nil
}
