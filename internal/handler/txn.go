package handler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/txn"
)

// TxnCoordinator is the transaction coordinator of the __transaction_state
// partitions this node leads (txn.Coordinator). The handlers
// of keys 22 (with a transactional id), 24, 25, 26, 65 and 66 use it.
type TxnCoordinator interface {
	// Do runs op on partition p under the partition's mutex, appends the
	// Result's records and waits until they are durable, then starts
	// sending its markers. A Result whose Err is NOT_COORDINATOR,
	// COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE means op
	// did not run or its records were not written.
	Do(ctx context.Context, p int32, op func(tp *txn.Partition, now time.Time) txn.Result) txn.Result
	// View runs fn on partition p under its mutex; the error is
	// NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS.
	View(p int32, fn func(tp *txn.Partition)) error
	// Loaded lists the partitions loaded (led by this node).
	Loaded() []int32
	// Changed returns a channel closed at the next durable change of
	// partition p's state (nil when p is not loaded here).
	Changed(p int32) <-chan struct{}
}

// txnPartition is the __transaction_state partition of a transactional
// id; COORDINATOR_NOT_AVAILABLE when the topic does not exist yet (the
// client asks FindCoordinator again, which creates it), as the group
// coordinator answers for __consumer_offsets.
func (b *Broker) txnPartition(id string) (int32, error) {
	if b.Txns == nil {
		return 0, fmt.Errorf("%w: no transaction coordinator on this node", kerr.CoordinatorNotAvailable)
	}
	t := b.image().Topic(txn.Topic)
	if t == nil {
		return 0, fmt.Errorf("%w: %s does not exist yet", kerr.CoordinatorNotAvailable, txn.Topic)
	}
	return txn.PartitionFor(id, int32(len(t.Partitions))), nil
}

// txnDo runs op on the coordinator of id.
func (b *Broker) txnDo(ctx context.Context, id string, op func(tp *txn.Partition, now time.Time) txn.Result) txn.Result {
	p, err := b.txnPartition(id)
	if err != nil {
		return txn.Result{Err: err, ProducerID: txn.NoProducerID, ProducerEpoch: txn.NoEpoch}
	}
	return b.Txns.Do(ctx, p, op)
}

// concurrentWait bounds how long an operation that found the previous
// transaction still completing waits for it before it answers
// CONCURRENT_TRANSACTIONS.
const concurrentWait = 2 * time.Second

// txnDoWaiting is txnDo for an operation that begins, joins or ends a
// transaction (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn): while the
// previous transaction's markers are going out (CONCURRENT_TRANSACTIONS)
// it waits for the coordinator's next change and tries again, for up to
// concurrentWait, instead of making the client poll: a producer that
// starts (or, with Transactions V2, aborts) its next transaction right
// after EndTxn is answered as soon as the previous one completes.
func (b *Broker) txnDoWaiting(ctx context.Context, id string, op func(tp *txn.Partition, now time.Time) txn.Result) txn.Result {
	p, err := b.txnPartition(id)
	if err != nil {
		return txn.Result{Err: err, ProducerID: txn.NoProducerID, ProducerEpoch: txn.NoEpoch}
	}
	giveUp := time.NewTimer(concurrentWait)
	defer giveUp.Stop()
	for {
		changed := b.Txns.Changed(p) // before Do: a change during Do closes it
		res := b.Txns.Do(ctx, p, op)
		if !errors.Is(res.Err, kerr.ConcurrentTransactions) || changed == nil {
			return res
		}
		select {
		case <-changed:
		case <-giveUp.C:
			return res
		case <-ctx.Done():
			return res
		}
	}
}
