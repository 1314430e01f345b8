package group

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
// with Kafka: MetadataHash is Berth's hash (shareTopicsHash), not
// Kafka's, and State is always 0 (stable; share members have no other).
// Tagged fields a newer Kafka adds are skipped when read.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// errCorruptShareRecord is returned for a share group record that does
// not decode.
var errCorruptShareRecord = errors.New("share: corrupt share group record")

// Share group record types (Kafka's coordinator record "api keys").
const (
	shareRecPartitionMeta = 9
	shareRecMember        = 10
	shareRecMetadata      = 11
	shareRecTargetMeta    = 12
	shareRecTarget        = 13
	shareRecCurrent       = 14
	shareRecStatePartMeta = 15
)

// shareMemberStateStable is Kafka's MemberState.STABLE, the only state a
// share group member has.
const shareMemberStateStable = 0

// isShareRecordKey reports whether a __consumer_offsets key is a share
// group record's (key versions 9-15): the group coordinator's loader hands
// those to a shareLoader.
func isShareRecordKey(key []byte) bool {
	if len(key) < 2 {
		return false
	}
	v := int16(key[0])<<8 | int16(key[1])
	return v >= shareRecPartitionMeta && v <= shareRecStatePartMeta
}

// shareKey is a decoded share group record key.
type shareKey struct {
	typ    int16
	group  string
	member string // 10, 13, 14
}

func (k shareKey) hasMember() bool {
	return k.typ == shareRecMember || k.typ == shareRecTarget || k.typ == shareRecCurrent
}

func appendShareKey(typ int16, group string, member *string) []byte {
	b := kbin.AppendInt16(nil, typ)
	b = kbin.AppendString(b, group)
	if member != nil {
		b = kbin.AppendString(b, *member)
	}
	return b
}

func decodeShareKey(b []byte) (shareKey, error) {
	if !isShareRecordKey(b) {
		return shareKey{}, fmt.Errorf("%w: not a share group key", errCorruptShareRecord)
	}
	r := kbin.Reader{Src: b}
	k := shareKey{typ: r.Int16()}
	k.group = r.String()
	if k.hasMember() {
		k.member = r.String()
	}
	if err := r.Complete(); err != nil {
		return shareKey{}, fmt.Errorf("%w: key %d: %v", errCorruptShareRecord, k.typ, err)
	}
	if len(r.Src) > 0 {
		return shareKey{}, fmt.Errorf("%w: key %d: %d trailing bytes", errCorruptShareRecord, k.typ, len(r.Src))
	}
	return k, nil
}

// shareRecordGroupID returns the group id of a share group record key.
func shareRecordGroupID(key []byte) (string, error) {
	k, err := decodeShareKey(key)
	return k.group, err
}

func shareValueHeader() []byte { return kbin.AppendInt16(nil, 0) }

func shareEpochRecord(group string, epoch int32, hash int64) Record {
	b := shareValueHeader()
	b = kbin.AppendInt32(b, epoch)
	b = kbin.AppendInt64(b, hash)
	return Record{Key: appendShareKey(shareRecMetadata, group, nil), Value: appendTags(b)}
}

func shareTargetEpochRecord(group string, epoch int32) Record {
	b := shareValueHeader()
	b = kbin.AppendInt32(b, epoch)
	return Record{Key: appendShareKey(shareRecTargetMeta, group, nil), Value: appendTags(b)}
}

func shareMemberRecord(group string, m *shareMember) Record {
	b := shareValueHeader()
	b = kbin.AppendCompactNullableString(b, m.rackID)
	b = kbin.AppendCompactString(b, m.clientID)
	b = kbin.AppendCompactString(b, m.clientHost)
	b = kbin.AppendCompactArrayLen(b, len(m.topics))
	for _, t := range m.topics {
		b = kbin.AppendCompactString(b, t)
	}
	return Record{Key: appendShareKey(shareRecMember, group, &m.id), Value: appendTags(b)}
}

func shareTargetRecord(group, member string, a shareAssignment) Record {
	b := appendTopicPartitions(shareValueHeader(), a)
	return Record{Key: appendShareKey(shareRecTarget, group, &member), Value: appendTags(b)}
}

