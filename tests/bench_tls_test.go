package tests

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509/pkix"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/testcluster"
)

// BenchmarkTLSThroughput measures one producer (1 KiB random records,
// uncompressed, acks=all, kgo's default batching) and one consumer on the same broker through
// its PLAINTEXT and its SSL listener, for the TLS/plaintext ratio of
// docs/benchmarks.md:
//
//	go test ./tests -run x -bench TLSThroughput -benchtime 100000x -count 3
func BenchmarkTLSThroughput(b *testing.B) {
	ca := testcluster.NewCA(b, "bench-ca")
	srv := ca.Issue(b, pkix.Name{CommonName: "broker-0"}, 10)
	n := testcluster.Start(b,
		testcluster.With("listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"),
		testcluster.With("ssl.keystore.location", srv.Keystore),
	)
	tc := &tls.Config{RootCAs: ca.Pool()}
	value := make([]byte, 1024) // random, sent uncompressed: every byte crosses TLS
	rand.Read(value)
	for _, l := range []struct {
		name string
		opts []kgo.Opt
	}{{"PLAINTEXT", nil}, {"SSL", []kgo.Opt{kgo.DialTLSConfig(tc)}}} {
		topic := "bench-tls-" + l.name
		addr := n.ListenerAddr(l.name)
		b.Run("produce/"+l.name, func(b *testing.B) {
			cl := testcluster.Client(b, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
				kgo.ProducerBatchCompression(kgo.NoCompression())}, l.opts...)...)
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			var wg sync.WaitGroup
			var once sync.Once
			for range b.N {
				wg.Add(1)
				cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						once.Do(func() { b.Error(err) })
					}
					wg.Done()
				})
			}
			wg.Wait()
		})
		b.Run("consume/"+l.name, func(b *testing.B) {
			cl := testcluster.Client(b, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, l.opts...)...)
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for got := 0; got < b.N; {
				fs := cl.PollFetches(context.Background())
				if err := fs.Err(); err != nil {
					b.Fatal(err)
				}
				got += fs.NumRecords()
			}
		})
	}
}
