package share

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// annotated is a share-partition with a DLQ and records 0-9 acquired by
// member a at spT0, delivery limit 2, no backoff.
func annotated(t *testing.T) *SharePartition {
	t.Helper()
	cfg := PartitionDefaults()
	cfg.DeadLetter = true
	cfg.DeliveryCountLimit = 2
	cfg.Backoff = Backoff{}
	cfg.MaxErrorText = 16
	p := NewPartition(cfg, 0, nil)
	if acq, _ := p.Acquire("a", []LogBatch{{First: 0, Last: 9}}, 10, spT0); len(acq) != 1 || acq[0] != (AcquiredRange{0, 9, 1}) {
		t.Fatalf("acquired %v", acq)
	}
	return p
}

func ack(t *testing.T, p *SharePartition, member string, first, last int64, typ AckType, text string, at time.Time) StateChange {
	t.Helper()
	ch, err := p.Acknowledge(member, []Ack{{First: first, Last: last, Types: []AckType{typ}, ErrorText: text}}, at)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestAnnotateRejectCarriesText(t *testing.T) {
	p := annotated(t)
	before := p.Snapshot()
	if err := p.Annotate("a", 2, 3, "bad address", spT0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Snapshot(), before) {
		t.Fatal("an annotation changed the persisted form")
	}
	ch := ack(t, p, "a", 0, 9, AckReject, "", spT0.Add(2*time.Second))
	want := []DLQAction{
		{First: 0, Last: 1, Reason: ReasonRejected, DeliveryCount: 1},
		{First: 2, Last: 3, Reason: ReasonRejected, DeliveryCount: 1, ErrorText: "bad address"},
		{First: 4, Last: 9, Reason: ReasonRejected, DeliveryCount: 1},
	}
	if !reflect.DeepEqual(ch.DLQ, want) {
		t.Fatalf("DLQ actions\n got %+v\nwant %+v", ch.DLQ, want)
	}
	// The text is persisted with the Archiving records and comes back
	// with PendingDLQ (a restart before the DLQ write).
	if got := p.PendingDLQ(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pending DLQ %+v", got)
	}
}

func TestAnnotateAckTextWins(t *testing.T) {
	p := annotated(t)
	if err := p.Annotate("a", 0, 0, "from annotate", spT0); err != nil {
		t.Fatal(err)
	}
	ch := ack(t, p, "a", 0, 0, AckReject, "from ack", spT0)
	if len(ch.DLQ) != 1 || ch.DLQ[0].ErrorText != "from ack" {
		t.Fatalf("DLQ %+v", ch.DLQ)
	}
}

func TestAnnotateRenewKeepsText(t *testing.T) {
	p := annotated(t)
	if err := p.Annotate("a", 5, 5, "slow then bad", spT0); err != nil {
		t.Fatal(err)
	}
	ack(t, p, "a", 5, 5, AckRenew, "", spT0.Add(20*time.Second))
	ch := ack(t, p, "a", 5, 5, AckReject, "", spT0.Add(45*time.Second)) // past the first lock, inside the renewed one
	if len(ch.DLQ) != 1 || ch.DLQ[0].ErrorText != "slow then bad" {
		t.Fatalf("DLQ %+v", ch.DLQ)
	}
}

// A release below the delivery limit drops the text; at the limit the
// record is parked with it.
func TestAnnotateReleaseAtLimit(t *testing.T) {
	p := annotated(t)
	if err := p.Annotate("a", 0, 0, "timeout 1", spT0); err != nil {
		t.Fatal(err)
	}
	if ch := ack(t, p, "a", 0, 0, AckRelease, "", spT0); len(ch.DLQ) != 0 {
		t.Fatalf("DLQ after the first release: %+v", ch.DLQ)
	}
	at := spT0.Add(time.Second)
	if acq, _ := p.Acquire("b", []LogBatch{{First: 0, Last: 0}}, 1, at); len(acq) != 1 || acq[0].DeliveryCount != 2 {
		t.Fatalf("reacquired %v", acq)
	}
	if err := p.Annotate("a", 0, 0, "not yours", at); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("annotating another member's record: %v", err)
	}
	// The first delivery's text is gone: b's plain reject has none...
	q := annotated(t)
	_ = q.Annotate("a", 0, 0, "timeout 1", spT0)
	ack(t, q, "a", 0, 0, AckRelease, "", spT0)
	q.Acquire("b", []LogBatch{{First: 0, Last: 0}}, 1, at)
	if ch := ack(t, q, "b", 0, 0, AckReject, "", at); len(ch.DLQ) != 1 || ch.DLQ[0].ErrorText != "" {
		t.Fatalf("stale text parked: %+v", ch.DLQ)
	}
	// ...while b's own annotation goes with its release at the limit.
	if err := p.Annotate("b", 0, 0, "timeout 2", at); err != nil {
		t.Fatal(err)
	}
	ch := ack(t, p, "b", 0, 0, AckRelease, "", at)
	want := []DLQAction{{First: 0, Last: 0, Reason: ReasonDeliveryLimit, DeliveryCount: 2, ErrorText: "timeout 2"}}
	if !reflect.DeepEqual(ch.DLQ, want) {
		t.Fatalf("DLQ %+v", ch.DLQ)
	}
}

