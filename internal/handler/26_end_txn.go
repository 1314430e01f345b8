package handler

// EndTxn, versions 0-4: the producer commits or aborts its transaction at
// the transaction coordinator of its transactional id (NOT_COORDINATOR on
// another node). The answer is sent once PrepareCommit/PrepareAbort is
// durable in __transaction_state; the coordinator then writes the COMMIT
// or ABORT markers (WriteTxnMarkers) to every partition of the
// transaction and completes it. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
// before v2 (KIP-588). Not served yet: v5 (Transactions V2, KIP-890 part
// 2: the epoch bump at the end of every transaction), which clients use
// only with the transaction.version feature Berth does not advertise.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/txn"
)

func init() { register(26, 0, 4, (*Broker).endTxn) }

func (b *Broker) endTxn(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	res := b.txnDo(ctx, r.TransactionalID, func(tp *txn.Partition, t time.Time) txn.Result {
		return tp.EndTxn(txn.EndRequest{TransactionalID: r.TransactionalID, ProducerID: r.ProducerID,
			ProducerEpoch: r.ProducerEpoch, Commit: r.Commit, ClientVersion: txn.TV0}, t)
	})
	resp.ErrorCode = code(txn.FencedFor(res.Err, 26, r.Version))
	resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
	return now(resp), nil
}
