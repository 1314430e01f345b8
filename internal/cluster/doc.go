// Package cluster holds the active controller's cluster policies: where the
// replicas of new partitions go (Assign), which replica leads a partition
// when its leader's broker is fenced or shutting down (Reconcile,
// ElectPreferred, ElectUnclean), and the Supervisor that applies them by
// proposing metadata records while this node is the active controller.
//
// Everything except the Supervisor is pure: a function of a metadata.Image
// (and of what the caller says about broker liveness) with no I/O, clock or
// randomness, so the same inputs give the same records on every node and in
// tests. The Supervisor is the outer loop: it reads the image and a
// Liveness, decides with the pure functions, and proposes the resulting
// records with ExpectPartitionEpoch so that a decision taken on a stale
// image is refused by the state machine (metadata.ErrStaleEpoch) and taken
// again on the next round.
//
// The package does no networking: brokers' liveness comes from a Liveness
// the metadata quorum implements (the last time the active controller heard
// from each broker), and the records go through metadata.Controller.Propose.
//
// Topics (topics.go) is the one part any broker runs: it creates the
// internal topics on first use (their specs are here) and checks that
// enough brokers are live for a topic's default replication factor.
//
// Ownership: Supervisor.roundMu serialises rounds (Tick, ControlledShutdown,
// ElectLeaders) and guards the Supervisor's mutable fields; it is taken with
// no other lock held and held across Propose (which only waits on the
// metadata Ready loop, never on this package).
package cluster
