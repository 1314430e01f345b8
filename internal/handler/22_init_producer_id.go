package handler

// InitProducerId, versions 0-5. For idempotent producers each call hands
// out a fresh producer id with epoch 0, from blocks allocated through the
// metadata log so ids are never reused, even across restarts. With a
// transactional id it goes to the transaction coordinator (NOT_COORDINATOR
// on another node): a new id gets a producer id from the same blocks, a
// known one its epoch bumped (fencing the previous producer), with
// KIP-360's ProducerID/ProducerEpoch (v3+); PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH before v4 (KIP-588). v6 (KIP-939 two-phase
// commit) is not served.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/txn"
)

func init() { register(22, 0, 5, (*Broker).initProducerID) }

func (b *Broker) initProducerID(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case r.TransactionalID != nil && !b.authorized(req, opWrite, rTxnID, *r.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return now(resp), nil
	case r.TransactionalID == nil && !b.idempotentWriteAllowed(req):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp), nil
	}
	if r.TransactionalID != nil {
		ir := txn.InitRequest{TransactionalID: *r.TransactionalID, TimeoutMs: r.TransactionTimeoutMillis,
			ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch}
		if r.Version < 3 {
			ir.ProducerID, ir.ProducerEpoch = txn.NoProducerID, txn.NoEpoch
		}
		res := b.txnDo(ctx, ir.TransactionalID, func(tp *txn.Partition, t time.Time) txn.Result {
			return tp.InitProducerID(ir, t)
		})
		if res.Err != nil {
			resp.ErrorCode = code(txn.FencedFor(res.Err, 22, r.Version))
			return now(resp), nil
		}
		resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
		return now(resp), nil
	}
	id, err := b.ProducerIDs.Next(ctx)
	if err != nil {
		b.log.Warn("allocating producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return now(resp), nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return now(resp), nil
}
