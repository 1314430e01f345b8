package share

// Share group records in __consumer_offsets, after Kafka 4.1's schemas
// (group-coordinator/src/main/resources/common/message/ShareGroup*.json).
// A key is the record type as an int16 (Kafka's "key version") followed
// by non-flexible strings; a value is an int16 version (always 0)
// followed by flexible (compact) fields and a tag buffer. They sit in
// the partition of __consumer_offsets the group id hashes to, beside the
// group's classic and consumer group neighbours, so a group id names one
// group of one type.
//
//	 9 ShareGroupPartitionMetadata          key GroupId          removed by Kafka 4.1; never written, skipped
//	10 ShareGroupMemberMetadata             key GroupId,MemberId value RackId, ClientId, ClientHost, SubscribedTopicNames
//	11 ShareGroupMetadata                   key GroupId          value Epoch, MetadataHash
//	12 ShareGroupTargetAssignmentMetadata   key GroupId          value AssignmentEpoch
//	13 ShareGroupTargetAssignmentMember     key GroupId,MemberId value TopicPartitions [TopicId, Partitions]
//	14 ShareGroupCurrentMemberAssignment    key GroupId,MemberId value MemberEpoch, PreviousMemberEpoch, State, AssignedPartitions
//	15 ShareGroupStatePartitionMetadata     key GroupId          Kafka's record of which share partitions have state; never written, skipped
//
// Berth writes all of 10-14, as Kafka does, so that a coordinator taking
// over a partition has each member with its epoch and assignment and
// members go on heartbeating without being fenced. Not byte-compatible
// with Kafka: MetadataHash is Berth's hash (groupTopicsHash), not
// Kafka's, and State is always 0 (stable; share members have no other).
// Tagged fields a newer Kafka adds are skipped when read.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/berthmq/berth/internal/groupcodec"
)

// GroupRecord is one __consumer_offsets record (Value nil: a tombstone).
type GroupRecord struct{ Key, Value []byte }

// ErrCorruptGroupRecord is returned for a share group record that does
// not decode.
var ErrCorruptGroupRecord = errors.New("share: corrupt share group record")

// Share group record types (Kafka's coordinator record "api keys").
const (
	groupRecPartitionMeta = 9
	groupRecMember        = 10
	groupRecMetadata      = 11
	groupRecTargetMeta    = 12
	groupRecTarget        = 13
	groupRecCurrent       = 14
	groupRecStatePartMeta = 15
)

// groupMemberStateStable is Kafka's MemberState.STABLE, the only state a
// share group member has.
const groupMemberStateStable = 0

// IsGroupRecordKey reports whether a __consumer_offsets key is a share
// group record's (key versions 9-15): the group coordinator's loader hands
// those to a GroupLoader.
func IsGroupRecordKey(key []byte) bool {
	if len(key) < 2 {
		return false
	}
	v := int16(key[0])<<8 | int16(key[1])
	return v >= groupRecPartitionMeta && v <= groupRecStatePartMeta
}

// groupKey is a decoded share group record key.
type groupKey struct {
	typ    int16
	group  string
	member string // 10, 13, 14
}

func (k groupKey) hasMember() bool {
	return k.typ == groupRecMember || k.typ == groupRecTarget || k.typ == groupRecCurrent
}

func appendGroupKey(typ int16, group string, member *string) []byte {
	b := kbin.AppendInt16(nil, typ)
	b = kbin.AppendString(b, group)
	if member != nil {
		b = kbin.AppendString(b, *member)
	}
	return b
}

func decodeGroupKey(b []byte) (groupKey, error) {
	if !IsGroupRecordKey(b) {
		return groupKey{}, fmt.Errorf("%w: not a share group key", ErrCorruptGroupRecord)
	}
	r := kbin.Reader{Src: b}
	k := groupKey{typ: r.Int16()}
	k.group = r.String()
	if k.hasMember() {
		k.member = r.String()
	}
	if err := r.Complete(); err != nil {
		return groupKey{}, fmt.Errorf("%w: key %d: %v", ErrCorruptGroupRecord, k.typ, err)
	}
	if len(r.Src) > 0 {
		return groupKey{}, fmt.Errorf("%w: key %d: %d trailing bytes", ErrCorruptGroupRecord, k.typ, len(r.Src))
	}
	return k, nil
}

// GroupRecordGroupID returns the group id of a share group record key.
func GroupRecordGroupID(key []byte) (string, error) {
	k, err := decodeGroupKey(key)
	return k.group, err
}

func groupValueHeader() []byte { return kbin.AppendInt16(nil, 0) }

func appendGroupTags(b []byte) []byte { return groupcodec.AppendTags(b) }

// appendGroupAssignment writes an assignment as Kafka's
// []TopicPartitions, topics in id order.
func appendGroupAssignment(b []byte, a GroupAssignment) []byte {
	return groupcodec.AppendTopicPartitions(b, a)
}

func groupEpochRecord(group string, epoch int32, hash int64) GroupRecord {
	b := groupValueHeader()
	b = kbin.AppendInt32(b, epoch)
	b = kbin.AppendInt64(b, hash)
	return GroupRecord{Key: appendGroupKey(groupRecMetadata, group, nil), Value: appendGroupTags(b)}
}

