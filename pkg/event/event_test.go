package event

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestNewStampsAnEventID(t *testing.T) {
	r := New("orders", []byte("order:HC-2048"), []byte(`{}`), WithContentType(JSON))
	id, ok := ID(r)
	if !ok {
		t.Fatal("no event-id")
	}
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 {
		t.Fatalf("event-id %q: %v, version %d; want a UUIDv7", id, err, u.Version())
	}
	if ct, _ := ContentType(r); ct != JSON {
		t.Fatalf("content-type %q", ct)
	}
	// UUIDv7s sort by creation (google/uuid keeps them monotonic within
	// a millisecond).
	prev := NewID()
	for range 1000 {
		next := NewID()
		if next <= prev {
			t.Fatalf("ids %s then %s do not sort by creation", prev, next)
		}
		prev = next
	}
}

func TestStampKeepsAnID(t *testing.T) {
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: HeaderID, Value: []byte("evt-1")}, {Key: "other", Value: []byte("x")}}}
	Stamp(r, WithTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	if id, _ := ID(r); id != "evt-1" {
		t.Fatalf("id %q, want the record's own", id)
	}
	if len(r.Headers) != 3 {
		t.Fatalf("headers %v", r.Headers)
	}
	// WithID replaces it, once.
	Stamp(r, WithID("evt-2"))
	n := 0
	for _, h := range r.Headers {
		if h.Key == HeaderID {
			n++
		}
	}
	if id, _ := ID(r); id != "evt-2" || n != 1 {
		t.Fatalf("id %q in %d headers", id, n)
	}
}

func TestTraceparent(t *testing.T) {
	tp := NewTraceparent()
	trace, span, err := ParseTraceparent(tp)
	if err != nil || len(trace) != 32 || len(span) != 16 {
		t.Fatalf("%s: %s %s %v", tp, trace, span, err)
	}
	child := ChildTraceparent(tp)
	ct, cs, err := ParseTraceparent(child)
	if err != nil || ct != trace || cs == span || !strings.HasSuffix(child, "-01") {
		t.Fatalf("child %s of %s", child, tp)
	}
	for _, bad := range []string{"", "00-abc-def-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"} {
		if _, _, err := ParseTraceparent(bad); !errors.Is(err, ErrTraceparent) {
			t.Errorf("%q: %v, want ErrTraceparent", bad, err)
		}
	}
	if _, _, err := ParseTraceparent(ChildTraceparent("garbage")); err != nil {
		t.Fatalf("a child of garbage is a new trace: %v", err)
	}
}
