package group

// KIP-848 consumer group records in __consumer_offsets. kmsg has no types
// for them, so they are encoded here after Kafka's JSON schemas
// (group-coordinator/src/main/resources/common/message/ConsumerGroup*.json):
// a key is the record type as an int16 (Kafka's "key version") followed
// by non-flexible strings; a value is an int16 version (always 0) followed
// by flexible (compact) fields and a tag buffer. Tagged fields Kafka added
// later (MetadataHash, CreationTimeMs, AssignmentTimestamp, assignment
// epochs) are skipped when read and never written.
//
//	3 ConsumerGroupMetadata              key GroupId          value Epoch
//	4 ConsumerGroupPartitionMetadata     key GroupId          (tombstones only; Kafka 4.1 dropped it)
//	5 ConsumerGroupMemberMetadata        key GroupId,MemberId value InstanceId, RackId, ClientId, ClientHost,
//	                                                               SubscribedTopicNames, SubscribedTopicRegex,
//	                                                               RebalanceTimeoutMs, ServerAssignor
//	6 ConsumerGroupTargetAssignmentMetadata key GroupId       value AssignmentEpoch
//	7 ConsumerGroupTargetAssignmentMember key GroupId,MemberId value TopicPartitions [TopicId, Partitions]
//	8 ConsumerGroupCurrentMemberAssignment key GroupId,MemberId value MemberEpoch, PreviousMemberEpoch, State,
//	                                                               AssignedPartitions, PartitionsPendingRevocation

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Record types (Kafka's coordinator record "api keys") of consumer groups.
const (
	recConsumerMetadata   = 3
	recConsumerPartitions = 4
	recConsumerMember     = 5
	recConsumerTargetMeta = 6
	recConsumerTarget     = 7
	recConsumerCurrent    = 8
)

func consumerKey(typ int16, group string, member *string) []byte {
	b := kbin.AppendInt16(nil, typ)
	b = kbin.AppendString(b, group)
	if member != nil {
		b = kbin.AppendString(b, *member)
	}
	return b
}

func consumerGroupKey(typ int16, group string) []byte { return consumerKey(typ, group, nil) }

func consumerMemberKey(typ int16, group, member string) []byte {
	return consumerKey(typ, group, &member)
}

// memberMetaValue is a ConsumerGroupMemberMetadataValue.
type memberMetaValue struct {
	instanceID, rackID *string
	clientID           string
	clientHost         string
	topics             []string
	regex              *string
	rebalanceTimeoutMs int32
	assignor           *string
}

// currentValue is a ConsumerGroupCurrentMemberAssignmentValue.
type currentValue struct {
	epoch, prevEpoch int32
	state            memberState
	assigned         assignment
	revoking         assignment
}

func appendValueHeader(b []byte) []byte { return kbin.AppendInt16(b, 0) }

func epochValue(epoch int32) []byte {
	b := appendValueHeader(nil)
	b = kbin.AppendInt32(b, epoch)
	return appendTags(b)
}

func (v *memberMetaValue) appendTo(b []byte) []byte {
	b = appendValueHeader(b)
	b = kbin.AppendCompactNullableString(b, v.instanceID)
	b = kbin.AppendCompactNullableString(b, v.rackID)
	b = kbin.AppendCompactString(b, v.clientID)
	b = kbin.AppendCompactString(b, v.clientHost)
	b = appendCompactStrings(b, v.topics)
	b = kbin.AppendCompactNullableString(b, v.regex)
	b = kbin.AppendInt32(b, v.rebalanceTimeoutMs)
	b = kbin.AppendCompactNullableString(b, v.assignor)
	return appendTags(b)
}

func targetValue(a assignment) []byte {
	b := appendValueHeader(nil)
	b = appendTopicPartitions(b, a)
	return appendTags(b)
}

func (v *currentValue) appendTo(b []byte) []byte {
	b = appendValueHeader(b)
	b = kbin.AppendInt32(b, v.epoch)
	b = kbin.AppendInt32(b, v.prevEpoch)
	b = kbin.AppendInt8(b, int8(v.state))
	b = appendTopicPartitions(b, v.assigned)
	b = appendTopicPartitions(b, v.revoking)
	return appendTags(b)
}

// valueReader reads a flexible version-0 value.
type valueReader struct{ flexReader }

func newValueReader(b []byte) (*valueReader, error) {
	r := &valueReader{flexReader{Reader: kbin.Reader{Src: b}}}
	if v := r.Int16(); !r.Ok() || v != 0 {
		return nil, fmt.Errorf("%w: consumer group value version %d", ErrCorruptRecord, v)
	}
	return r, nil
}

// done finishes a value: the trailing tag buffer, then every byte used.
func (r *valueReader) done(what string) error {
	r.SkipTags()
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorruptRecord, what, err)
	}
	return nil
}

func decodeEpochValue(b []byte) (int32, error) {
	r, err := newValueReader(b)
	if err != nil {
		return 0, err
	}
	e := r.Int32()
	return e, r.done("consumer group epoch value")
}

func decodeMemberMetaValue(b []byte) (*memberMetaValue, error) {
	r, err := newValueReader(b)
	if err != nil {
		return nil, err
	}
	v := &memberMetaValue{}
	v.instanceID = r.CompactNullableString()
	v.rackID = r.CompactNullableString()
	v.clientID = r.CompactString()
	v.clientHost = r.CompactString()
	v.topics = r.CompactStrings()
	v.regex = r.CompactNullableString()
	v.rebalanceTimeoutMs = r.Int32()
	v.assignor = r.CompactNullableString()
	return v, r.done("consumer group member value")
}

func decodeTargetValue(b []byte) (assignment, error) {
	r, err := newValueReader(b)
	if err != nil {
		return nil, err
	}
	a := assignment(r.TopicPartitions())
	return a, r.done("consumer group target assignment value")
}

func decodeCurrentValue(b []byte) (*currentValue, error) {
	r, err := newValueReader(b)
	if err != nil {
		return nil, err
	}
	v := &currentValue{}
	v.epoch = r.Int32()
	v.prevEpoch = r.Int32()
	switch v.state = memberState(r.Int8()); v.state {
	case memberStable, memberUnrevoked, memberUnreleased:
	default:
		v.state = memberUnknown
	}
	v.assigned = assignment(r.TopicPartitions())
	v.revoking = assignment(r.TopicPartitions())
	return v, r.done("consumer group current assignment value")
}
