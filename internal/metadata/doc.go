// Package metadata is Berth's controller: cluster metadata (brokers, topics
// with Kafka topic ids, partitions, configs, producer-id blocks) kept as typed
// records in a Raft log (go.etcd.io/raft/v3, driven through RawNode) and
// applied in log order to an immutable in-memory Image.
//
// Readers call Controller.Image and get a *Image that never changes; every
// applied entry builds a new Image copy-on-write and swaps it in atomically,
// so request handlers read metadata without locks. Writers call
// Controller.Propose with one or more Records; a batch is one Raft entry and
// applies all or nothing. Validation happens on apply, deterministically, so
// two racing creates of one topic give one success and one ErrTopicExists on
// every replica.
//
// The pure state machine is Apply (apply.go): no I/O, no clock, no
// randomness. The Controller (controller.go) owns the RawNode and runs its
// Ready loop in one goroutine: persist HardState, entries and snapshots (WAL
// and snapshot files, see wal.go, snapshot.go and docs/format/metadata.md),
// send messages through a Transport, apply committed entries, Advance.
//
// A single node is a one-voter quorum with LoopbackTransport. A cluster is
// 1, 3 or 5 voters plus any number of observers (Raft learners) talking
// over TCPTransport (transport_tcp.go); Config.Voters bootstraps the voter
// set, nodes not in it join as observers, and AddVoter, PromoteLearner and
// RemoveMember change it one member at a time (quorum.go). Any member may
// Propose: followers forward to the leader. The Ready loop, storage and
// apply paths are the same for one node and many.
package metadata
