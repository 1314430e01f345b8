package share

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The persisted state of a share-partition, in the layout of Kafka's
// __share_group_state records (KIP-932; share-coordinator's
// ShareSnapshotKey/Value and ShareUpdateKey/Value): a snapshot holds the
// whole state, an update the start offset (if it moved) and the state
// batches that changed; loading the latest snapshot and applying the
// updates after it in order rebuilds the state. docs/format/share-state.md
// has the byte layout.

// Record types of __share_group_state keys (the key's version field).
const (
	RecordSnapshot int16 = 0
	RecordUpdate   int16 = 1
)

// StateBatch is a range of records with one persisted state: Kafka's
// StateBatch plus Berth's tagged fields.
type StateBatch struct {
	FirstOffset   int64
	LastOffset    int64
	DeliveryState int8 // 0 available, 2 acknowledged, 3 archiving, 4 archived
	DeliveryCount int16
	// Berth (tagged): when an available record may be acquired again,
	// in milliseconds since the epoch (0: at once).
	AvailableAtMs int64
	// Berth (tagged): why an archiving record goes to the DLQ, and the
	// consumer's error text.
	Reason    Reason
	ErrorText string
}

// Snapshot is the whole state (ShareSnapshotValue).
type Snapshot struct {
	SnapshotEpoch int32
	StateEpoch    int32
	LeaderEpoch   int32
	StartOffset   int64
	// DeliveryCompleteCount (KIP-1226) is the number of acknowledged or
	// archived offsets at or past StartOffset.
	DeliveryCompleteCount int32
	StateBatches          []StateBatch
}

// Update is a change of the state (ShareUpdateValue).
type Update struct {
	SnapshotEpoch         int32
	LeaderEpoch           int32
	StartOffset           int64 // -1: unchanged
	DeliveryCompleteCount int32 // -1: unknown
	StateBatches          []StateBatch
	// StateEpoch is the state epoch the writer loaded (WriteShareGroupState
	// carries it; the record does not): a write against a state that was
	// reset since is fenced.
	StateEpoch int32
}

// Empty says there is nothing to persist.
func (u Update) Empty() bool { return u.StartOffset < 0 && len(u.StateBatches) == 0 }

// ErrCorruptState is returned for a snapshot or update that cannot be
// loaded or decoded.
var ErrCorruptState = errors.New("share: corrupt share-partition state")

func appendBatch(out []StateBatch, b StateBatch) []StateBatch {
	if k := len(out); k > 0 && out[k-1].LastOffset+1 == b.FirstOffset {
		l, c := out[k-1], b
		l.FirstOffset, l.LastOffset, c.FirstOffset, c.LastOffset = 0, 0, 0, 0
		if l == c {
			out[k-1].LastOffset = b.LastOffset
			return out
		}
	}
	return append(out, b)
}

func fromBatch(b StateBatch) (recState, error) {
	rs := recState{count: int(b.DeliveryCount)}
	switch RecordState(b.DeliveryState) {
	case Available:
		rs.state, rs.availableAt = Available, b.AvailableAtMs
	case Acknowledged:
		rs.state = Acknowledged
	case Archiving:
		rs.state, rs.reason, rs.errText = Archiving, b.Reason, b.ErrorText
	case Archived:
		rs.state = Archived
	default:
		return rs, fmt.Errorf("%w: delivery state %d at offset %d", ErrCorruptState, b.DeliveryState, b.FirstOffset)
	}
	if b.FirstOffset < 0 || b.FirstOffset > b.LastOffset || b.DeliveryCount < 0 {
		return rs, fmt.Errorf("%w: batch [%d, %d] count %d", ErrCorruptState, b.FirstOffset, b.LastOffset, b.DeliveryCount)
	}
	return rs, nil
}

// Load rebuilds a share-partition from its latest snapshot; apply the
// updates written after it with Apply. Records that were acquired when
// the state was written are available (at their persisted time): locks
// do not survive a restart, deliveries and backoffs do. Offsets between
// batches are available, never delivered.
func LoadPartition(cfg PartitionConfig, s Snapshot, rnd func() float64) (*SharePartition, error) {
	if s.StartOffset < 0 {
		return nil, fmt.Errorf("%w: start offset %d", ErrCorruptState, s.StartOffset)
	}
	p := NewPartition(cfg, s.StartOffset, rnd)
	p.stateEpoch, p.leaderEpoch = s.StateEpoch, s.LeaderEpoch
	if err := p.Apply(Update{StartOffset: -1, StateBatches: s.StateBatches}); err != nil {
		return nil, err
	}
	return p, nil
}

