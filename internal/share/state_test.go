package share

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestKeyRoundTrip(t *testing.T) {
	id := [16]byte{1, 2, 3, 15: 9}
	b := AppendKey(nil, RecordUpdate, "shipments", id, 7)
	typ, g, gotID, p, err := ParseKey(b)
	if err != nil || typ != RecordUpdate || g != "shipments" || gotID != id || p != 7 {
		t.Fatalf("ParseKey = %d %q %v %d %v", typ, g, gotID, p, err)
	}
	if _, _, _, _, err := ParseKey(b[:len(b)-1]); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("short key: %v", err)
	}
	if _, _, _, _, err := ParseKey(AppendKey(nil, 5, "g", id, 0)); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("unknown record type: %v", err)
	}
}

func TestValueRoundTrip(t *testing.T) {
	s := Snapshot{SnapshotEpoch: 3, StateEpoch: 2, LeaderEpoch: 9, StartOffset: 100, DeliveryCompleteCount: 4, StateBatches: []StateBatch{
		{FirstOffset: 100, LastOffset: 104, DeliveryState: 0, DeliveryCount: 2, AvailableAtMs: 1_767_225_600_000},
		{FirstOffset: 105, LastOffset: 105, DeliveryState: 3, DeliveryCount: 5, Reason: ReasonRejected, ErrorText: "boom\n\tat x.go:1"},
		{FirstOffset: 106, LastOffset: 109, DeliveryState: 4},
	}}
	got, err := DecodeSnapshot(s.AppendTo(nil))
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("snapshot round trip: %+v %v", got, err)
	}
	u := Update{SnapshotEpoch: 3, LeaderEpoch: 9, StartOffset: -1, DeliveryCompleteCount: -1, StateBatches: s.StateBatches[1:]}
	gotU, err := DecodeUpdate(u.AppendTo(nil))
	if err != nil || !reflect.DeepEqual(gotU, u) {
		t.Fatalf("update round trip: %+v %v", gotU, err)
	}
	b := u.AppendTo(nil)
	for i := range len(b) {
		if _, err := DecodeUpdate(b[:i]); err == nil {
			t.Fatalf("truncated at %d: no error", i)
		}
	}
}

// A batch written without Berth's tags (as Kafka writes it) loads as
// available at once; unknown tags are skipped.
func TestLoadWithoutBerthTags(t *testing.T) {
	s := Snapshot{StartOffset: 10, StateBatches: []StateBatch{
		{FirstOffset: 10, LastOffset: 11, DeliveryState: 0, DeliveryCount: 1},
		{FirstOffset: 14, LastOffset: 14, DeliveryState: 2, DeliveryCount: 1},
	}}
	b := s.AppendTo(nil)
	p, err := LoadPartition(PartitionDefaults(), mustDecodeSnapshot(t, b), nil)
	if err != nil {
		t.Fatal(err)
	}
	// 12-13 were never delivered: available with count 0.
	acq, _ := p.Acquire("a", []LogBatch{{First: 10, Last: 20}}, 10, spT0)
	want := []AcquiredRange{{10, 11, 2}, {12, 13, 1}, {15, 20, 1}}
	if !reflect.DeepEqual(acq, want) {
		t.Fatalf("acquired %v, want %v", acq, want)
	}
	if _, err := LoadPartition(PartitionDefaults(), Snapshot{StateBatches: []StateBatch{{FirstOffset: 0, LastOffset: 0, DeliveryState: 1}}}, nil); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("acquired state persisted: %v", err)
	}
	if _, err := LoadPartition(PartitionDefaults(), Snapshot{StateBatches: []StateBatch{{FirstOffset: 5, LastOffset: 6}, {FirstOffset: 6, LastOffset: 7}}}, nil); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("overlapping batches: %v", err)
	}
}

