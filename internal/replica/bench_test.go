package replica

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkGroupCommit measures durable appends (acks after fsync) from
// several producers at once: each op is one 16-record, 1 KiB-per-record
// batch appended and waited on until its fsync. fsyncs/op shows how many
// producers one fsync serves.
func BenchmarkGroupCommit(b *testing.B) {
	for _, producers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			m, p, _ := openPartition(b, nil, true)
			ctx, cancel := context.WithCancel(context.Background())
			m.Start(ctx)
			defer cancel()
			proto := makeBatch(-1, -1, -1, 16, "bench", make([]byte, 1000)...)
			b.SetBytes(int64(len(proto)))
			b.ResetTimer()
			start := m.Metrics.Fsyncs.Load()
			var wg sync.WaitGroup
			per := b.N / producers
			for w := 0; w < producers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						data := append([]byte(nil), proto...)
						res, err := p.Append(data, nil)
						if err != nil {
							b.Error(err)
							return
						}
						if err := p.WaitDurable(res.Durable, res.Gen, time.Now().Add(time.Minute), true); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if n := per * producers; n > 0 {
				b.ReportMetric(float64(m.Metrics.Fsyncs.Load()-start)/float64(n), "fsyncs/op")
			}
		})
	}
}
