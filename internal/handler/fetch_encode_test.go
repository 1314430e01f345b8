package handler

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The writev encoding of Fetch responses is byte for byte kmsg's, for every
// version served and for responses with and without large record sets,
// aborted transactions and partition tags.
func TestFetchVectorEncodingMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for ver := int16(4); ver <= 18; ver++ {
		for iter := 0; iter < 50; iter++ {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = ver
			resp.ThrottleMillis = rng.Int31()
			resp.ErrorCode = int16(rng.Intn(3))
			resp.SessionID = rng.Int31()
			for ti := rng.Intn(4); ti > 0; ti-- {
				tp := kmsg.NewFetchResponseTopic()
				tp.Topic = string(bytes.Repeat([]byte{'t'}, rng.Intn(20)))
				rng.Read(tp.TopicID[:])
				for pi := rng.Intn(4); pi > 0; pi-- {
					p := kmsg.NewFetchResponseTopicPartition()
					p.Partition, p.ErrorCode = rng.Int31(), int16(rng.Intn(5))
					p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rng.Int63(), rng.Int63(), rng.Int63()
					p.PreferredReadReplica = -1
					switch rng.Intn(4) {
					case 0:
						p.RecordBatches = nil
					case 1:
						p.RecordBatches = []byte{}
					case 2:
						p.RecordBatches = make([]byte, rng.Intn(100))
					default:
						p.RecordBatches = make([]byte, minVectorBytes+rng.Intn(70000))
					}
					rng.Read(p.RecordBatches)
					if rng.Intn(3) == 0 {
						p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: 9}}
					}
					if rng.Intn(4) == 0 {
						p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 3, 44
					}
					if rng.Intn(4) == 0 {
						p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 2, 5
					}
					if rng.Intn(4) == 0 {
						p.SnapshotID.EndOffset, p.SnapshotID.Epoch = 10, 1
					}
					tp.Partitions = append(tp.Partitions, p)
				}
				resp.Topics = append(resp.Topics, tp)
			}
			hdr := []byte{0, 0, 0, 0, 1, 2, 3, 4}
			want := resp.AppendTo(append([]byte(nil), hdr...))
			vec, ok := fetchResponse{resp}.AppendVector(append([]byte(nil), hdr...))
			if !ok {
				t.Fatalf("v%d: vector encoding refused", ver)
			}
			var got []byte
			for _, b := range vec {
				got = append(got, b...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("v%d iteration %d: vector encoding differs from kmsg (%d vs %d bytes)", ver, iter, len(got), len(want))
			}
		}
	}
}
