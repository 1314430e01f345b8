// Package group is the group coordinator for Kafka's classic consumer
// group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), for KIP-848
// consumer groups, whose partitions the coordinator assigns
// (ConsumerGroupHeartbeat/ConsumerGroupDescribe), for KIP-932 share
// groups' membership (ShareGroupHeartbeat/ShareGroupDescribe; the state
// machine is shareMembership, share_membership.go), and for committed offsets
// (OffsetCommit/OffsetFetch/OffsetDelete), with DeleteGroups,
// DescribeGroups and ListGroups. Groups live on the
// partition of __consumer_offsets their id hashes to
// (metadata.PartitionForKey); the
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
//	uuid.go         newUUID (member ids)
//	errors.go       Store errors to Kafka codes
//
//	consumer.go           KIP-848 group state: epochs, partition ownership, reconciliation
//	                      (Kafka's CurrentAssignmentBuilder), target assignment, timers, conversions
//	consumer_heartbeat.go ConsumerGroupHeartbeat: validation, join, heartbeat, leave, static leave
//	consumer_describe.go  ConsumerGroupDescribe; DescribeGroups' view of a consumer group
//	consumer_records.go   the consumer group records (key versions 3-8), after Kafka's schemas
//	assignor.go           the uniform and range server-side assignors
//
//	share.go              KIP-932 share groups in the coordinator: heartbeat, describe, expiry, deletion, loading
//	share_membership.go   a share group's membership state machine (pure): members, epochs, target assignment
//	share_heartbeat.go    ShareGroupHeartbeat on it: validation, join, heartbeat, leave
//	share_describe.go     ShareGroupDescribe on it
//	share_records.go      the share group records (key versions 9-15), after Kafka's schemas
//	share_replay.go       shareLoader: rebuilding share groups from their records
//	share_assignor.go     the simple share group assignor (several members per partition)
//	codec.go              tag buffers, string arrays, []TopicPartitions: the flexible values consumer and share group records both use
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
// for a key is the latest state even when two goroutines race. A consumer
// group's state (group.cg) and a share group's (group.sh) are guarded by
// their group's mu too. Config.OnShareMembersRemoved is called with no
// lock held. The
// TopicResolver is called with a group's mu held (and c.mu in FinishLoad):
// it must neither call the coordinator nor wait on a lock held by a caller
// of it (internal/app's reads an atomically published metadata image).
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
// # KIP-848 consumer groups
//
//   - A group is classic or consumer (group.cg != nil), never both; its
//     offsets are the same either way. An empty classic group becomes a
//     consumer group when an 848 member joins (its GroupMetadata record is
//     deleted), and an empty consumer group becomes classic on a classic
//     JoinGroup (its records are deleted), as Kafka does. Kafka's
//     group.consumer.migration.policy (default bidirectional) also
//     converts groups with members online; Berth converts only empty
//     groups: an 848 member joining a classic group with members gets
//     GROUP_ID_NOT_FOUND (Kafka's answer with the policy disabled), a
//     classic member joining a consumer group with members
//     INCONSISTENT_GROUP_PROTOCOL. Classic Heartbeat/SyncGroup/LeaveGroup
//     on a consumer group answer UNKNOWN_MEMBER_ID, and
//     ConsumerGroupDescribe of a classic group GROUP_ID_NOT_FOUND.
//   - group.state of a consumer group is only Empty (no members) or Stable
//     (members), Dead while deleted, for the code shared with classic
//     groups (offset expiry, DeleteGroups, OffsetDelete); DescribeGroups,
//     ListGroups, ConsumerGroupDescribe and Groups report Kafka's consumer
//     group states (Empty, Assigning, Reconciling, Stable).
//   - The group epoch moves on when a member joins, leaves, is removed or
//     changes its subscription, or when the subscribed topics change
//     (looked at on heartbeats, at most once a second). The target
//     assignment is computed at once (Kafka computes it on the next
//     heartbeat; members see no difference, and Assigning is never seen).
//     Each bump counts as a rebalance in Groups.
//   - A member epoch 0 heartbeat from a known member (it was fenced, or
//     lost an answer) is a rejoin in place: the member owns nothing (the
//     request says so) and gets what is free of its target at once. Kafka
//     fences such a rejoin until the member's session expires unless the
//     member never got past its first epoch; clients (kgo, the Java
//     client) keep their member id on FENCED_MEMBER_EPOCH, so Berth takes
//     them back without that wait.
//   - A heartbeat is answered once its records are durable; one that
//     wrote none waits for the group's writes in flight. State is changed
//     in memory first (Kafka rolls back to its last committed snapshot
//     when a write fails; Berth cannot): a failed write answers the store
//     error, and the group's next heartbeat rewrites all its records, so
//     the log catches up with memory. The tombstones of a member removed
//     by the failed write are not rewritten: after a reload that member
//     is back until its session expires.
//   - Everything a consumer group needs survives a coordinator change: the
//     group epoch (ConsumerGroupMetadata), each member's subscription
//     (ConsumerGroupMemberMetadata), target (ConsumerGroupTargetAssignment*)
//     and epochs and assignment (ConsumerGroupCurrentMemberAssignment).
//     Loaded members' sessions and revocation timeouts start at the load,
//     and they go on heartbeating with the epochs they had. The subscribed
//     topics are looked up again at load; ConsumerGroupPartitionMetadata
//     (deprecated by Kafka 4.1) is only ever deleted, and Kafka 4's
//     regular expression records (key version 16) are not written: a regex
//     is matched again at every topic refresh.
//   - A static member's temporary leave (epoch -2) keeps its partitions
//     (no one else gets them) and its session running; the instance
//     rejoins under a new member id and takes its predecessor's place and
//     target without a new epoch, or is removed when its session expires.
//     Kafka requires the instance id on a -2; kgo (v1.22) sends none, which
//     Kafka refuses (INVALID_REQUEST, and the member holds its partitions
//     until its session expires): Berth uses the member's own.
//
// # KIP-932 share groups (share.go)
//
//   - A group id names one group of one type: a share group is a group
//     with group.sh set (never cg, never classic members). Its records
//     (key versions 9-15, share_records.go) are written like a consumer
//     group's: answers wait for durability, a
//     failed write sets dirty and the next change rewrites Snapshot. How
//     other types' APIs answer on a share group (Kafka's answers) is in
//     share.go's header.
//   - group.state is Empty or Stable (Dead while deleted), as for
//     consumer groups; ListGroups reports type and protocol type "share".
//   - Sessions expire from Tick (shareMembership.NextExpiry/Expire); members
//     removed by a leave or an expiry go to Config.OnShareMembersRemoved
//     once locks are released, so the share partitions can release their
//     records. Offset expiry never deletes a share group (it has no
//     committed offsets; its progress is in __share_group_state).
//   - DeleteGroups of a share group marks it Dead, has
//     Config.OnShareGroupDelete delete its share-partition state (at the
//     share coordinators, and the leaders' copies) and writes its
//     tombstones only once that succeeded; on a failure the group is
//     Empty again. State before records: a crash in between leaves an
//     empty group without state, never state a recreated group would
//     resume from.
//   - Loading hands share group keys to one shareLoader per
//     partition; FinishLoad builds the groups. A share group's records
//     beside a classic or consumer group's of the same id (not written by
//     one coordinator) are ignored, with a warning.
//
// # Not done
//
//   - Transactional offset commits (TxnOffsetCommit) and so
//     RequireStable's UNSTABLE_OFFSET_COMMIT.
//   - KIP-496's expiry of offsets for topics a Stable consumer group no
//     longer subscribes to.
//   - Shrinking a loaded group that exceeds group.max.size.
//   - KIP-848: classic members in consumer groups and the online
//     conversion of groups with members (see above); rack-aware
//     assignment (RackID is stored only); KIP-1251's assignment epochs
//     (a commit must carry the member's current epoch, as Kafka before
//     4.3, and kgo retries the STALE_MEMBER_EPOCH); per-group dynamic
//     configs (KIP-848's group-level session timeout and heartbeat
//     interval); group.consumer.min/max.session.timeout.ms bounds; a
//     sticky range assignor (Kafka's keeps partitions where it can);
//     ConsumerGroupDescribe's authorized operations.
package group
