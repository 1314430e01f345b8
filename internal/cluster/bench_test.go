package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/metadata"
)

// benchImage has 12 brokers in 3 racks and topics of 100 partitions
// (RF 3) up to total partitions.
func benchImage(b *testing.B, total int) *metadata.Image {
	im := emptyImage(b)
	for id := range int32(12) {
		im = applyRecs(b, im, register(id, fmt.Sprintf("r%d", id%3)))
	}
	for k := 0; k*100 < total; k++ {
		name := fmt.Sprintf("t%05d", k)
		reps, err := Assign(im, AssignRequest{Topic: name, Partitions: 100, ReplicationFactor: 3, Seed: int64(k)})
		if err != nil {
			b.Fatal(err)
		}
		im = applyRecs(b, im, createTopic(name, reps, nil))
	}
	return im
}

// BenchmarkAssign: placing a 100-partition RF-3 topic in a cluster that
// already has 10,000 partitions.
func BenchmarkAssign(b *testing.B) {
	im := benchImage(b, 10_000)
	b.ResetTimer()
	for i := range b.N {
		if _, err := Assign(im, AssignRequest{Topic: "new", Partitions: 100, ReplicationFactor: 3, Seed: int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanIdle: a Supervisor round's planning over 10,000 healthy
// partitions (what every tick and metadata change costs).
func BenchmarkPlanIdle(b *testing.B) {
	im := benchImage(b, 10_000)
	now := time.Unix(1000, 0)
	l := &fakeLiveness{seen: map[int32]time.Time{}}
	for id := range int32(12) {
		l.seen[id] = now
	}
	s, err := New(nil, l, Config{Now: func() time.Time { return now }, Logger: discard()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if items := s.plan(im, now, true); len(items) != 0 {
			b.Fatalf("%d items for a healthy cluster", len(items))
		}
	}
}
