package handler

// OffsetCommit (key 8), versions 0-10, handed to the group coordinator
// (internal/group/offsets.go). Commits are validated against the group: a
// stale generation gets ILLEGAL_GENERATION, an unknown member
// UNKNOWN_MEMBER_ID, a commit during a rebalance REBALANCE_IN_PROGRESS;
// generation -1 with no member id is accepted for an Empty group (manual
// and admin commits). KIP-848 members (v9+) are checked against their
// member epoch (STALE_MEMBER_EPOCH). Topic ids (v10+). RetentionTimeMillis
// (v2-4) sets the offsets' expiry. Answered, on the write loop, once the
// record in __consumer_offsets is durable.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(8, 0, 10, (*Broker).offsetCommit) }

func (b *Broker) offsetCommit(_ context.Context, req *server.Request) (server.Reply, error) {
	r, denied := b.offsetCommitDenied(req, req.Body.(*kmsg.OffsetCommitRequest))
	if r == nil {
		resp := req.Body.(*kmsg.OffsetCommitRequest).ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = denied
		return now(resp), nil
	}
	reply := later(req.Conn, func(respond func(*kmsg.OffsetCommitResponse)) { b.Groups.OffsetCommit(r, respond) })
	return func() kmsg.Response {
		resp := reply()
		if cr, ok := resp.(*kmsg.OffsetCommitResponse); ok {
			cr.Topics = append(cr.Topics, denied...)
		}
		return resp
	}, nil
}
