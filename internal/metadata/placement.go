package metadata

import (
	"math"
	"unicode/utf16"
)

// PartitionForKey is Kafka's placement of a key on the n partitions of
// an internal topic (a group id on __consumer_offsets, a transactional
// id on __transaction_state, a share-partition's coordinator key on
// __share_group_state): Utils.abs(key.hashCode()) % n, with Java's
// String.hashCode over the UTF-16 code units and Kafka's Utils.abs (which
// maps MinInt32 to 0, not to itself as Math.abs does).
func PartitionForKey(key string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	return kafkaAbs(javaStringHashCode(key)) % n
}

// javaStringHashCode is java.lang.String.hashCode: s[0]*31^(n-1) + ... +
// s[n-1] in int32 arithmetic over UTF-16 code units. Invalid UTF-8 counts
// as U+FFFD per bad byte (Java's decoder may fold a bad sequence into one).
func javaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// kafkaAbs is org.apache.kafka.common.utils.Utils.abs.
func kafkaAbs(n int32) int32 {
	if n == math.MinInt32 {
		return 0
	}
	if n < 0 {
		return -n
	}
	return n
}

// Leadership is what the metadata says of an internal topic's partition
// a coordinator does not own (the group, share and transaction
// coordinators answer by it: group.NotOwnedError).
type Leadership int8

const (
	// LeaderOther: another node leads the partition.
	LeaderOther Leadership = iota
	// LeaderSelf: this node leads the partition; the coordinator has not
	// been told to load it yet.
	LeaderSelf
	// LeaderNone: the topic does not exist or the partition has no leader.
	LeaderNone
)

// The internal topics. The brokers create them on first use
// (cluster.Topics.EnsureInternal) and each is the log of one coordinator.
const (
	// OffsetsTopic holds group metadata and committed offsets (the group
	// coordinator, internal/group).
	OffsetsTopic = "__consumer_offsets"
	// ShareStateTopic holds the share-partitions' state (the share
	// coordinator, internal/sharestate).
	ShareStateTopic = "__share_group_state"
	// TxnStateTopic holds the transactional ids' state (the transaction
	// coordinator, internal/txn).
	TxnStateTopic = "__transaction_state"
	// AuditTopic holds the audit trail (internal/audit), when it is on.
	AuditTopic = "__berth_audit"
	// SchemasTopic holds the schema registry (internal/schemareg), as
	// Confluent Schema Registry's kafkastore.topic does.
	SchemasTopic = "_schemas"
)

// IsInternalTopic reports the names the broker manages itself: no client
// may create them (nor take the audit trail's name before it is on).
func IsInternalTopic(name string) bool {
	return name == OffsetsTopic || name == TxnStateTopic || name == ShareStateTopic || name == AuditTopic || name == SchemasTopic
}

// Leadership is what im says of partition p of topic for node self: led
// by self, by another node, or by none (no such topic or partition yet,
// or no leader).
func (im *Image) Leadership(topic string, p, self int32) Leadership {
	mp := im.Topic(topic).Partition(p)
	switch {
	case mp == nil || mp.Leader == NoLeader:
		return LeaderNone
	case mp.Leader == self:
		return LeaderSelf
	}
	return LeaderOther
}
