package txn_test

import (
	"fmt"
	"time"

	"github.com/berthmq/berth/internal/txn"
)

// Example shows what a coordinator does around a Partition: append each
// Result's records (and wait until they are durable) before answering,
// then send the markers and complete the transaction; a new leader
// replays the records and resends the pending markers.
func Example() {
	var log []txn.Record // stands in for the __transaction_state partition
	persist := func(r txn.Result) txn.Result {
		log = append(log, r.Records...) // then wait for the high watermark
		return r
	}
	next := int64(4000)
	alloc := func() (int64, error) { next++; return next, nil }
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	p := txn.NewPartition(txn.Defaults(), alloc)
	init := persist(p.InitProducerID(txn.InitRequest{TransactionalID: "orders", TimeoutMs: 60000,
		ProducerID: txn.NoProducerID, ProducerEpoch: txn.NoEpoch}, now))
	fmt.Println("InitProducerId:", init.Err, init.ProducerID, init.ProducerEpoch)

	add := persist(p.AddPartitions(txn.AddRequest{TransactionalID: "orders", ProducerID: init.ProducerID,
		ProducerEpoch: init.ProducerEpoch, Partitions: []txn.TopicPartition{{Topic: "out", Partition: 0}}}, now))
	fmt.Println("AddPartitionsToTxn:", add.Err)

	end := persist(p.EndTxn(txn.EndRequest{TransactionalID: "orders", ProducerID: init.ProducerID,
		ProducerEpoch: init.ProducerEpoch, Commit: true, ClientVersion: txn.TV2}, now))
	fmt.Println("EndTxn:", end.Err, end.ProducerID, end.ProducerEpoch)

	// The coordinator crashes before the markers are written; the next
	// leader of the partition replays it.
	q := txn.NewPartition(txn.Defaults(), alloc)
	for _, r := range log {
		if err := q.Replay(r.Key, r.Value); err != nil {
			panic(err)
		}
	}
	for _, m := range q.Pending() {
		fmt.Println("WriteTxnMarkers:", m.Commit, m.ProducerID, m.ProducerEpoch, m.Partitions)
		// ... once every partition's marker is durable:
		done, err := q.MarkersDone(m, now)
		if err != nil {
			panic(err)
		}
		persist(done)
	}
	fmt.Println(q.Describe("orders").State)
	// Output:
	// InitProducerId: <nil> 4001 0
	// AddPartitionsToTxn: <nil>
	// EndTxn: <nil> 4001 1
	// WriteTxnMarkers: true 4001 1 [out-0]
	// CompleteCommit
}
