package tests

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// A compacted topic keeps the latest value per key: after the cleaner
// runs, a reader from the beginning sees every key once with its newest
// value (and tombstoned keys not at all once delete.retention.ms passed),
// at the offsets they were written at.
func TestCompactionKeepsLatestPerKey(t *testing.T) {
	n := tc.Start(t, tc.With("log.cleaner.backoff.ms", "50"))
	tc.CreateTopic(t, n.Addr(), "state", 1, map[string]*string{
		"cleanup.policy":            strp("compact"),
		"segment.bytes":             strp("4096"),
		"min.cleanable.dirty.ratio": strp("0.01"),
		"delete.retention.ms":       strp("0"),
	})
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("state"))
	const keys, rounds = 10, 20
	latest := map[string]int64{}
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k++ {
			rec := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte(fmt.Sprintf("v%d-%d", k, r))}
			if r == rounds-1 && k == 0 {
				rec.Value = nil // tombstone for k0
			}
			produceSync(t, cl, rec)
			latest[string(rec.Key)] = rec.Offset
		}
	}
	// Roll the last written segment so it can be cleaned too.
	for i := 0; i < 30; i++ {
		produceSync(t, cl, &kgo.Record{Key: []byte("filler"), Value: make([]byte, 200)})
	}
	poll.Until(t, 30*time.Second, func() error {
		recs := consumeAll(t, n.Addr(), "state")
		perKey := map[string]int{}
		for _, r := range recs {
			perKey[string(r.Key)]++
		}
		for k := 1; k < keys; k++ {
			key := fmt.Sprintf("k%d", k)
			if perKey[key] != 1 {
				return fmt.Errorf("key %s appears %d times", key, perKey[key])
			}
		}
		if perKey["k0"] != 0 {
			return fmt.Errorf("tombstoned key k0 still appears %d times", perKey["k0"])
		}
		for _, r := range recs {
			if off, ok := latest[string(r.Key)]; ok && r.Offset != off {
				return fmt.Errorf("key %s at offset %d, latest was written at %d", r.Key, r.Offset, off)
			}
		}
		return nil
	})
	// Records without a key are refused on a compacted topic.
	err := cl.ProduceSync(ctxT(t, 10*time.Second), &kgo.Record{Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on a compacted topic: %v, want INVALID_RECORD", err)
	}
}

// consumeAll reads a partition from its start to its high watermark.
func consumeAll(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	ends, err := tc.Admin(t, addr).ListEndOffsets(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := tc.Client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx := ctxT(t, 20*time.Second)
	var out []*kgo.Record
	for {
		if len(out) > 0 && out[len(out)-1].Offset >= end.Offset-1 {
			return out
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s to offset %d: got to %d records", topic, end.Offset, len(out))
		}
		out = append(out, fs.Records()...)
	}
}