func TestAnnotateExpiryAtLimit(t *testing.T) {
	p := annotated(t)
	ack(t, p, "a", 9, 9, AckRelease, "", spT0)
	p.Acquire("a", []LogBatch{{First: 9, Last: 9}}, 1, spT0)
	if err := p.Annotate("a", 9, 9, "stuck", spT0); err != nil {
		t.Fatal(err)
	}
	ch := p.Expire(spT0.Add(p.cfg.LockDuration))
	var parked []DLQAction
	for _, a := range ch.DLQ {
		if a.Reason == ReasonDeliveryLimit {
			parked = append(parked, a)
		}
	}
	if len(parked) != 1 || parked[0].First != 9 || parked[0].ErrorText != "stuck" {
		t.Fatalf("DLQ %+v", ch.DLQ)
	}
}

func TestAnnotateRefused(t *testing.T) {
	p := annotated(t)
	ack(t, p, "a", 4, 4, AckAccept, "", spT0)
	for _, c := range []struct {
		name        string
		member      string
		first, last int64
		at          time.Time
		want        error
	}{
		{"another member", "b", 0, 0, spT0, ErrInvalidRecordState},
		{"an acknowledged record", "a", 3, 5, spT0, ErrInvalidRecordState},
		{"past the window", "a", 9, 10, spT0, ErrInvalidRecordState},
		{"an expired lock", "a", 0, 0, spT0.Add(p.cfg.LockDuration), ErrInvalidRecordState},
		{"a reversed range", "a", 2, 1, spT0, ErrInvalidAck},
	} {
		before := p.runs
		if err := p.Annotate(c.member, c.first, c.last, "x", c.at); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if !reflect.DeepEqual(p.runs, before) {
			t.Errorf("%s: a refused annotation changed the runs", c.name)
		}
	}
	// Below the start offset: already finished, ignored.
	ack(t, p, "a", 0, 0, AckAccept, "", spT0)
	if err := p.Annotate("a", 0, 0, "late", spT0); err != nil {
		t.Fatalf("below the start offset: %v", err)
	}
}

func TestAnnotateCutsText(t *testing.T) {
	p := annotated(t)
	long := strings.Repeat("é", 20) // 40 bytes; the bound is 16
	if err := p.Annotate("a", 0, 0, long, spT0); err != nil {
		t.Fatal(err)
	}
	ch := ack(t, p, "a", 0, 0, AckReject, "", spT0)
	if got := ch.DLQ[0].ErrorText; got != strings.Repeat("é", 8) {
		t.Fatalf("cut to %q", got)
	}
	if got := cutText("aé", 2); got != "a" {
		t.Fatalf("cutText split a rune: %q", got)
	}
}

// An annotation that is removed (empty text) merges the runs again.
func TestAnnotateEmptyRemoves(t *testing.T) {
	p := annotated(t)
	_ = p.Annotate("a", 3, 4, "x", spT0)
	if len(p.runs) != 3 {
		t.Fatalf("runs %+v", p.runs)
	}
	_ = p.Annotate("a", 3, 4, "", spT0)
	if len(p.runs) != 1 {
		t.Fatalf("runs after removing the text %+v", p.runs)
	}
}
