// Package txn is Berth's transaction coordinator core (KIP-98, with
// KIP-360 producer recovery and KIP-890 Transactions V2): the metadata of
// every transactional id placed on one partition of __transaction_state
// (PartitionFor), the transitions the transactional APIs make, the
// records that persist them and their replay. That core, Partition, is
// pure: no I/O, no clock (every call takes now), producer ids from an
// injected Allocator. Its running side, Coordinator (coordinator.go,
// markers.go, metrics.go), does the rest: a Partition per
// __transaction_state partition this node leads, loaded by a
// replica.Loader, its records written through an injected Log
// (replica.StateLog), timers, and the markers sent to the partitions'
// leaders. The handlers drive a Partition through it:
//
//	InitProducerId    res := p.InitProducerID(InitRequest{...}, now)
//	AddPartitionsToTxn res := p.AddPartitions(AddRequest{...}, now)      v0-3, and v5+ from leaders (TV2)
//	  verify only     missing, err := p.Verify(id, pid, epoch, parts)    v4+ VerifyOnly
//	AddOffsetsToTxn   res := p.AddOffsets(id, pid, epoch, group, now)
//	EndTxn            res := p.EndTxn(EndRequest{...}, now)
//	markers written   res, err := p.MarkersDone(markers, now)
//	timer             res := p.AbortTimedOut(now); res := p.ExpireIDs(now)
//	Describe/ListTransactions  p.Describe(id); p.List(filter, now)
//	new leader        p := NewPartition(cfg, alloc); p.Replay(key, value)...; p.Pending()
//
// Each Result carries the response's error (a *kerr.Error), the producer
// id and epoch to return, the records to append to the partition (the
// answer waits until they are durable) and the markers to send after
// that (WriteTxnMarkers to each partition's leader). A failed append
// means the Partition is out of step with the log: drop it and replay.
//
// # States
//
// Kafka's TransactionState, with its ids (the persisted TransactionStatus):
//
//	Empty(0) ─────── AddPartitions / AddOffsets ───────▶ Ongoing(1) ◀─┐
//	   ▲  │                                               │  │  │    │ more
//	   │  │ EndTxn abort (TV2, nothing added)             │  │  └────┘ partitions
//	   │  ▼                              EndTxn abort,    │  │
//	   │ PrepareAbort(3) ◀────────────── InitProducerId ──┘  │ EndTxn commit
//	   │  │                              or timeout          ▼
//	   │  │ markers done                 (the last two bump  PrepareCommit(2)
//	   │  ▼                              the epoch: fence)   │ markers done
//	   │ CompleteAbort(5)                                    ▼
//	   │  │                                            CompleteCommit(4)
//	   │  │ AddPartitions: the next transaction (→ Ongoing)  │
//	   └──┴─────────── InitProducerId (epoch+1) ─────────────┘
//
// InitProducerId from Empty or Complete* bumps the epoch (a new producer
// id at epoch 0 when the epoch is exhausted), fencing the previous
// producer; from Ongoing it aborts first and answers
// CONCURRENT_TRANSACTIONS, as it does while a Prepare* completes.
//
// Empty, CompleteCommit and CompleteAbort idle for
// transactional.id.expiration.ms become Dead(6): a tombstone deletes the
// id. PrepareEpochFence(7) is Kafka's in-memory step between the fencing
// bump and PrepareAbort; Berth writes PrepareAbort with the bumped epoch
// directly, and reads a PrepareEpochFence record as an open transaction
// (the timeout aborts it).
//
// # Epochs
//
// Transactions V1: the epoch changes only at InitProducerId and when the
// coordinator fences (InitProducerId during a transaction, timeout).
// Transactions V2 (EndTxn v5+): EndTxn bumps it, the markers carry the
// bumped epoch and the answer returns it; at the exhausted epoch (32766)
// the next producer id is allocated with the Prepare record
// (NextProducerID) and becomes the producer id, at epoch 0, when the
// transaction completes. A V2 retry of EndTxn presents the epoch before
// the bump (or the old producer id and 32766) and gets the current ones.
// The client has the bumped epoch (or the next producer id) as soon as
// the Prepare record is durable, before the markers: while they go out,
// its requests with it (the next transaction's enlistments, EndTxn,
// AddOffsets, InitProducerId) answer CONCURRENT_TRANSACTIONS, as a retry
// does, and are served once the transaction completes; only an older
// epoch is PRODUCER_FENCED.
// When the coordinator fences a V2 transaction (timeout, InitProducerId
// during it) the epoch goes up by two, the fencing bump and the
// end-of-transaction bump, as in Kafka: the producer's EndTxn with its
// old epoch is not a retry but PRODUCER_FENCED.
//
// KIP-360: a producer presenting its producer id and epoch to
// InitProducerId keeps its id; the epoch before the bump is remembered
// (LastProducerEpoch, persisted in a Berth tag) so that a retry gets the
// same answer, until another instance's InitProducerId forgets it.
//
// # Versions of PRODUCER_FENCED
//
// The package returns kerr.ProducerFenced; requests older than KIP-588
// (InitProducerId < v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
// < v2) know only INVALID_PRODUCER_EPOCH: FencedFor maps it.
//
// docs/format/txn-state.md has the persisted layout.
//
// # Ownership
//
// A Partition is not safe for concurrent use; one mutex of the caller's
// per __transaction_state partition owns it and serialises every call
// (the Coordinator's loadedPart.mu; lock order in docs/DESIGN.md).
package txn
