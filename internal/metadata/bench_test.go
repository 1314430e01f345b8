package metadata

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkPropose measures one proposal through raft, the WAL (fsync) and
// apply. Sequential proposals pay one fsync each; parallel ones share
// fsyncs (the loop batches up to maxBatch proposals per Ready).
func BenchmarkPropose(b *testing.B) {
	rec := func(i int64) Record {
		return Record{SetBrokerConfigs: &SetBrokerConfigs{Set: map[string]string{"k": fmt.Sprint(i)}}}
	}
	b.Run("sequential", func(b *testing.B) {
		cfg := testConfig(b.TempDir())
		c := open(b, cfg)
		ctx := ctx(b)
		b.ReportAllocs()
		var i int64
		for b.Loop() {
			i++
			if err := c.Propose(ctx, rec(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		cfg := testConfig(b.TempDir())
		c := open(b, cfg)
		ctx := ctx(b)
		b.ReportAllocs()
		b.SetParallelism(16)
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := c.Propose(ctx, rec(n.Add(1))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
