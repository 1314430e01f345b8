package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// benchTopic starts a broker with a one-partition topic holding n records
// of 100 bytes and returns a client and the topic's id.
func benchTopic(b *testing.B, n int) (*kgo.Client, [16]byte) {
	b.Helper()
	node := tc.Start(b)
	tc.CreateTopic(b, node.Addr(), "bench", 1, nil)
	cl := tc.Client(b, node.Addr(), kgo.ProducerLinger(0))
	ctx := context.Background()
	md := kmsg.NewPtrMetadataRequest()
	mdt := kmsg.NewMetadataRequestTopic()
	mdt.Topic = kmsg.StringPtr("bench")
	md.Topics = append(md.Topics, mdt)
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		b.Fatalf("metadata: %v", err)
	}
	value := make([]byte, 100)
	for i := 0; i < n; i += 1000 {
		var recs []*kgo.Record
		for j := i; j < min(n, i+1000); j++ {
			recs = append(recs, &kgo.Record{Topic: "bench", Value: value})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	return cl, mresp.Topics[0].TopicID
}

// fetchReq is a Fetch of partition 0 of the topic from offset, long
// polling up to wait for minBytes.
func fetchReq(topicID [16]byte, offset int64, wait time.Duration, minBytes int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.ReplicaID, r.MaxWaitMillis, r.MinBytes, r.MaxBytes = -1, int32(wait/time.Millisecond), minBytes, 1<<20
	r.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

// BenchmarkFetch is a Fetch through a broker on loopback, the long poll
// included: ready, MinBytes are there at the first read (a consumer that
// is behind); timeout, nothing comes and the fetch answers after its 1 ms
// MaxWait (a consumer at the end of an idle partition); wake, the fetch
// waits at the log end until a produce of one record wakes it.
func BenchmarkFetch(b *testing.B) {
	b.Run("ready", func(b *testing.B) {
		const n = 10000
		cl, id := benchTopic(b, n)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			resp, err := fetchReq(id, int64(i*10%n), 500*time.Millisecond, 1).RequestWith(ctx, cl)
			if err != nil {
				b.Fatal(err)
			}
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				b.Fatalf("fetch: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
			}
		}
	})
	b.Run("timeout", func(b *testing.B) {
		cl, id := benchTopic(b, 1)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			resp, err := fetchReq(id, 1, time.Millisecond, 1).RequestWith(ctx, cl)
			if err != nil {
				b.Fatal(err)
			}
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
				b.Fatalf("fetch: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
			}
		}
	})
	b.Run("wake", func(b *testing.B) {
		cl, id := benchTopic(b, 0)
		ctx := context.Background()
		value := make([]byte, 100)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			type result struct {
				resp *kmsg.FetchResponse
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := fetchReq(id, int64(i), 10*time.Second, 1).RequestWith(ctx, cl)
				done <- result{resp, err}
			}()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "bench", Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				b.Fatal(r.err)
			}
			if p := r.resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				b.Fatalf("fetch: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
			}
		}
	})
}

// BenchmarkShareFetch is a ShareFetch through a broker on loopback, in
// one share session: acquire, 10 records acquired at the first read, the
// previous 10 accepted by piggybacked acknowledgements; timeout, nothing
// to acquire and the fetch answers after its 1 ms MaxWait.
func BenchmarkShareFetch(b *testing.B) {
	const per = 10
	session := func(b *testing.B, records int) func(wait time.Duration, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
		cl, id := benchTopic(b, records)
		ctx := context.Background()
		poll.Until(b, 30*time.Second, func() error {
			hb := kmsg.NewPtrShareGroupHeartbeatRequest()
			hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch = 1, "g", "m1", 0
			hb.SubscribedTopicNames = []string{"bench"}
			hr, err := hb.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(hr.ErrorCode)
		})
		// share.auto.offset.reset=earliest, so the preloaded records are acquired.
		ac := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("earliest")
		res.Configs = append(res.Configs, c)
		ac.Resources = append(ac.Resources, res)
		if ar, err := ac.RequestWith(ctx, cl); err != nil || ar.Resources[0].ErrorCode != 0 {
			b.Fatalf("share.auto.offset.reset: %v", err)
		}
		epoch := int32(0)
		return func(wait time.Duration, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
			r := kmsg.NewPtrShareFetchRequest()
			r.Version, r.GroupID, r.MemberID, r.ShareSessionEpoch = 1, kmsg.StringPtr("g"), kmsg.StringPtr("m1"), epoch
			r.MaxWaitMillis, r.MinBytes, r.MaxBytes, r.MaxRecords, r.BatchSize = int32(wait/time.Millisecond), 1, 1<<20, per, per
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = id
			rp := kmsg.NewShareFetchRequestTopicPartition()
			rp.AcknowledgementBatches = acks
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			resp, err := r.RequestWith(ctx, cl)
			if err != nil {
				b.Fatal(err)
			}
			if resp.ErrorCode != 0 {
				b.Fatalf("share fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
			epoch++
			return resp
		}
	}
	b.Run("acquire", func(b *testing.B) {
		fetch := session(b, (b.N+1)*per)
		var acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
		for _, a := range fetch(0).Topics[0].Partitions[0].AcquiredRecords { // opens the session
			acks = append(acks, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, AcknowledgeTypes: []int8{1}})
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			resp := fetch(500*time.Millisecond, acks...)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 || len(p.AcquiredRecords) == 0 {
				b.Fatalf("share fetch %d: %v, ack %v, %d acquired", i, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(p.AcknowledgeErrorCode), len(p.AcquiredRecords))
			}
			acks = acks[:0]
			for _, a := range p.AcquiredRecords {
				acks = append(acks, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, AcknowledgeTypes: []int8{1}})
			}
		}
	})
	b.Run("timeout", func(b *testing.B) {
		fetch := session(b, 0)
		fetch(0) // opens the session
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			resp := fetch(time.Millisecond)
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.AcquiredRecords) != 0 {
				b.Fatalf("share fetch: %v, %d acquired", kerr.ErrorForCode(p.ErrorCode), len(p.AcquiredRecords))
			}
		}
	})
}
