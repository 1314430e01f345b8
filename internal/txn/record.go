package txn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// The records of __transaction_state, in Kafka's layout
// (transaction-coordinator's TransactionLogKey and TransactionLogValue):
// the key is the transactional id, the value the whole metadata after a
// transition, a tombstone (nil value) deletes the id. The topic is
// compacted; replaying a partition's records in order rebuilds every
// transaction. docs/format/txn-state.md has the byte layout.

// Record is one record to append to __transaction_state; a nil Value is a
// tombstone.
type Record struct {
	Key   []byte
	Value []byte
}

// ErrCorruptRecord is returned for a key or value that cannot be decoded.
var ErrCorruptRecord = errors.New("txn: corrupt __transaction_state record")

// ErrUnknownKey is returned by DecodeKey for a key version other than 0
// (a record type this coordinator does not know; Kafka skips them).
var ErrUnknownKey = errors.New("txn: unknown __transaction_state key version")

// Kafka's tagged fields of TransactionLogValue version 1 (KIP-890).
const (
	tagPrevProducerID = 0
	tagNextProducerID = 1
	tagClientVersion  = 2
)

// Berth's tagged fields, far from Kafka's (which start at 0) so that
// Kafka adding tags does not collide.
const (
	tagLastProducerEpoch = 1000
	tagGroups            = 1001
)

// valueVersion is the value version Berth writes: 1, the flexible one,
// so that the KIP-890 fields and Berth's tags are kept.
const valueVersion = 1

// AppendKey appends a TransactionLogKey: version 0, then the
// transactional id as a (non-compact) string.
func AppendKey(dst []byte, transactionalID string) []byte {
	dst = kbin.AppendInt16(dst, 0)
	return kbin.AppendString(dst, transactionalID)
}

// DecodeKey decodes a key written by AppendKey.
func DecodeKey(b []byte) (string, error) {
	r := kbin.Reader{Src: b}
	v := r.Int16()
	if r.Ok() && v != 0 {
		return "", fmt.Errorf("%w: %d", ErrUnknownKey, v)
	}
	id := r.String()
	if err := done(&r, "key"); err != nil {
		return "", err
	}
	return id, nil
}

type tagged struct {
	tag  uint32
	data []byte
}

func appendTagged(dst []byte, fields []tagged) []byte {
	dst = kbin.AppendUvarint(dst, uint32(len(fields)))
	for _, f := range fields {
		dst = kbin.AppendUvarint(dst, f.tag)
		dst = kbin.AppendUvarint(dst, uint32(len(f.data)))
		dst = append(dst, f.data...)
	}
	return dst
}

// byTopic groups sorted partitions by topic.
func byTopic(ps []TopicPartition) (topics []string, ids [][]int32) {
	for _, tp := range ps {
		if n := len(topics); n == 0 || topics[n-1] != tp.Topic {
			topics, ids = append(topics, tp.Topic), append(ids, nil)
		}
		ids[len(ids)-1] = append(ids[len(ids)-1], tp.Partition)
	}
	return topics, ids
}

// AppendValue appends t as a TransactionLogValue, version 1. Partitions
// are null in the Empty state, as Kafka writes them.
func AppendValue(dst []byte, t *Txn) []byte {
	dst = kbin.AppendInt16(dst, valueVersion)
	dst = kbin.AppendInt64(dst, t.ProducerID)
	dst = kbin.AppendInt16(dst, t.ProducerEpoch)
	dst = kbin.AppendInt32(dst, t.TimeoutMs)
	dst = kbin.AppendInt8(dst, int8(t.Status))
	if t.Status == Empty {
		dst = kbin.AppendCompactNullableArrayLen(dst, 0, true)
	} else {
		topics, ids := byTopic(t.Partitions)
		dst = kbin.AppendCompactArrayLen(dst, len(topics))
		for i, topic := range topics {
			dst = kbin.AppendCompactString(dst, topic)
			dst = kbin.AppendCompactArrayLen(dst, len(ids[i]))
			for _, p := range ids[i] {
				dst = kbin.AppendInt32(dst, p)
			}
			dst = kbin.AppendUvarint(dst, 0) // no tags
		}
	}
	dst = kbin.AppendInt64(dst, t.LastUpdateMs)
	dst = kbin.AppendInt64(dst, t.StartMs)
	var tags []tagged
	if t.PrevProducerID != NoProducerID {
		tags = append(tags, tagged{tagPrevProducerID, kbin.AppendInt64(nil, t.PrevProducerID)})
	}
	if t.NextProducerID != NoProducerID {
		tags = append(tags, tagged{tagNextProducerID, kbin.AppendInt64(nil, t.NextProducerID)})
	}
	if t.ClientVersion != 0 {
		tags = append(tags, tagged{tagClientVersion, kbin.AppendInt16(nil, t.ClientVersion)})
	}
	if t.LastProducerEpoch != NoEpoch {
		tags = append(tags, tagged{tagLastProducerEpoch, kbin.AppendInt16(nil, t.LastProducerEpoch)})
	}
	if len(t.Groups) > 0 {
		g := kbin.AppendCompactArrayLen(nil, len(t.Groups))
		for _, s := range t.Groups {
			g = kbin.AppendCompactString(g, s)
		}
		tags = append(tags, tagged{tagGroups, g})
	}
	return appendTagged(dst, tags)
}