// Apply replays an update written after the snapshot p was loaded from.
func (p *SharePartition) Apply(u Update) error {
	p.begin()
	defer p.begin()
	if u.StartOffset >= 0 {
		p.trim(u.StartOffset)
	}
	prev := int64(-1)
	for _, b := range u.StateBatches {
		rs, err := fromBatch(b)
		if err != nil {
			return err
		}
		if b.FirstOffset <= prev {
			return fmt.Errorf("%w: batches out of order at offset %d", ErrCorruptState, b.FirstOffset)
		}
		prev = b.LastOffset
		if b.LastOffset < p.start {
			continue
		}
		if b.FirstOffset > p.end {
			p.extend(b.FirstOffset-1, recState{state: Available})
		}
		if b.LastOffset >= p.end {
			p.extend(b.LastOffset, rs)
		}
		p.apply(b.FirstOffset, b.LastOffset, func(recState) recState { return rs })
	}
	for len(p.runs) > 0 && (p.runs[0].state == Acknowledged || p.runs[0].state == Archived) {
		p.start = p.runs[0].last + 1
		p.runs = p.runs[1:]
	}
	return nil
}

// Snapshot returns the whole persisted state.
func (p *SharePartition) Snapshot() Snapshot {
	s := Snapshot{StateEpoch: p.stateEpoch, LeaderEpoch: p.leaderEpoch, StartOffset: p.start, DeliveryCompleteCount: p.deliveryComplete()}
	for _, r := range p.runs {
		s.StateBatches = appendBatch(s.StateBatches, p.persisted(r))
	}
	return s
}

// --- encoding --------------------------------------------------------

// Berth's tags in a StateBatch's tagged fields, far from Kafka's (which
// start at 0) so that Kafka adding tags does not collide.
const (
	tagAvailableAt = 1000
	tagReason      = 1001
	tagErrorText   = 1002
)

// AppendKey appends a __share_group_state key: the record type
// (RecordSnapshot or RecordUpdate) as the key version, then GroupId,
// TopicId and Partition.
func AppendKey(dst []byte, typ int16, group string, topicID [16]byte, partition int32) []byte {
	dst = kbin.AppendInt16(dst, typ)
	dst = kbin.AppendString(dst, group)
	dst = kbin.AppendUuid(dst, topicID)
	return kbin.AppendInt32(dst, partition)
}

// ParseKey parses a key written by AppendKey.
func ParseKey(b []byte) (typ int16, group string, topicID [16]byte, partition int32, err error) {
	r := kbin.Reader{Src: b}
	typ = r.Int16()
	group = r.String()
	topicID = r.Uuid()
	partition = r.Int32()
	if err = r.Complete(); err == nil && (len(r.Src) != 0 || (typ != RecordSnapshot && typ != RecordUpdate)) {
		err = errors.New("trailing bytes or unknown record type")
	}
	if err != nil {
		err = fmt.Errorf("%w: key: %v", ErrCorruptState, err)
	}
	return
}

func appendTagged(dst []byte, fields [][2]any) []byte {
	dst = kbin.AppendUvarint(dst, uint32(len(fields)))
	for _, f := range fields {
		data := f[1].([]byte)
		dst = kbin.AppendUvarint(dst, uint32(f[0].(int)))
		dst = kbin.AppendUvarint(dst, uint32(len(data)))
		dst = append(dst, data...)
	}
	return dst
}

func appendBatches(dst []byte, bs []StateBatch) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(bs))
	for _, b := range bs {
		dst = kbin.AppendInt64(dst, b.FirstOffset)
		dst = kbin.AppendInt64(dst, b.LastOffset)
		dst = kbin.AppendInt8(dst, b.DeliveryState)
		dst = kbin.AppendInt16(dst, b.DeliveryCount)
		dst = appendTagged(dst, b.berthFields())
	}
	return dst
}

// berthFields are b's Berth tagged fields (tag, encoded value).
func (b StateBatch) berthFields() [][2]any {
	var tags [][2]any
	if b.AvailableAtMs != 0 {
		tags = append(tags, [2]any{tagAvailableAt, kbin.AppendInt64(nil, b.AvailableAtMs)})
	}
	if b.Reason != ReasonNone {
		tags = append(tags, [2]any{tagReason, kbin.AppendInt8(nil, int8(b.Reason))})
	}
	if b.ErrorText != "" {
		tags = append(tags, [2]any{tagErrorText, kbin.AppendCompactString(nil, b.ErrorText)})
	}
	return tags
}

// setBerthField decodes one Berth tagged field into b (unknown tags are
// ignored).
func (b *StateBatch) setBerthField(tag uint32, v *kbin.Reader) {
	switch tag {
	case tagAvailableAt:
		b.AvailableAtMs = v.Int64()
	case tagReason:
		b.Reason = Reason(v.Int8())
	case tagErrorText:
		b.ErrorText = v.CompactString()
	}
}