func groupTargetEpochRecord(group string, epoch int32) GroupRecord {
	b := groupValueHeader()
	b = kbin.AppendInt32(b, epoch)
	return GroupRecord{Key: appendGroupKey(groupRecTargetMeta, group, nil), Value: appendGroupTags(b)}
}

func groupMemberRecord(group string, m *groupMember) GroupRecord {
	b := groupValueHeader()
	b = kbin.AppendCompactNullableString(b, m.rackID)
	b = kbin.AppendCompactString(b, m.clientID)
	b = kbin.AppendCompactString(b, m.clientHost)
	b = kbin.AppendCompactArrayLen(b, len(m.topics))
	for _, t := range m.topics {
		b = kbin.AppendCompactString(b, t)
	}
	return GroupRecord{Key: appendGroupKey(groupRecMember, group, &m.id), Value: appendGroupTags(b)}
}

func groupTargetRecord(group, member string, a GroupAssignment) GroupRecord {
	b := appendGroupAssignment(groupValueHeader(), a)
	return GroupRecord{Key: appendGroupKey(groupRecTarget, group, &member), Value: appendGroupTags(b)}
}

func groupCurrentRecord(group string, m *groupMember) GroupRecord {
	b := groupValueHeader()
	b = kbin.AppendInt32(b, m.epoch)
	b = kbin.AppendInt32(b, m.prevEpoch)
	b = kbin.AppendInt8(b, groupMemberStateStable)
	b = appendGroupAssignment(b, m.assigned)
	return GroupRecord{Key: appendGroupKey(groupRecCurrent, group, &m.id), Value: appendGroupTags(b)}
}

// groupMemberTombstones deletes a member's records, in Kafka's order.
func groupMemberTombstones(group, member string) []GroupRecord {
	return []GroupRecord{
		{Key: appendGroupKey(groupRecCurrent, group, &member)},
		{Key: appendGroupKey(groupRecTarget, group, &member)},
		{Key: appendGroupKey(groupRecMember, group, &member)},
	}
}

// groupTombstones deletes a group's records (its members' first).
func groupTombstones(group string, members []string) []GroupRecord {
	var recs []GroupRecord
	for _, m := range members {
		recs = append(recs, groupMemberTombstones(group, m)...)
	}
	return append(recs,
		GroupRecord{Key: appendGroupKey(groupRecTargetMeta, group, nil)},
		GroupRecord{Key: appendGroupKey(groupRecMetadata, group, nil)})
}

// Decoded values.
type (
	groupEpochValue struct {
		epoch int32
		hash  int64
	}
	groupMemberValue struct {
		rackID     *string
		clientID   string
		clientHost string
		topics     []string
	}
	groupCurrentValue struct {
		epoch, prevEpoch int32
		state            int8
		assigned         GroupAssignment
	}
)

// groupValueReader reads a flexible version-0 value.
type groupValueReader struct{ groupcodec.Reader }

func newGroupValueReader(b []byte, what string) (*groupValueReader, error) {
	r := &groupValueReader{groupcodec.Reader{Reader: kbin.Reader{Src: b}}}
	if v := r.Int16(); !r.Ok() || v != 0 {
		return nil, fmt.Errorf("%w: %s version %d", ErrCorruptGroupRecord, what, v)
	}
	return r, nil
}

func (r *groupValueReader) done(what string) error {
	r.SkipTags()
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorruptGroupRecord, what, err)
	}
	if len(r.Src) > 0 {
		return fmt.Errorf("%w: %s: %d trailing bytes", ErrCorruptGroupRecord, what, len(r.Src))
	}
	return nil
}

// decodeGroupValue decodes the value of a share group record of type typ
// (nil, nil for the types Berth does not read).
func decodeGroupValue(typ int16, b []byte) (any, error) {
	switch typ {
	case groupRecMetadata:
		r, err := newGroupValueReader(b, "share group metadata")
		if err != nil {
			return nil, err
		}
		v := groupEpochValue{epoch: r.Int32(), hash: r.Int64()}
		return v, r.done("share group metadata")
	case groupRecTargetMeta:
		r, err := newGroupValueReader(b, "share group target assignment metadata")
		if err != nil {
			return nil, err
		}
		e := r.Int32()
		return e, r.done("share group target assignment metadata")
	case groupRecMember:
		r, err := newGroupValueReader(b, "share group member metadata")
		if err != nil {
			return nil, err
		}
		v := &groupMemberValue{rackID: r.CompactNullableString(), clientID: r.CompactString(), clientHost: r.CompactString()}
		n := r.CompactArrayLen()
		v.topics = make([]string, 0, min(max(n, 0), 1024))
		for i := int32(0); i < n && r.Ok(); i++ {
			v.topics = append(v.topics, r.CompactString())
		}
		slices.Sort(v.topics)
		v.topics = slices.Compact(v.topics)
		return v, r.done("share group member metadata")
	case groupRecTarget:
		r, err := newGroupValueReader(b, "share group target assignment")
		if err != nil {
			return nil, err
		}
		a := GroupAssignment(r.TopicPartitions())
		return a, r.done("share group target assignment")
	case groupRecCurrent:
		r, err := newGroupValueReader(b, "share group current assignment")
		if err != nil {
			return nil, err
		}
		v := &groupCurrentValue{epoch: r.Int32(), prevEpoch: r.Int32(), state: r.Int8()}
		v.assigned = GroupAssignment(r.TopicPartitions())
		return v, r.done("share group current assignment")
	}
	return nil, nil
}
