package tests

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// Records with the same key land in one partition and are read back in the
// order they were written, with keys, values and headers intact.
func TestKeyedProduceConsumeKeepsPerPartitionOrder(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "orders", 3, nil)
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("orders"))
	const perKey, keys = 40, 10
	var recs []*kgo.Record
	for i := 0; i < perKey; i++ {
		for k := 0; k < keys; k++ {
			recs = append(recs, &kgo.Record{
				Key:     []byte(fmt.Sprintf("order:%d", k)),
				Value:   []byte(fmt.Sprintf("event-%d", i)),
				Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte(fmt.Sprintf("t-%d-%d", k, i))}},
			})
		}
	}
	produceSync(t, cl, recs...)

	got := consumeN(t, n.Addr(), "orders", perKey*keys)
	partOf := map[string]int32{}
	next := map[string]int{}
	lastOff := map[int32]int64{}
	for _, r := range got {
		k := string(r.Key)
		if p, ok := partOf[k]; ok && p != r.Partition {
			t.Fatalf("key %s in partitions %d and %d", k, p, r.Partition)
		}
		partOf[k] = r.Partition
		if want := fmt.Sprintf("event-%d", next[k]); string(r.Value) != want {
			t.Fatalf("key %s: got %s, want %s (order broken)", k, r.Value, want)
		}
		if len(r.Headers) != 1 || r.Headers[0].Key != "trace" || string(r.Headers[0].Value) != fmt.Sprintf("t-%s-%d", k[len("order:"):], next[k]) {
			t.Fatalf("key %s: headers %v", k, r.Headers)
		}
		next[k]++
		if lo, ok := lastOff[r.Partition]; ok && r.Offset != lo+1 {
			t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, lo)
		}
		lastOff[r.Partition] = r.Offset
	}
	if len(partOf) != keys {
		t.Fatalf("saw %d keys, want %d", len(partOf), keys)
	}
}

// Every compression codec a producer may use is stored and served back.
func TestEveryCodecRoundTrips(t *testing.T) {
	n := tc.Start(t)
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			tc.CreateTopic(t, n.Addr(), topic, 1, nil)
			cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec))
			var recs []*kgo.Record
			for i := 0; i < 200; i++ {
				recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 100+i)})
			}
			produceSync(t, cl, recs...)
			got := consumeN(t, n.Addr(), topic, len(recs))
			for i, r := range got {
				if !bytes.Equal(r.Value, recs[i].Value) || r.Offset != int64(i) {
					t.Fatalf("record %d: offset %d, value len %d want %d", i, r.Offset, len(r.Value), len(recs[i].Value))
				}
			}
		})
	}
}

// A batch larger than the topic's max.message.bytes is refused with
// MESSAGE_TOO_LARGE, and smaller ones still go through.
func TestOversizedRecordRefused(t *testing.T) {
	n := tc.Start(t)
	limit := "2048"
	tc.CreateTopic(t, n.Addr(), "small", 1, map[string]*string{"max.message.bytes": &limit})
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("small"), kgo.ProducerBatchMaxBytes(1<<20))
	big := make([]byte, 4096)
	rand.Read(big) // incompressible, whatever codec the client picks
	err := cl.ProduceSync(ctxT(t, 30e9), &kgo.Record{Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("got %v, want MESSAGE_TOO_LARGE", err)
	}
	produceSync(t, cl, &kgo.Record{Value: make([]byte, 512)})
}

// Producing to a partition that does not exist fails cleanly.
func TestProduceToMissingPartition(t *testing.T) {
	n := tc.Start(t, tc.With("auto.create.topics.enable", "false"))
	tc.CreateTopic(t, n.Addr(), "one", 1, nil)
	cl := tc.Client(t, n.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(2),
		kgo.RecordDeliveryTimeout(3e9))
	err := cl.ProduceSync(ctxT(t, 30e9), &kgo.Record{Topic: "one", Partition: 5, Value: []byte("x")}).FirstErr()
	if err == nil {
		t.Fatal("produce to partition 5 of a 1-partition topic succeeded")
	}
	err = cl.ProduceSync(ctxT(t, 30e9), &kgo.Record{Topic: "missing", Partition: 0, Value: []byte("x")}).FirstErr()
	if err == nil {
		t.Fatal("produce to a missing topic with auto-create off succeeded")
	}
}
