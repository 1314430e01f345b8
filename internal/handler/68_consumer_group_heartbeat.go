package handler

// ConsumerGroupHeartbeat (key 68), versions 0-1: KIP-848 consumer groups,
// whose partitions the coordinator assigns (internal/group). A heartbeat
// is answered once the group records it wrote are durable. v0 members may
// leave their member id to the coordinator; v1 adds SubscribedTopicRegex
// (matched against whole topic names). A static leave (epoch -2) may omit
// its instance id (kgo sends none; Kafka refuses it). The group is
// described by ConsumerGroupDescribe (69_consumer_group_describe.go).
//
// Not honoured: RackID (stored and described; the assignors ignore racks),
// classic members joining a non-empty consumer group (Kafka's online
// migration; they get INCONSISTENT_GROUP_PROTOCOL), and 848 members
// joining a non-empty classic group (GROUP_ID_NOT_FOUND, as Kafka with
// group.consumer.migration.policy=disabled); an empty group of either type
// is converted.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(68, 0, 1, (*Broker).consumerGroupHeartbeat) }

func (b *Broker) consumerGroupHeartbeat(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	if c, msg := b.heartbeatDenied(req, r.Group, r.SubscribedTopicNames); c != 0 {
		resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.ErrorMessage = c, msg
		return now(resp), nil
	}
	return later(req.Conn, func(respond func(*kmsg.ConsumerGroupHeartbeatResponse)) {
		b.Groups.ConsumerGroupHeartbeat(r, req.ClientID, clientHost(req), respond)
	}), nil
}
