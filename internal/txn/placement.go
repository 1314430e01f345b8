package txn

import "github.com/berthmq/berth/internal/metadata"

// Topic is the internal topic holding the coordinators' state.
const Topic = metadata.TxnStateTopic

// OffsetsTopic is the topic AddOffsetsToTxn enlists a partition of.
const OffsetsTopic = metadata.OffsetsTopic

// PartitionFor is Kafka's placement of a transactional id on
// __transaction_state: abs(javaHash(id)) % n, the same hash as a group
// id's on __consumer_offsets.
func PartitionFor(transactionalID string, n int32) int32 {
	return metadata.PartitionForKey(transactionalID, n)
}