func mustDecodeSnapshot(t *testing.T, b []byte) Snapshot {
	s, err := DecodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: 2 * time.Second, Multiplier: 2, Max: 5 * time.Minute, Jitter: 0.2}
	for _, c := range []struct {
		count int
		u     float64
		want  time.Duration
	}{
		{1, 0.5, 2 * time.Second}, {2, 0.5, 4 * time.Second}, {4, 0.5, 16 * time.Second},
		{1, 0, 1600 * time.Millisecond}, {1, 1, 2400 * time.Millisecond},
		{9, 0.5, 5 * time.Minute}, {100, 0.5, 5 * time.Minute}, {9, 1, 5 * time.Minute}, {9, 0, 4 * time.Minute},
	} {
		if got := b.Delay(c.count, c.u); got != c.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", c.count, c.u, got, c.want)
		}
	}
	if got := (Backoff{}).Delay(3, 0.9); got != 0 {
		t.Errorf("disabled backoff: %v", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := PartitionDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*PartitionConfig){
		"lock":       func(c *PartitionConfig) { c.LockDuration = 999 * time.Millisecond },
		"limit":      func(c *PartitionConfig) { c.DeliveryCountLimit = 1 },
		"locks":      func(c *PartitionConfig) { c.MaxRecordLocks = 0 },
		"max":        func(c *PartitionConfig) { c.Backoff.Max = time.Second },
		"multiplier": func(c *PartitionConfig) { c.Backoff.Multiplier = 0.5 },
		"jitter":     func(c *PartitionConfig) { c.Backoff.Jitter = 1.5 },
	} {
		c := PartitionDefaults()
		f(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidPartitionConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDLQHeaders(t *testing.T) {
	h := DLQHeaders("g", "jobs", 3, 42, 1700, DLQAction{First: 42, Last: 42, Reason: ReasonRejected, DeliveryCount: 2, ErrorText: "bad"})
	var b strings.Builder
	for _, x := range h {
		b.WriteString(x.Key + "=" + string(x.Value) + ";")
	}
	want := "__dlq.errors.topic=jobs;__dlq.errors.partition=3;__dlq.errors.offset=42;__dlq.errors.group=g;" +
		"__dlq.errors.delivery.count=2;__dlq.errors.message=Offset rejected by client.;" +
		"__dlq.errors.berth.reason=rejected;__dlq.errors.berth.timestamp=1700;__dlq.errors.berth.client.error=bad;"
	if b.String() != want {
		t.Fatalf("headers\n%s\nwant\n%s", b.String(), want)
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(Snapshot{StartOffset: 1, StateBatches: []StateBatch{{FirstOffset: 1, LastOffset: 2, Reason: 1, ErrorText: "x", AvailableAtMs: 5}}}.AppendTo(nil))
	f.Add(Update{StartOffset: -1, DeliveryCompleteCount: 3}.AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := DecodeSnapshot(b); err == nil {
			if p, err := LoadPartition(PartitionDefaults(), s, nil); err == nil {
				p.Snapshot()
			}
		}
		if u, err := DecodeUpdate(b); err == nil {
			if len(u.StateBatches) < 64 {
				_ = NewPartition(PartitionDefaults(), 0, nil).Apply(u)
			}
		}
	})
}

// BenchmarkAcquireAck: one member acquires 100 records at a time from
// batches of 10 and accepts every other one, releasing the rest.
func BenchmarkAcquireAck(b *testing.B) {
	cfg := PartitionDefaults()
	cfg.Backoff.Initial = 0
	p := NewPartition(cfg, 0, nil)
	now := spT0
	for i := 0; b.Loop(); i++ {
		off, _ := p.NextFetchOffset(now)
		var fetched []LogBatch
		for o := off; o < off+200; o += 10 {
			fetched = append(fetched, LogBatch{First: o, Last: o + 9})
		}
		acq, _ := p.Acquire("a", fetched, 100, now)
		var acks []Ack
		for _, a := range acq {
			for o := a.First; o <= a.Last; o++ {
				t := AckAccept
				if o%2 == 1 && i%3 != 0 {
					t = AckRelease
				}
				acks = append(acks, Ack{First: o, Last: o, Types: []AckType{t}})
			}
		}
		if _, err := p.Acknowledge("a", acks, now); err != nil {
			b.Fatal(err)
		}
		now = now.Add(time.Millisecond)
	}
}
