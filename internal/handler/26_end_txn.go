package handler

// EndTxn, versions 0-5: the producer commits or aborts its transaction at
// the transaction coordinator of its transactional id (NOT_COORDINATOR on
// another node). The answer is sent once PrepareCommit/PrepareAbort is
// durable in __transaction_state; the coordinator then writes the COMMIT
// or ABORT markers (WriteTxnMarkers) to every partition of the
// transaction and completes it. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
// before v2 (KIP-588). v5 is Transactions V2 (KIP-890 part 2, used by
// clients when the transaction.version feature is 2): the producer epoch
// is bumped at the end of every transaction, the markers carry the bumped
// epoch and the answer returns the producer id and epoch to go on with
// (a new producer id at epoch 0 when the epoch is exhausted); an abort
// with nothing in the transaction is allowed; a retry presenting the epoch
// before the bump gets the same answer. While the markers of the
// producer's previous transaction are going out, an EndTxn at the epoch
// it returned (the next transaction's, an abort of a transaction nothing
// was enlisted in yet, typically) waits for them, up to concurrentWait,
// then answers CONCURRENT_TRANSACTIONS, as a retry of the previous
// EndTxn does.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/txn"
)

func init() { register(26, 0, 5, (*Broker).endTxn) }

func (b *Broker) endTxn(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	if !b.authorized(req, opWrite, rTxnID, r.TransactionalID) {
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = kerr.TransactionalIDAuthorizationFailed.Code, -1, -1
		return now(resp), nil
	}
	tv := txn.TV0
	if r.Version >= 5 {
		tv = txn.TV2
	}
	res := b.txnDoWaiting(ctx, r.TransactionalID, func(tp *txn.Partition, t time.Time) txn.Result {
		return tp.EndTxn(txn.EndRequest{TransactionalID: r.TransactionalID, ProducerID: r.ProducerID,
			ProducerEpoch: r.ProducerEpoch, Commit: r.Commit, ClientVersion: tv}, t)
	})
	resp.ErrorCode = code(txn.FencedFor(res.Err, 26, r.Version))
	resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
	return now(resp), nil
}
