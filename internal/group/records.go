package group

// The __consumer_offsets record format is Kafka's, byte for byte, through
// kmsg: an OffsetCommitKey (key version 0 or 1; we write 1) with an
// OffsetCommitValue (versions 0-3 read; we write 3, leader epoch -1 when
// the commit had none), and a GroupMetadataKey (key version 2) with a
// GroupMetadataValue (versions 0-3 read; we write 3). A nil value is a
// tombstone: the offset or the group is deleted. KIP-848 consumer group
// records (key versions 3-8) are in consumer_records.go; other key
// versions (share and streams groups, regular expressions) are skipped on
// load.

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one __consumer_offsets record (Kafka's binary key/value; Value
// nil = tombstone).
type Record struct{ Key, Value []byte }

// ErrCorruptRecord is returned for a key or value that does not decode.
var ErrCorruptRecord = errors.New("group: corrupt __consumer_offsets record")

// errSkipRecord marks a record of a kind this coordinator does not serve.
var errSkipRecord = errors.New("group: record kind not served")

const (
	offsetKeyVersion   = 1
	groupKeyVersion    = 2
	offsetValueVersion = 3
	groupValueVersion  = 3
)

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

func offsetRecord(group string, tp topicPartition, o offset) Record {
	v := kmsg.OffsetCommitValue{
		Version:         offsetValueVersion,
		Offset:          o.offset,
		LeaderEpoch:     o.leaderEpoch,
		Metadata:        o.metadata,
		CommitTimestamp: o.commitMillis,
	}
	if o.expireMillis > 0 {
		// An explicit retention (OffsetCommit v2-v4) needs value v1, the
		// only one with an expire timestamp, as in Kafka.
		v.Version, v.ExpireTimestamp = 1, o.expireMillis
	}
	return Record{Key: offsetKey(group, tp.topic, tp.partition), Value: v.AppendTo(nil)}
}

func offsetTombstone(group string, tp topicPartition) Record {
	return Record{Key: offsetKey(group, tp.topic, tp.partition)}
}

func groupTombstone(group string) Record { return Record{Key: groupKey(group)} }

// decodedKey is a parsed record key.
type decodedKey struct {
	group    string
	isOffset bool
	tp       topicPartition
	typ      int16  // the key version: 0-1 offset, 2 classic group, 3-8 consumer group
	member   string // consumer group member records (5, 7, 8)
}

func decodeKey(b []byte) (decodedKey, error) {
	if len(b) < 2 {
		return decodedKey{}, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(b))
	}
	switch v := int16(b[0])<<8 | int16(b[1]); v {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(b); err != nil {
			return decodedKey{}, fmt.Errorf("%w: offset key: %v", ErrCorruptRecord, err)
		}
		return decodedKey{group: k.Group, isOffset: true, tp: topicPartition{k.Topic, k.Partition}, typ: v}, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(b); err != nil {
			return decodedKey{}, fmt.Errorf("%w: group key: %v", ErrCorruptRecord, err)
		}
		return decodedKey{group: k.Group, typ: v}, nil
	case recConsumerMetadata, recConsumerPartitions, recConsumerTargetMeta,
		recConsumerMember, recConsumerTarget, recConsumerCurrent:
		r := kbin.Reader{Src: b[2:]}
		k := decodedKey{group: r.String(), typ: v}
		if v == recConsumerMember || v == recConsumerTarget || v == recConsumerCurrent {
			k.member = r.String()
		}
		if err := r.Complete(); err != nil {
			return decodedKey{}, fmt.Errorf("%w: consumer group key %d: %v", ErrCorruptRecord, v, err)
		}
		return k, nil
	default:
		return decodedKey{}, fmt.Errorf("%w: key version %d", errSkipRecord, v)
	}
}

func decodeOffsetValue(b []byte) (offset, error) {
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(bytes.Clone(b)); err != nil {
		return offset{}, fmt.Errorf("%w: offset value: %v", ErrCorruptRecord, err)
	}
	if v.Version < 0 || v.Version > 4 {
		return offset{}, fmt.Errorf("%w: offset value version %d", ErrCorruptRecord, v.Version)
	}
	o := offset{offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata, commitMillis: v.CommitTimestamp}
	if v.Version >= 3 {
		o.leaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 && v.ExpireTimestamp > 0 {
		o.expireMillis = v.ExpireTimestamp
	}
	return o, nil
}

func decodeGroupValue(b []byte) (*kmsg.GroupMetadataValue, error) {
	v := new(kmsg.GroupMetadataValue)
	if err := v.ReadFrom(bytes.Clone(b)); err != nil {
		return nil, fmt.Errorf("%w: group value: %v", ErrCorruptRecord, err)
	}
	if v.Version < 0 || v.Version > 4 {
		return nil, fmt.Errorf("%w: group value version %d", ErrCorruptRecord, v.Version)
	}
	return v, nil
}