func done(r *kbin.Reader, what string) error {
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorruptRecord, what, err)
	}
	if len(r.Src) != 0 {
		return fmt.Errorf("%w: %s: %d trailing bytes", ErrCorruptRecord, what, len(r.Src))
	}
	return nil
}

// DecodeValue decodes a TransactionLogValue of version 0 or 1 for the
// transactional id id.
func DecodeValue(id string, b []byte) (*Txn, error) {
	r := kbin.Reader{Src: b}
	v := r.Int16()
	if r.Ok() && (v < 0 || v > 1) {
		return nil, fmt.Errorf("%w: value version %d", ErrCorruptRecord, v)
	}
	flexible := v >= 1
	t := &Txn{
		ID:                id,
		PrevProducerID:    NoProducerID,
		NextProducerID:    NoProducerID,
		LastProducerEpoch: NoEpoch,
		ProducerID:        r.Int64(),
		ProducerEpoch:     r.Int16(),
		TimeoutMs:         r.Int32(),
		Status:            Status(r.Int8()),
	}
	var n int32
	if flexible {
		n = r.CompactArrayLen()
	} else {
		n = r.ArrayLen()
	}
	for i := int32(0); i < n && r.Ok(); i++ {
		var topic string
		var np int32
		if flexible {
			topic, np = r.CompactString(), r.CompactArrayLen()
		} else {
			topic, np = r.String(), r.ArrayLen()
		}
		for j := int32(0); j < np && r.Ok(); j++ {
			t.addPartition(TopicPartition{topic, r.Int32()})
		}
		if flexible {
			skipTags(&r)
		}
	}
	t.LastUpdateMs = r.Int64()
	t.StartMs = r.Int64()
	if flexible {
		readTags(&r, func(tag uint32, f *kbin.Reader) {
			switch tag {
			case tagPrevProducerID:
				t.PrevProducerID = f.Int64()
			case tagNextProducerID:
				t.NextProducerID = f.Int64()
			case tagClientVersion:
				t.ClientVersion = f.Int16()
			case tagLastProducerEpoch:
				t.LastProducerEpoch = f.Int16()
			case tagGroups:
				ng := f.CompactArrayLen()
				for i := int32(0); i < ng && f.Ok(); i++ {
					t.addGroup(f.CompactString())
				}
			}
		})
	}
	if err := done(&r, "value"); err != nil {
		return nil, err
	}
	if t.Status < Empty || t.Status > PrepareEpochFence {
		return nil, fmt.Errorf("%w: status %d", ErrCorruptRecord, t.Status)
	}
	if t.Status == Empty {
		t.Partitions = nil // Kafka ignores them in Empty
	}
	return t, nil
}

func readTags(r *kbin.Reader, f func(tag uint32, v *kbin.Reader)) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag := r.Uvarint()
		v := kbin.Reader{Src: r.Span(int(r.Uvarint()))}
		if r.Ok() {
			f(tag, &v)
		}
	}
}

func skipTags(r *kbin.Reader) { readTags(r, func(uint32, *kbin.Reader) {}) }

// record encodes t's current state (or its tombstone when dead).
func record(t *Txn) Record {
	k := AppendKey(nil, t.ID)
	if t.Status == Dead {
		return Record{Key: k}
	}
	return Record{Key: k, Value: AppendValue(nil, t)}
}

// Replay applies one record of the partition, in log order. A key of an
// unknown version is skipped (as Kafka does); a corrupt record is an
// error wrapping ErrCorruptRecord and changes nothing.
func (p *Partition) Replay(key, value []byte) error {
	id, err := DecodeKey(key)
	if errors.Is(err, ErrUnknownKey) {
		return nil
	}
	if err != nil {
		return err
	}
	if value == nil {
		delete(p.txns, id)
		return nil
	}
	t, err := DecodeValue(id, value)
	if err != nil {
		return err
	}
	if t.Status == Dead {
		delete(p.txns, id)
		return nil
	}
	p.txns[id] = t
	return nil
}

// Pending returns the marker actions of every transaction in
// PrepareCommit or PrepareAbort, sorted by transactional id: after
// replaying its partition, a new coordinator sends them again and
// completes each transaction with MarkersDone.
func (p *Partition) Pending() []Markers {
	var out []Markers
	for _, id := range p.ids() {
		if t := p.txns[id]; t.Status == PrepareCommit || t.Status == PrepareAbort {
			out = append(out, markersOf(t))
		}
	}
	return out
}

func markersOf(t *Txn) Markers {
	return Markers{
		TransactionalID: t.ID,
		ProducerID:      t.ProducerID,
		ProducerEpoch:   t.ProducerEpoch,
		Commit:          t.Status == PrepareCommit,
		Partitions:      slices.Clone(t.Partitions),
	}
}
