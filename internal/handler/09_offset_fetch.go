package handler

// OffsetFetch (key 9), versions 0-10, from the group coordinator
// (internal/group/offsets.go): several groups in one request (v8+), topic
// ids (v10+), leader epochs; -1 for partitions without a commit.
// RequireStable (v7+): a partition with transactional offsets pending
// (TxnOffsetCommit before its marker) answers UNSTABLE_OFFSET_COMMIT,
// which clients retry. The member id and epoch of KIP-848 members (v9+)
// are checked.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(9, 0, 10, (*Broker).offsetFetch) }

func (b *Broker) offsetFetch(_ context.Context, req *server.Request) (server.Reply, error) {
	return now(b.offsetFetchAuthorized(req, req.Body.(*kmsg.OffsetFetchRequest), b.Groups.OffsetFetch)), nil
}
