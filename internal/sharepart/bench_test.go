package sharepart

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/share"
)

// benchLog is an endless partition of batches of per 1 KiB records each;
// Read returns the one batch at off (off is always a multiple of per).
type benchLog struct {
	per      int
	template []byte
}

func newBenchLog(per int) *benchLog {
	recs := make([]batch.KV, per)
	for i := range recs {
		recs[i] = batch.KV{Value: bytes.Repeat([]byte{'j'}, 1024)}
	}
	return &benchLog{per: per, template: batch.Build(recs, 0)}
}

func (l *benchLog) LeaderEpoch() int32      { return 0 }
func (l *benchLog) LogStartOffset() int64   { return 0 }
func (l *benchLog) HighWatermark() int64    { return 1 << 62 }
func (l *benchLog) LastStableOffset() int64 { return 1 << 62 }
func (l *benchLog) ReadCommitted(off int64, maxBytes int32, minOne bool, alloc func(int) []byte) (replica.ReadResult, error) {
	return l.Read(off, maxBytes, minOne, alloc)
}
func (l *benchLog) OffsetForTimestamp(int64) (int64, int64, bool, error) {
	return 0, 0, true, nil
}

func (l *benchLog) Read(off int64, _ int32, _ bool, alloc func(int) []byte) (replica.ReadResult, error) {
	var b []byte
	if alloc != nil {
		b = alloc(len(l.template))[:len(l.template)]
	} else {
		b = make([]byte, len(l.template))
	}
	copy(b, l.template)
	binary.BigEndian.PutUint64(b, uint64(off)) // the base offset is outside the CRC
	return replica.ReadResult{Records: b, HighWatermark: 1 << 62}, nil
}

// countStore is an in-memory Store that only counts writes: what is left
// is the registry's and the state machine's own cost.
type countStore struct{ writes atomic.Int64 }

func (s *countStore) Read(context.Context, share.Key, int32) (share.Snapshot, bool, error) {
	return share.Snapshot{}, false, nil
}

func (s *countStore) Write(context.Context, share.Key, share.Update) error {
	s.writes.Add(1)
	return nil
}

// BenchmarkShareAcquireAck is the broker-side cost of a job through the
// share-partition registry: acquire a batch of per records for a member
// (what a ShareFetch does) and accept them all in one range (what its
// piggybacked acks do), with an in-memory store; b.N counts records.
func BenchmarkShareAcquireAck(b *testing.B) {
	for _, per := range []int{1, 100, 500} {
		b.Run(fmt.Sprintf("records=%d", per), func(b *testing.B) {
			st := &countStore{}
			pc := share.PartitionDefaults()
			r, err := New(Config{Partition: pc, Store: st, Logger: slog.New(slog.DiscardHandler),
				Settings: func(string) GroupSettings {
					return GroupSettings{Partition: pc, AutoOffsetReset: "earliest"}
				}})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			l := newBenchLog(per)
			k := share.Key{Group: "bench", TopicID: [16]byte{1}, Partition: 0}
			types := []share.AckType{share.AckAccept}
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += per {
				f, err := r.Acquire(k, "jobs", "worker", l, 1<<20, per, nil)
				if err != nil {
					b.Fatal(err)
				}
				for _, a := range f.Acquired {
					if err := r.Acknowledge(k, "worker", []share.Ack{{First: a.First, Last: a.Last, Types: types}}); err != nil {
						b.Fatal(err)
					}
				}
				if len(f.Acquired) == 0 {
					b.Fatalf("nothing acquired at record %d", done)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(st.writes.Load())/float64(b.N), "writes/record")
		})
	}
}
