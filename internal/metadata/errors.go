package metadata

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test with errors.Is; the Kafka edge maps them to
// error codes in one table (e.g. ErrTopicExists -> TOPIC_ALREADY_EXISTS).
var (
	// ErrTopicExists: a topic with this name (or topic id) already exists.
	ErrTopicExists = errors.New("metadata: topic already exists")
	// ErrUnknownTopic: no topic with this name or id.
	ErrUnknownTopic = errors.New("metadata: unknown topic")
	// ErrInvalidTopic: the topic name or id is not legal.
	ErrInvalidTopic = errors.New("metadata: invalid topic")
	// ErrInvalidPartitions: a partition count or index is out of range.
	ErrInvalidPartitions = errors.New("metadata: invalid partitions")
	// ErrInvalidReplicas: a replica assignment is empty, has duplicates or
	// negative broker ids, or does not match the partition count.
	ErrInvalidReplicas = errors.New("metadata: invalid replica assignment")
	// ErrInvalidConfig: a config key is empty or an update is contradictory.
	ErrInvalidConfig = errors.New("metadata: invalid config")
	// ErrInvalidRecord: a record is malformed (no or several union members
	// set, bad field values not covered by a more specific error).
	ErrInvalidRecord = errors.New("metadata: invalid record")
	// ErrUnknownBroker: a record names a broker that is not registered.
	ErrUnknownBroker = errors.New("metadata: unknown broker")
	// ErrStaleEpoch: a PartitionChange carried an expected partition epoch
	// that no longer matches (Kafka's INVALID_UPDATE_VERSION).
	ErrStaleEpoch = errors.New("metadata: stale partition epoch")
	// ErrIneligibleReplica: a partition leader's ISR change (a
	// PartitionChange with EligibleISR) adds a broker that is fenced, in
	// controlled shutdown or not registered (Kafka's INELIGIBLE_REPLICA,
	// KIP-841).
	ErrIneligibleReplica = errors.New("metadata: ineligible replica")
	// ErrClusterIDMismatch: the configured cluster id differs from the one
	// in the metadata log, or a second SetClusterID tries to change it.
	ErrClusterIDMismatch = errors.New("metadata: cluster id mismatch")
	// ErrNotLeader: this node is not the Raft leader (or not started), so it
	// cannot propose; or it lost leadership while a proposal was in flight,
	// in which case the proposal's outcome is unknown.
	ErrNotLeader = errors.New("metadata: not the controller leader")
	// ErrProposalDropped: a proposal was lost before this node saw it
	// commit: the leader changed, the forwarded proposal never reached the
	// leader's log in time, or the leader's log overwrote it. Its outcome
	// is unknown (it may still apply); retrying is safe for idempotent
	// records and gets e.g. ErrTopicExists for a create that did apply.
	// errors.Is(err, ErrNotLeader) also holds, so the Kafka edge answers
	// the retriable NOT_CONTROLLER.
	ErrProposalDropped error = &derivedError{"metadata: proposal dropped before it committed (leader change); outcome unknown, retry", ErrNotLeader}
	// ErrRemoved: this node is no longer a member of the metadata quorum
	// (it applied, or received in a snapshot, a configuration without
	// it), so it cannot propose and its image no longer advances. The
	// message says how to bring it back. errors.Is(err, ErrNotLeader) also
	// holds, so the Kafka edge answers NOT_CONTROLLER.
	ErrRemoved error = &derivedError{"metadata: this node was removed from the metadata quorum", ErrNotLeader}
	// ErrInvalidQuorumChange: a voter or observer change that the current
	// quorum configuration does not allow (the message says why).
	ErrInvalidQuorumChange = errors.New("metadata: invalid quorum change")
	// ErrQuorumChangePending: another quorum change has not applied yet;
	// changes go one at a time.
	ErrQuorumChangePending = errors.New("metadata: another quorum change is in progress; retry once it has applied")
	// ErrClosed: the controller is closed or stopped after a fatal error.
	ErrClosed = errors.New("metadata: controller closed")
	// ErrCorrupt: an on-disk file failed validation. Returned wrapped in a
	// *CorruptionError.
	ErrCorrupt = errors.New("metadata: corrupt file")
)

// errNoLeader: Raft refused a proposal because no leader is known, so
// nothing was proposed; submit retries it.
var errNoLeader = fmt.Errorf("%w: no leader known", ErrNotLeader)

// derivedError is a sentinel that also matches a more general one.
type derivedError struct {
	msg string
	is  error
}

func (e *derivedError) Error() string        { return e.msg }
func (e *derivedError) Is(target error) bool { return target == e.is }

// CorruptionError reports a damaged WAL or snapshot file and where the
// damage starts. errors.Is(err, ErrCorrupt) holds for it.
type CorruptionError struct {
	File   string // path, or "" for an in-memory reader
	Offset int64  // byte offset of the first bad frame
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("metadata: corrupt file %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }
