// Package group is the group coordinator for Kafka's classic consumer
// group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and for
// committed offsets (OffsetCommit/OffsetFetch/OffsetDelete), with
// DeleteGroups, DescribeGroups and ListGroups. Groups live on the
// partition of __consumer_offsets their id hashes to (PartitionFor); the
// coordinator serves the groups of the partitions it was told to load and
// persists through a Store, in Kafka's record format, so Kafka tools can
// read the topic and a node taking over a partition rebuilds its groups by
// replaying it (BeginLoad, LoadRecord, FinishLoad).
//
// The handlers (internal/handler, one file per API key) decode requests
// and call the coordinator; APIs that may wait (a JoinGroup waits for the
// rebalance, a commit for its write) take a respond callback, called
// exactly once, possibly from another goroutine (the Tick goroutine, or
// whichever goroutine the Store calls done on).
//
// # Files
//
//	coordinator.go  Coordinator, Store, TopicResolver; Start/Close/Tick; the write queue; lookups
//	config.go       Config (Kafka setting names), Defaults, Validate
//	group.go        group and member state, the state machine shared by the APIs (rebalance, join completion, timers)
//	join.go         JoinGroup: KIP-394 member ids, KIP-345 static members, KIP-814 SkipAssignment
//	sync.go         SyncGroup: the leader's assignment, answered once durable
//	heartbeat.go    Heartbeat
//	leave.go        LeaveGroup (v3+ batches)
//	offsets.go      OffsetCommit, OffsetFetch, OffsetDelete, offset expiry
//	admin.go        DeleteGroups, DescribeGroups, ListGroups; Committed and Groups snapshots
//	load.go         partition ownership: BeginLoad, LoadRecord, FinishLoad, Unload
//	records.go      __consumer_offsets keys and values (kmsg)
//	partition.go    PartitionFor (Java's String.hashCode, Kafka's Utils.abs)
//	errors.go       Store errors to Kafka codes
//
// # Locks
//
// Coordinator.mu guards the group map and partition ownership; each
// group's mu guards that group. Lock order: Coordinator.mu before
// group.mu, never the other way; Coordinator.wmu (the write queue) is a
// leaf. Nothing is locked while calling Store.Write or a respond
// callback: the Store may call done inline, and done takes the group's
// lock. State changes queue their records under the group lock
// (Coordinator.write), and Coordinator.flush hands them to Store.Write
// after the lock is released, in queue order, so the log's last record
// for a key is the latest state even when two goroutines race.
//
// # Non-obvious
//
//   - Offsets are applied in memory only when the Store reports them
//     durable; a failed write leaves the previous offset visible. Commits
//     carry a sequence number so an older commit completing late never
//     overwrites a newer one. DeleteGroups and OffsetDelete also wait for
//     their tombstones; a deleted group stays Dead (retry-able errors)
//     until then and reverts to Empty if the write fails.
//   - Timers are not goroutines: Tick(now) runs session timeouts, KIP-394
//     member id expiry, the initial rebalance delay, rebalance and sync
//     timeouts and offset expiry, so tests drive them with a fake clock.
//   - Offset expiry (KIP-211) only touches Empty groups; the base is the
//     later of the commit and the moment the group became Empty (Kafka
//     uses the latter alone, which can expire an offset committed by an
//     admin reset moments before). An Empty group without offsets is then
//     deleted with a tombstone, as Kafka's cleanup does.
//   - A loaded group with members comes back Stable, its members' sessions
//     starting at the load; the rebalance counter restarts at zero.
//   - Ties in the protocol vote go to the protocol preferred by the
//     earliest member to join (Kafka's pick depends on hash order).
//
// # Not done
//
//   - KIP-848 consumer groups (ConsumerGroupHeartbeat) and their records
//     (key versions 3+ are skipped on load); ListGroups reports every
//     group as type "classic".
//   - Transactional offset commits (TxnOffsetCommit) and so
//     RequireStable's UNSTABLE_OFFSET_COMMIT; OffsetFetch v9's member
//     id/epoch (KIP-848 only).
//   - KIP-496's expiry of offsets for topics a Stable consumer group no
//     longer subscribes to.
//   - Shrinking a loaded group that exceeds group.max.size.
package group
