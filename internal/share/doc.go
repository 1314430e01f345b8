// Package share is the share-partition state machine of Berth's share
// groups (KIP-932, queues for Kafka; partition.go, state.go), which
// decides which records a member may acquire, under which lock, how
// acknowledgements change them, when they are delivered again and when
// they are parked in the group's dead-letter topic (KIP-1191). A share
// group's membership and assignment are the group coordinator's
// (internal/group, share*.go); the share-partitions a broker leads run
// in internal/sharepart, their state persists through internal/sharestate.
//
// # The share-partition state machine
//
// A SharePartition is the state of one (group, topic, partition): the
// share-partition start offset (SPSO, StartOffset), below which every
// record is finished, and the in-flight window [StartOffset, EndOffset)
// of records with a state, a delivery count and, while acquired, a member
// and a lock deadline. It is pure: no I/O, no clock (every call takes
// now), jitter drawn from an injected source. The caller reads the log,
// persists, writes to the DLQ and answers requests:
//
//	ShareFetch        off, ok := p.NextFetchOffset(now); read the log from off;
//	                  acquired, ch := p.Acquire(member, batches, maxRecords, now)
//	ShareAcknowledge  ch, err := p.Acknowledge(member, acks, now)
//	lock timer        ch := p.Expire(now)           (when: p.NextDeadline(now))
//	member left       ch := p.MemberGone(member, now)
//	DLQ write done    ch, err := p.CompleteArchive(first, last)
//	retention         ch := p.AdvanceLogStart(logStartOffset)
//
// Each returns a StateChange: persist ch.Update in __share_group_state
// before answering; then write ch.DLQ to the DLQ topic and call
// CompleteArchive. A new leader rebuilds the state with LoadPartition
// (latest snapshot) and Apply (each later update), then rewrites
// PendingDLQ.
//
// Record states (Kafka's RecordState ids, Archiving from KIP-1191):
//
//	                acquire: count+1, lock until now+LockDuration
//	Available(0) ─────────────────────────────────────────▶ Acquired(1) ◀─┐
//	     ▲                                                  │  │  │  │    │ RENEW:
//	     │  RELEASE, lock expired or member gone            │  │  │  └────┘ lock extended
//	     └───── with count < limit; acquirable again ───────┘  │  │
//	            after its backoff (available-at)               │  └── ACCEPT ──▶ Acknowledged(2)
//	                                                           ├───── gap ─────▶ Archived(4)
//	        REJECT, or RELEASE/expiry/gone at the limit        │                     ▲
//	                                                           └──▶ Archiving(3) ────┘
//	              (no DLQ topic: straight to Archived)        DLQ written: CompleteArchive
//
// Acknowledged and Archived are final; the start offset passes them (and
// only them), so an Archiving record holds the start offset until its DLQ
// write is done.
//
// # Berth's additions to KIP-932
//
// Retry backoff: a released or lock-expired record becomes available only
// at failure time + min(initial·multiplier^(count-1), max) ±jitter
// (PartitionConfig.Backoff, group configs share.retry.backoff.*). Its
// available-at time is persisted, so it survives restarts.
//
// Acquisitions are persisted: an acquired record is written as available
// at its lock deadline plus its nominal backoff with its new delivery
// count, so a restart or leader change loses the lock but neither the
// delivery count nor the wait (Kafka persists counts only on
// acknowledgement, and so may deliver a record more than the limit).
//
// The DLQ two-step: a rejected or exhausted record becomes Archiving,
// persisted before the DLQ write; CompleteArchive, after the DLQ write is
// durable, archives it. A crash in between rewrites it from PendingDLQ:
// at least once, never lost. The consumer's error text of a REJECT
// (Ack.ErrorText) travels with it, into the DLQ record's headers.
//
// docs/format/share-state.md has the persisted layout.
//
// # Ownership
//
// A SharePartition is not safe for concurrent use; one goroutine or one
// mutex per share-partition owns it and serialises every call.
package share
