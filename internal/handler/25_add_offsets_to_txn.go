package handler

// AddOffsetsToTxn, versions 0-4: the producer adds a consumer group's
// __consumer_offsets partition to its ongoing transaction, at the
// transaction coordinator of its transactional id (NOT_COORDINATOR on
// another node); PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2
// (KIP-588). The offsets follow with TxnOffsetCommit (key 28) at the
// group's coordinator. Transactions V2 clients skip this request:
// TxnOffsetCommit v5+ enlists the group's partition itself.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/txn"
)

func init() { register(25, 0, 4, (*Broker).addOffsetsToTxn) }

func (b *Broker) addOffsetsToTxn(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !b.authorized(req, opWrite, rTxnID, r.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return now(resp), nil
	case b.groupDenied(req, opRead, r.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return now(resp), nil
	}
	res := b.txnDoWaiting(ctx, r.TransactionalID, func(tp *txn.Partition, t time.Time) txn.Result {
		return tp.AddOffsets(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group, t)
	})
	resp.ErrorCode = code(txn.FencedFor(res.Err, 25, r.Version))
	return now(resp), nil
}
