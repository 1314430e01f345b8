// Package event is Berth's convention for naming and describing an event
// in the headers of the Kafka record that carries it, so that every part
// of a pipeline (an outbox relay, a consumer's inbox, a retry topic, a
// dead-letter topic) agrees on which event a record is:
//
//   - event-id: the event's stable identity, chosen once by the producer
//     of the event (not by a retry or a relay) and kept by every copy of
//     the record; a UUIDv7 by default (time-ordered, so ids sort by
//     creation). A consumer deduplicates on it (pkg/inbox).
//   - traceparent: the W3C Trace Context header of the operation that
//     made the event, so a trace follows the event across services.
//   - content-type: the payload's media type (application/json,
//     application/vnd.schemaregistry.v1+avro, ...).
//
// Header names are lower case, as W3C Trace Context and most Kafka
// tooling spell them. New builds a record with them; Stamp adds them to a
// record that lacks them; ID, Traceparent and ContentType read them.
package event

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The header names.
const (
	HeaderID          = "event-id"
	HeaderTraceparent = "traceparent"
	HeaderContentType = "content-type"
)

// Common content types.
const (
	JSON     = "application/json"
	Avro     = "application/vnd.schemaregistry.v1+avro"
	Protobuf = "application/vnd.schemaregistry.v1+protobuf"
)

// NewID returns a new event id: a UUIDv7 (RFC 9562) in its canonical text
// form. It panics only if the system's random source fails.
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		panic(fmt.Sprintf("event: no random source for a UUIDv7: %v", err))
	}
	return id.String()
}

// Option sets a header of a record New or Stamp makes.
type Option func(*kgo.Record)

// WithID gives the event an id of the caller's (an order id, a business
// key with a sequence, an id from an upstream system) instead of a new
// UUIDv7.
func WithID(id string) Option { return func(r *kgo.Record) { set(r, HeaderID, id) } }

// WithTraceparent sets the W3C traceparent header (see NewTraceparent).
func WithTraceparent(tp string) Option { return func(r *kgo.Record) { set(r, HeaderTraceparent, tp) } }

// WithContentType sets the content-type header.
func WithContentType(ct string) Option { return func(r *kgo.Record) { set(r, HeaderContentType, ct) } }

// New returns a record for topic with key and value and the event
// headers: a new event id unless WithID gives one, and the options' other
// headers.
func New(topic string, key, value []byte, opts ...Option) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: key, Value: value}
	return Stamp(r, opts...)
}

// Stamp applies opts to r and gives it a new event id if it has none;
// headers r already carries are replaced by the options' only. It
// returns r.
func Stamp(r *kgo.Record, opts ...Option) *kgo.Record {
	for _, o := range opts {
		o(r)
	}
	if _, ok := ID(r); !ok {
		set(r, HeaderID, NewID())
	}
	return r
}

// ID returns the record's event id (ok false: it has none).
func ID(r *kgo.Record) (string, bool) { return header(r, HeaderID) }

// Traceparent returns the record's traceparent header.
func Traceparent(r *kgo.Record) (string, bool) { return header(r, HeaderTraceparent) }

// ContentType returns the record's content-type header.
func ContentType(r *kgo.Record) (string, bool) { return header(r, HeaderContentType) }

// header returns the value of the last header named key: a header set
// twice (a relay adding one a producer set) counts as its last value.
func header(r *kgo.Record, key string) (string, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value), true
		}
	}
	return "", false
}

// set replaces every header named key with one holding v.
func set(r *kgo.Record, key, v string) {
	hs := r.Headers[:0:0]
	for _, h := range r.Headers {
		if h.Key != key {
			hs = append(hs, h)
		}
	}
	r.Headers = append(hs, kgo.RecordHeader{Key: key, Value: []byte(v)})
}

// NewTraceparent starts a new trace: a version 00 traceparent with a
// random trace id and span id, sampled.
func NewTraceparent() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("event: no random source: %v", err))
	}
	return "00-" + hex.EncodeToString(b[:16]) + "-" + hex.EncodeToString(b[16:]) + "-01"
}

// ErrTraceparent: a traceparent that is not W3C Trace Context's
// version-format.
var ErrTraceparent = errors.New("event: malformed traceparent")

// ParseTraceparent checks a traceparent (W3C Trace Context, version 00:
// 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, ids not all
// zeros) and returns its trace id and parent span id.
func ParseTraceparent(tp string) (traceID, spanID string, err error) {
	parts := strings.Split(tp, "-")
	if len(parts) < 4 || parts[0] == "ff" || len(parts[0]) != 2 || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return "", "", fmt.Errorf("%w: %q", ErrTraceparent, tp)
	}
	if parts[0] == "00" && len(parts) != 4 {
		return "", "", fmt.Errorf("%w: %q (version 00 has four fields)", ErrTraceparent, tp)
	}
	for _, p := range parts[:4] {
		if _, err := hex.DecodeString(p); err != nil || strings.ToLower(p) != p {
			return "", "", fmt.Errorf("%w: %q (not lower-case hex)", ErrTraceparent, tp)
		}
	}
	if strings.Trim(parts[1], "0") == "" || strings.Trim(parts[2], "0") == "" {
		return "", "", fmt.Errorf("%w: %q (an all-zero id)", ErrTraceparent, tp)
	}
	return parts[1], parts[2], nil
}

// ChildTraceparent returns a traceparent for a new span in tp's trace
// (the trace id and flags kept, a new parent id), or a new trace when tp
// is malformed: what a relay or consumer stamps on the records it makes
// from an event.
func ChildTraceparent(tp string) string {
	traceID, _, err := ParseTraceparent(tp)
	if err != nil {
		return NewTraceparent()
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("event: no random source: %v", err))
	}
	return "00-" + traceID + "-" + hex.EncodeToString(b[:]) + "-" + strings.Split(tp, "-")[3]
}
