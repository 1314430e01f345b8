// Package berthmsg holds Berth's extensions to the Kafka protocol as
// types that satisfy kmsg.Request and kmsg.Response, so a franz-go client
// sends them like any Kafka request:
//
//	req := berthmsg.NewAnnotateShareRecordsRequest()
//	req.GroupID, req.MemberID = group, member
//	req.Topics = []berthmsg.AnnotateShareRecordsTopic{{TopicID: id, Partitions: ...}}
//	kresp, err := client.Broker(leader).Request(ctx, req)
//	resp := kresp.(*berthmsg.AnnotateShareRecordsResponse)
//
// Extension API keys start at 32000, far above Kafka's. kgo sends a key
// only if it is in the client's max versions (kgo.MaxVersions; add
// Berth's with WithVersions) and in the broker's ApiVersions answer,
// where a Berth broker lists its extensions: against another broker kgo
// fails the request without sending it ("broker is too old"). The byte
// layout is in docs/compatibility.md ("Berth extensions").
//
// It also holds the names a client of Berth needs beyond kmsg's: the
// tagged fields Berth adds to DescribeShareGroupOffsets (sharestats.go)
// and the dead-letter queue's config names and record headers (dlq.go).
package berthmsg

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// AnnotateShareRecordsKey is the API key of BerthAnnotateShareRecords.
const AnnotateShareRecordsKey int16 = 32000

// AnnotateShareRecordsName is the API's name, as kmsg.NameForKey would
// spell it.
const AnnotateShareRecordsName = "BerthAnnotateShareRecords"

// ErrTruncated: a message ended before its last field.
var ErrTruncated = errors.New("berthmsg: truncated message")

// AnnotateShareRecordsRequest attaches an error text to share-group
// records the member holds (acquired by it, under a live lock), before
// the member acknowledges them: a REJECT that follows without its own
// text (every stock Kafka client sends none) parks the records in the
// group's dead-letter topic with the text in the header
// __dlq.errors.berth.client.error, and a RELEASE that reaches the
// delivery limit does the same. The text is kept only while the member
// holds the records (an ACCEPT, RELEASE or expiry below the limit drops
// it) and is cut to the broker's bound (8 KiB by default). It is sent
// to the leader of each partition, like ShareAcknowledge.
//
// Version 0 is the only version and uses flexible encoding (KIP-482).
type AnnotateShareRecordsRequest struct {
	Version  int16
	GroupID  string
	MemberID string
	Topics   []AnnotateShareRecordsTopic
}

// AnnotateShareRecordsTopic is one topic of a request, by topic ID.
type AnnotateShareRecordsTopic struct {
	TopicID    [16]byte
	Partitions []AnnotateShareRecordsPartition
}

// AnnotateShareRecordsPartition annotates the records [FirstOffset,
// LastOffset] of one partition with ErrorText.
type AnnotateShareRecordsPartition struct {
	Partition   int32
	FirstOffset int64
	LastOffset  int64
	ErrorText   string
}

// NewAnnotateShareRecordsRequest returns an empty request.
func NewAnnotateShareRecordsRequest() *AnnotateShareRecordsRequest {
	return &AnnotateShareRecordsRequest{}
}

func (*AnnotateShareRecordsRequest) Key() int16           { return AnnotateShareRecordsKey }
func (*AnnotateShareRecordsRequest) MaxVersion() int16    { return 0 }
func (r *AnnotateShareRecordsRequest) SetVersion(v int16) { r.Version = v }
func (r *AnnotateShareRecordsRequest) GetVersion() int16  { return r.Version }
func (*AnnotateShareRecordsRequest) IsFlexible() bool     { return true }
func (r *AnnotateShareRecordsRequest) ResponseKind() kmsg.Response {
	return &AnnotateShareRecordsResponse{Version: r.Version}
}

// AppendTo appends the request body.
func (r *AnnotateShareRecordsRequest) AppendTo(b []byte) []byte {
	b = appendString(b, r.GroupID)
	b = appendString(b, r.MemberID)
	b = binary.AppendUvarint(b, uint64(len(r.Topics))+1)
	for _, t := range r.Topics {
		b = append(b, t.TopicID[:]...)
		b = binary.AppendUvarint(b, uint64(len(t.Partitions))+1)
		for _, p := range t.Partitions {
			b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
			b = binary.BigEndian.AppendUint64(b, uint64(p.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(p.LastOffset))
			b = appendString(b, p.ErrorText)
			b = append(b, 0) // tagged fields
		}
		b = append(b, 0)
	}
	return append(b, 0)
}

// ReadFrom decodes the request body.
func (r *AnnotateShareRecordsRequest) ReadFrom(src []byte) error {
	d := decoder{b: src}
	r.GroupID = d.string()
	r.MemberID = d.string()
	r.Topics = nil
	nt := d.arrayLen(17)
	for range nt {
		var t AnnotateShareRecordsTopic
		d.uuid(&t.TopicID)
		np := d.arrayLen(4 + 8 + 8 + 1 + 1)
		for range np {
			var p AnnotateShareRecordsPartition
			p.Partition = d.int32()
			p.FirstOffset = d.int64()
			p.LastOffset = d.int64()
			p.ErrorText = d.string()
			d.tags()
			t.Partitions = append(t.Partitions, p)
		}
		d.tags()
		r.Topics = append(r.Topics, t)
	}
	d.tags()
	return d.done()
}

// AnnotateShareRecordsResponse answers an AnnotateShareRecordsRequest.
// ErrorCode is a request-level error (INVALID_REQUEST for a blank group
// or member, UNKNOWN_MEMBER_ID); each partition has its own:
// INVALID_RECORD_STATE when a record of the range is not acquired by the
// member under a live lock (nothing of that partition changes),
// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID.
type AnnotateShareRecordsResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []AnnotateShareRecordsResponseTopic
}

