package handler

// OffsetDelete (key 47), version 0 (KIP-496), handed to the group
// coordinator (internal/group/offsets.go): deletes the committed offsets
// of an Empty group, or of topics a consumer group's members do not
// subscribe to (GROUP_SUBSCRIBED_TO_TOPIC otherwise), by tombstones;
// answered on the write loop once they are durable.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(47, 0, 0, (*Broker).offsetDelete) }

func (b *Broker) offsetDelete(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.OffsetDeleteRequest)
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if b.groupDenied(req, opDelete, r.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp), nil
	}
	im := b.image()
	rest := *r
	rest.Topics = nil
	for _, t := range r.Topics {
		if !b.topicDenied(req, im, opRead, t.Topic, [16]byte{}, false) {
			rest.Topics = append(rest.Topics, t)
		} else { // answered here, the others go on (as Kafka)
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(resp.Topics) == 0 {
		return later(req.Conn, func(respond func(*kmsg.OffsetDeleteResponse)) { b.Groups.OffsetDelete(r, respond) }), nil
	}
	if len(rest.Topics) == 0 {
		return now(resp), nil
	}
	denied := resp.Topics
	reply := later(req.Conn, func(respond func(*kmsg.OffsetDeleteResponse)) { b.Groups.OffsetDelete(&rest, respond) })
	return func() kmsg.Response {
		out := reply()
		if dr, ok := out.(*kmsg.OffsetDeleteResponse); ok {
			dr.Topics = append(dr.Topics, denied...)
		}
		return out
	}, nil
}
