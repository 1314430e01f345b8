package handler

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/txn"
)

// TxnCoordinator is the transaction coordinator of the __transaction_state
// partitions this node leads (the node's, in internal/app). The handlers
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
}

// txnPartition is the __transaction_state partition of a transactional
// id; NOT_COORDINATOR when the topic does not exist yet (the client asks
// FindCoordinator, which creates it).
func (b *Broker) txnPartition(id string) (int32, error) {
	if b.Txns == nil {
		return 0, fmt.Errorf("%w: no transaction coordinator on this node", kerr.CoordinatorNotAvailable)
	}
	t := b.image().Topic(txn.Topic)
	if t == nil {
		return 0, kerr.NotCoordinator
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

// NextProducerID hands out a producer id from the node's block (the
// transaction coordinator's allocator).
func (b *Broker) NextProducerID(ctx context.Context) (int64, error) {
	return b.nextProducerID(ctx)
}