// AnnotateShareRecordsResponseTopic is one topic of a response.
type AnnotateShareRecordsResponseTopic struct {
	TopicID    [16]byte
	Partitions []AnnotateShareRecordsResponsePartition
}

// AnnotateShareRecordsResponsePartition is one partition's outcome.
type AnnotateShareRecordsResponsePartition struct {
	Partition    int32
	ErrorCode    int16
	ErrorMessage *string
}

func (*AnnotateShareRecordsResponse) Key() int16           { return AnnotateShareRecordsKey }
func (*AnnotateShareRecordsResponse) MaxVersion() int16    { return 0 }
func (r *AnnotateShareRecordsResponse) SetVersion(v int16) { r.Version = v }
func (r *AnnotateShareRecordsResponse) GetVersion() int16  { return r.Version }
func (*AnnotateShareRecordsResponse) IsFlexible() bool     { return true }
func (r *AnnotateShareRecordsResponse) RequestKind() kmsg.Request {
	return &AnnotateShareRecordsRequest{Version: r.Version}
}

// Throttle implements kmsg.ThrottleResponse.
func (r *AnnotateShareRecordsResponse) Throttle() (int32, bool) { return r.ThrottleMillis, true }

// AppendTo appends the response body.
func (r *AnnotateShareRecordsResponse) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(r.ThrottleMillis))
	b = binary.BigEndian.AppendUint16(b, uint16(r.ErrorCode))
	b = appendNullableString(b, r.ErrorMessage)
	b = binary.AppendUvarint(b, uint64(len(r.Topics))+1)
	for _, t := range r.Topics {
		b = append(b, t.TopicID[:]...)
		b = binary.AppendUvarint(b, uint64(len(t.Partitions))+1)
		for _, p := range t.Partitions {
			b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
			b = binary.BigEndian.AppendUint16(b, uint16(p.ErrorCode))
			b = appendNullableString(b, p.ErrorMessage)
			b = append(b, 0)
		}
		b = append(b, 0)
	}
	return append(b, 0)
}

// ReadFrom decodes the response body.
func (r *AnnotateShareRecordsResponse) ReadFrom(src []byte) error {
	d := decoder{b: src}
	r.ThrottleMillis = d.int32()
	r.ErrorCode = d.int16()
	r.ErrorMessage = d.nullableString()
	r.Topics = nil
	nt := d.arrayLen(17)
	for range nt {
		var t AnnotateShareRecordsResponseTopic
		d.uuid(&t.TopicID)
		np := d.arrayLen(4 + 2 + 1 + 1)
		for range np {
			var p AnnotateShareRecordsResponsePartition
			p.Partition = d.int32()
			p.ErrorCode = d.int16()
			p.ErrorMessage = d.nullableString()
			d.tags()
			t.Partitions = append(t.Partitions, p)
		}
		d.tags()
		r.Topics = append(r.Topics, t)
	}
	d.tags()
	return d.done()
}

// --- flexible encoding -------------------------------------------------

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s))+1)
	return append(b, s...)
}

func appendNullableString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, 0)
	}
	return appendString(b, *s)
}

// decoder reads flexible fields; the first error sticks and later reads
// return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrTruncated, what)
	}
	d.b = nil
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		d.fail(what)
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int16() int16 {
	if b := d.take(2, "int16"); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (d *decoder) int32() int32 {
	if b := d.take(4, "int32"); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (d *decoder) int64() int64 {
	if b := d.take(8, "int64"); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (d *decoder) uuid(id *[16]byte) {
	if b := d.take(16, "uuid"); b != nil {
		copy(id[:], b)
	}
}

func (d *decoder) string() string {
	n := d.uvarint("string length")
	if n == 0 {
		if d.err == nil {
			d.err = fmt.Errorf("%w: null string where a string is required", ErrTruncated)
		}
		return ""
	}
	if n-1 > uint64(len(d.b)) {
		d.fail("string")
		return ""
	}
	return string(d.take(int(n-1), "string"))
}

func (d *decoder) nullableString() *string {
	n := d.uvarint("string length")
	if n == 0 || d.err != nil {
		return nil
	}
	if n-1 > uint64(len(d.b)) {
		d.fail("string")
		return nil
	}
	s := string(d.take(int(n-1), "string"))
	return &s
}

// arrayLen reads a compact array length; each element takes at least
// minSize bytes, which bounds the length by what is left.
func (d *decoder) arrayLen(minSize int) int {
	n := d.uvarint("array length")
	if n == 0 {
		return 0 // null array: empty
	}
	if n-1 > uint64(len(d.b)/minSize) {
		d.fail("array")
		return 0
	}
	return int(n - 1)
}

// tags skips a tagged-field section (no tags are defined).
func (d *decoder) tags() {
	n := d.uvarint("tag count")
	for i := uint64(0); i < n && d.err == nil; i++ {
		d.uvarint("tag")
		size := d.uvarint("tag size")
		if size > uint64(len(d.b)) {
			d.fail("tag")
			return
		}
		d.take(int(size), "tag")
	}
}

func (d *decoder) done() error { return d.err }

// WithVersions adds Berth's extension keys to vs (kversion.Stable() when
// nil) and returns it, for kgo.MaxVersions: kgo sends no key that is
// missing from its max versions.
//
//	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(berthmsg.WithVersions(nil)))
func WithVersions(vs *kversion.Versions) *kversion.Versions {
	if vs == nil {
		vs = kversion.Stable()
	}
	vs.SetMaxKeyVersion(AnnotateShareRecordsKey, 0)
	vs.SetMaxKeyVersion(ForgetShareGroupKey, 0)
	return vs
}