// BerthTags returns b's Berth fields as the tagged fields of a
// ReadShareGroupState or WriteShareGroupState state batch: brokers pass
// the retry backoff and DLQ details to the share coordinator with
// Kafka's RPCs (the same tags as in the records).
func (b StateBatch) BerthTags() kmsg.Tags {
	var t kmsg.Tags
	for _, f := range b.berthFields() {
		t.Set(uint32(f[0].(int)), f[1].([]byte))
	}
	return t
}

// SetBerthTags reads the Berth fields of an RPC state batch's tags.
func (b *StateBatch) SetBerthTags(t kmsg.Tags) {
	t.Each(func(tag uint32, v []byte) {
		b.setBerthField(tag, &kbin.Reader{Src: v})
	})
}

func completeTag(dst []byte, dcc int32) []byte {
	if dcc < 0 {
		return kbin.AppendUvarint(dst, 0)
	}
	return appendTagged(dst, [][2]any{{0, kbin.AppendInt32(nil, dcc)}})
}

// AppendTo appends the snapshot as a ShareSnapshotValue, version 0.
func (s Snapshot) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, 0)
	dst = kbin.AppendInt32(dst, s.SnapshotEpoch)
	dst = kbin.AppendInt32(dst, s.StateEpoch)
	dst = kbin.AppendInt32(dst, s.LeaderEpoch)
	dst = kbin.AppendInt64(dst, s.StartOffset)
	dst = appendBatches(dst, s.StateBatches)
	return completeTag(dst, s.DeliveryCompleteCount)
}

// AppendTo appends the update as a ShareUpdateValue, version 0.
func (u Update) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, 0)
	dst = kbin.AppendInt32(dst, u.SnapshotEpoch)
	dst = kbin.AppendInt32(dst, u.LeaderEpoch)
	dst = kbin.AppendInt64(dst, u.StartOffset)
	dst = appendBatches(dst, u.StateBatches)
	return completeTag(dst, u.DeliveryCompleteCount)
}

// readTagged calls f for every tagged field; unknown tags are skipped.
func readTagged(r *kbin.Reader, f func(tag uint32, v *kbin.Reader)) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag := r.Uvarint()
		size := r.Uvarint()
		v := kbin.Reader{Src: r.Span(int(size))}
		if r.Ok() {
			f(tag, &v)
		}
	}
}

func readBatches(r *kbin.Reader) []StateBatch {
	n := r.CompactArrayLen()
	if n < 0 || !r.Ok() {
		return nil
	}
	bs := make([]StateBatch, 0, n)
	for i := int32(0); i < n && r.Ok(); i++ {
		b := StateBatch{FirstOffset: r.Int64(), LastOffset: r.Int64(), DeliveryState: r.Int8(), DeliveryCount: r.Int16()}
		readTagged(r, b.setBerthField)
		bs = append(bs, b)
	}
	return bs
}

func readComplete(r *kbin.Reader) int32 {
	dcc := int32(-1)
	readTagged(r, func(tag uint32, v *kbin.Reader) {
		if tag == 0 {
			dcc = v.Int32()
		}
	})
	return dcc
}

func done(r *kbin.Reader, what string) error {
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorruptState, what, err)
	}
	if len(r.Src) != 0 {
		return fmt.Errorf("%w: %s: %d trailing bytes", ErrCorruptState, what, len(r.Src))
	}
	return nil
}

// DecodeSnapshot decodes a ShareSnapshotValue written by AppendTo.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v != 0 {
		return Snapshot{}, fmt.Errorf("%w: snapshot value version %d", ErrCorruptState, v)
	}
	s := Snapshot{SnapshotEpoch: r.Int32(), StateEpoch: r.Int32(), LeaderEpoch: r.Int32(), StartOffset: r.Int64()}
	s.StateBatches = readBatches(&r)
	s.DeliveryCompleteCount = readComplete(&r)
	return s, done(&r, "snapshot")
}

// DecodeUpdate decodes a ShareUpdateValue written by AppendTo.
func DecodeUpdate(b []byte) (Update, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v != 0 {
		return Update{}, fmt.Errorf("%w: update value version %d", ErrCorruptState, v)
	}
	u := Update{SnapshotEpoch: r.Int32(), LeaderEpoch: r.Int32(), StartOffset: r.Int64()}
	u.StateBatches = readBatches(&r)
	u.DeliveryCompleteCount = readComplete(&r)
	return u, done(&r, "update")
}