func shareCurrentRecord(group string, m *shareMember) Record {
	b := shareValueHeader()
	b = kbin.AppendInt32(b, m.epoch)
	b = kbin.AppendInt32(b, m.prevEpoch)
	b = kbin.AppendInt8(b, shareMemberStateStable)
	b = appendTopicPartitions(b, m.assigned)
	return Record{Key: appendShareKey(shareRecCurrent, group, &m.id), Value: appendTags(b)}
}

// shareMemberTombstones deletes a member's records, in Kafka's order.
func shareMemberTombstones(group, member string) []Record {
	return []Record{
		{Key: appendShareKey(shareRecCurrent, group, &member)},
		{Key: appendShareKey(shareRecTarget, group, &member)},
		{Key: appendShareKey(shareRecMember, group, &member)},
	}
}

// shareTombstones deletes a group's records (its members' first).
func shareTombstones(group string, members []string) []Record {
	var recs []Record
	for _, m := range members {
		recs = append(recs, shareMemberTombstones(group, m)...)
	}
	return append(recs,
		Record{Key: appendShareKey(shareRecTargetMeta, group, nil)},
		Record{Key: appendShareKey(shareRecMetadata, group, nil)})
}

// Decoded values.
type (
	shareEpochValue struct {
		epoch int32
		hash  int64
	}
	shareMemberValue struct {
		rackID     *string
		clientID   string
		clientHost string
		topics     []string
	}
	shareCurrentValue struct {
		epoch, prevEpoch int32
		state            int8
		assigned         shareAssignment
	}
)

// shareValueReader reads a flexible version-0 value.
type shareValueReader struct{ flexReader }

func newShareValueReader(b []byte, what string) (*shareValueReader, error) {
	r := &shareValueReader{flexReader{Reader: kbin.Reader{Src: b}}}
	if v := r.Int16(); !r.Ok() || v != 0 {
		return nil, fmt.Errorf("%w: %s version %d", errCorruptShareRecord, what, v)
	}
	return r, nil
}

func (r *shareValueReader) done(what string) error {
	r.SkipTags()
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: %s: %v", errCorruptShareRecord, what, err)
	}
	if len(r.Src) > 0 {
		return fmt.Errorf("%w: %s: %d trailing bytes", errCorruptShareRecord, what, len(r.Src))
	}
	return nil
}

// decodeShareValue decodes the value of a share group record of type typ
// (nil, nil for the types Berth does not read).
func decodeShareValue(typ int16, b []byte) (any, error) {
	switch typ {
	case shareRecMetadata:
		r, err := newShareValueReader(b, "share group metadata")
		if err != nil {
			return nil, err
		}
		v := shareEpochValue{epoch: r.Int32(), hash: r.Int64()}
		return v, r.done("share group metadata")
	case shareRecTargetMeta:
		r, err := newShareValueReader(b, "share group target assignment metadata")
		if err != nil {
			return nil, err
		}
		e := r.Int32()
		return e, r.done("share group target assignment metadata")
	case shareRecMember:
		r, err := newShareValueReader(b, "share group member metadata")
		if err != nil {
			return nil, err
		}
		v := &shareMemberValue{rackID: r.CompactNullableString(), clientID: r.CompactString(), clientHost: r.CompactString()}
		n := r.CompactArrayLen()
		v.topics = make([]string, 0, min(max(n, 0), 1024))
		for i := int32(0); i < n && r.Ok(); i++ {
			v.topics = append(v.topics, r.CompactString())
		}
		slices.Sort(v.topics)
		v.topics = slices.Compact(v.topics)
		return v, r.done("share group member metadata")
	case shareRecTarget:
		r, err := newShareValueReader(b, "share group target assignment")
		if err != nil {
			return nil, err
		}
		a := shareAssignment(r.TopicPartitions())
		return a, r.done("share group target assignment")
	case shareRecCurrent:
		r, err := newShareValueReader(b, "share group current assignment")
		if err != nil {
			return nil, err
		}
		v := &shareCurrentValue{epoch: r.Int32(), prevEpoch: r.Int32(), state: r.Int8()}
		v.assigned = shareAssignment(r.TopicPartitions())
		return v, r.done("share group current assignment")
	}
	return nil, nil
}
