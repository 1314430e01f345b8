package handler

// OffsetDelete (key 47), version 0 (KIP-496), handed to the group
// coordinator (internal/group/offsets.go): deletes the committed offsets
// of an Empty group, or of topics a consumer group's members do not
// subscribe to (GROUP_SUBSCRIBED_TO_TOPIC otherwise), by tombstones;
// answered on the write loop once they are durable.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(47, 0, 0, (*Broker).offsetDelete) }

func (b *Broker) offsetDelete(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.OffsetDeleteRequest)
	return later(req.Conn, func(respond func(*kmsg.OffsetDeleteResponse)) { b.Groups.OffsetDelete(r, respond) }), nil
}
