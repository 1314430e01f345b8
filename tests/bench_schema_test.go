package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// BenchmarkSchemaRegistryByID is GET /schemas/ids/{id} against a node's
// HTTP listener (what every deserializer asks once per id), from
// parallel keep-alive clients on loopback; it reports requests/s.
// subjects sets how many subjects the registry holds (lookups stay flat).
func BenchmarkSchemaRegistryByID(b *testing.B) {
	for _, subjects := range []int{10, 10000} {
		b.Run(fmt.Sprintf("subjects=%d", subjects), func(b *testing.B) {
			n := tc.Start(b)
			url := "http://" + n.HTTPAddr()
			reg, err := sr.NewClient(sr.URLs(url))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var ids []int
			for i := range subjects {
				s, err := reg.CreateSchema(ctx, fmt.Sprintf("s-%d-value", i),
					sr.Schema{Schema: fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":"f","type":"long"}]}`, i)})
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, s.ID)
			}
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			cl := &http.Client{Transport: tr}
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					resp, err := cl.Get(fmt.Sprintf("%s/schemas/ids/%d", url, ids[i%len(ids)]))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
					i += 7
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}
