package cluster

import "errors"

// Sentinel errors. The Kafka edge maps them to error codes in its one table
// (internal/handler/errors.go); the code each maps to is named here.
var (
	// ErrInvalidReplicationFactor: the replication factor is below 1 or
	// above the number of live brokers (INVALID_REPLICATION_FACTOR).
	ErrInvalidReplicationFactor = errors.New("cluster: invalid replication factor")
	// ErrInvalidReplicaAssignment: an explicit assignment names an unknown
	// broker, a broker twice, no replica at all, partitions of different
	// sizes, or only fenced brokers for a partition
	// (INVALID_REPLICA_ASSIGNMENT).
	ErrInvalidReplicaAssignment = errors.New("cluster: invalid replica assignment")
	// ErrElectionNotNeeded: the partition already has the leader the
	// election would choose (ELECTION_NOT_NEEDED).
	ErrElectionNotNeeded = errors.New("cluster: election not needed")
	// ErrPreferredLeaderNotAvailable: the preferred replica is not live or
	// not in the ISR (PREFERRED_LEADER_NOT_AVAILABLE).
	ErrPreferredLeaderNotAvailable = errors.New("cluster: preferred leader not available")
	// ErrEligibleLeadersNotAvailable: no live replica can lead the
	// partition (ELIGIBLE_LEADERS_NOT_AVAILABLE).
	ErrEligibleLeadersNotAvailable = errors.New("cluster: eligible leaders not available")
	// ErrUnknownPartition: the topic or partition does not exist
	// (UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnknownPartition = errors.New("cluster: unknown topic or partition")
)
