package tests

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// makeBatch builds a v2 record batch of n uncompressed records.
func makeBatch(pid int64, epoch int16, seq int32, n int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Value: []byte("v")}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the body after a one-byte zero length
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: now, MaxTimestamp: now + int64(n-1),
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(n), Records: recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

func rawProduce(t *testing.T, cl *kgo.Client, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	td, err := kadm.NewClient(cl).ListTopics(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	rt.TopicID = td[topic].ID // Produce v13+ names topics by id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

func initPID(t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// A retried batch of an idempotent producer is answered with its original
// offset and not written twice; gaps and stale epochs are refused; and the
// state survives a restart.
func TestIdempotentProducerDedupAndFencing(t *testing.T) {
	dir := t.TempDir()
	n := tc.StartIn(t, dir)
	tc.CreateTopic(t, n.Addr(), "idem", 1, nil)
	cl := tc.Client(t, n.Addr())
	pid, epoch := initPID(t, cl)
	pid2, _ := initPID(t, cl)
	if pid2 == pid {
		t.Fatalf("two InitProducerId calls gave the same id %d", pid)
	}

	first := rawProduce(t, cl, "idem", makeBatch(pid, epoch, 0, 3))
	if first.ErrorCode != 0 || first.BaseOffset != 0 {
		t.Fatalf("first batch: %v offset %d", kerr.ErrorForCode(first.ErrorCode), first.BaseOffset)
	}
	second := rawProduce(t, cl, "idem", makeBatch(pid, epoch, 3, 2))
	if second.ErrorCode != 0 || second.BaseOffset != 3 {
		t.Fatalf("second batch: %v offset %d", kerr.ErrorForCode(second.ErrorCode), second.BaseOffset)
	}
	dup := rawProduce(t, cl, "idem", makeBatch(pid, epoch, 0, 3))
	if dup.ErrorCode != 0 || dup.BaseOffset != 0 {
		t.Fatalf("duplicate: %v offset %d, want no error and the original offset 0", kerr.ErrorForCode(dup.ErrorCode), dup.BaseOffset)
	}
	gap := rawProduce(t, cl, "idem", makeBatch(pid, epoch, 9, 1))
	if gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(gap.ErrorCode))
	}
	bumped := rawProduce(t, cl, "idem", makeBatch(pid, epoch+1, 0, 1))
	if bumped.ErrorCode != 0 || bumped.BaseOffset != 5 {
		t.Fatalf("new epoch: %v offset %d", kerr.ErrorForCode(bumped.ErrorCode), bumped.BaseOffset)
	}
	stale := rawProduce(t, cl, "idem", makeBatch(pid, epoch, 5, 1))
	if stale.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stale epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(stale.ErrorCode))
	}

	// Restart: the duplicate is still recognised, the log unchanged.
	n.Close()
	n = tc.StartIn(t, dir)
	cl = tc.Client(t, n.Addr())
	again := rawProduce(t, cl, "idem", makeBatch(pid, epoch+1, 0, 1))
	if again.ErrorCode != 0 || again.BaseOffset != 5 {
		t.Fatalf("duplicate after restart: %v offset %d, want offset 5", kerr.ErrorForCode(again.ErrorCode), again.BaseOffset)
	}
	next := rawProduce(t, cl, "idem", makeBatch(pid, epoch+1, 1, 1))
	if next.ErrorCode != 0 || next.BaseOffset != 6 {
		t.Fatalf("next after restart: %v offset %d, want 6", kerr.ErrorForCode(next.ErrorCode), next.BaseOffset)
	}
	pid3, _ := initPID(t, cl)
	if pid3 == pid || pid3 == pid2 {
		t.Fatalf("producer id %d reused after restart", pid3)
	}
}

// Corrupt batches get CORRUPT_MESSAGE and are not stored.
func TestCorruptBatchRefused(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "crc", 1, nil)
	cl := tc.Client(t, n.Addr())
	b := makeBatch(-1, -1, -1, 2)
	b[len(b)-1] ^= 0xff
	if r := rawProduce(t, cl, "crc", b); r.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("flipped byte: %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(r.ErrorCode))
	}
	b = makeBatch(-1, -1, -1, 2)
	b[16] = 1 // magic v1
	if r := rawProduce(t, cl, "crc", b); r.ErrorCode != kerr.UnsupportedForMessageFormat.Code && r.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("magic 1: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := rawProduce(t, cl, "crc", makeBatch(-1, -1, -1, 2)[:40]); r.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("truncated: %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(r.ErrorCode))
	}
	good := rawProduce(t, cl, "crc", makeBatch(-1, -1, -1, 2))
	if good.ErrorCode != 0 || good.BaseOffset != 0 {
		t.Fatalf("good batch after bad ones: %v offset %d", kerr.ErrorForCode(good.ErrorCode), good.BaseOffset)
	}
}
