package replica_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	"github.com/berthmq/berth/internal/replica"
)

// A leader stages what it appends (producer state updated at once, the
// log written by the next write round). Demoted before that round, it
// drops the staged batches; these tests hold broker 0's write round
// (SetFlushHook) across its demotion, so that the demotion always finds
// something staged.

// holdFlushes makes broker b's flusher wait before writing topic's
// partition until the returned release is called; held receives once a
// round waits.
func holdFlushes(t *testing.T, b *testBroker, topic string) (held <-chan struct{}, release func()) {
	t.Helper()
	h := make(chan struct{}, 1)
	rel := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(rel) }) }
	b.mgr.SetFlushHook(func(tp string, _ int32) {
		if tp != topic {
			return
		}
		select {
		case h <- struct{}{}:
		default:
		}
		<-rel
	})
	t.Cleanup(release)
	return h, release
}

// awaitLeader waits until broker id leads topic-0 in its own view and
// the others follow.
func (c *testCluster) awaitLeader(topic string, id int32) {
	c.t.Helper()
	poll.Until(c.t, 10*time.Second, func() error {
		for _, b := range c.brokers {
			p := b.mgr.Get(topic, 0)
			if p == nil {
				return fmt.Errorf("broker %d: no partition", b.id)
			}
			if p.IsLeader() != (b.id == id) {
				return fmt.Errorf("broker %d: leading %v, want broker %d to lead", b.id, p.IsLeader(), id)
			}
		}
		return nil
	})
}

// batchOf is a batch of one record with the given value from producer pid
// (idempotent; transactional when txn is set), sequence seq.
func batchOf(pid int64, seq int32, txn bool, value string) []byte {
	r := kmsg.Record{Value: []byte(value)}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{Magic: 2, NumRecords: 1, ProducerID: pid, FirstSequence: seq,
		FirstTimestamp: now, MaxTimestamp: now, Records: r.AppendTo(nil)}
	if txn {
		rb.Attributes = 0x10
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceRaw sends one acks=all Produce of data to topic-0 at addr and
// returns the partition's error code and base offset (safe off the test
// goroutine).
func produceRaw(addr, topic string, data []byte) (code int16, base int64, err error) {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = data
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kr, err := replica.PeerRequest(ctx, addr, req)
	if err != nil {
		return 0, 0, err
	}
	sp := kr.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	return sp.ErrorCode, sp.BaseOffset, nil
}

// markerRaw is peerMarker, safe off the test goroutine.
func markerRaw(addr, topic string, pid int64, commit bool, coordinatorEpoch int32) (int16, error) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.Committed, m.CoordinatorEpoch = pid, commit, coordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kr, err := replica.PeerRequest(ctx, addr, req)
	if err != nil {
		return 0, err
	}
	return kr.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode, nil
}

// readTo reads topic-0 from the start at an isolation level until the
// record with value last, and returns the values read.
func readTo(t *testing.T, seeds []string, topic string, level kgo.IsolationLevel, last string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for !slices.Contains(got, last) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %q, never %q", got, last)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestDemotedLeaderForgetsItsUnwrittenMarker: a transaction coordinator's
// ABORT marker reaches a leader that is deposed before its write round
// writes the marker (in the chaos test: a marker sent while the leader
// was paused, handled the moment it resumed, before the new metadata).
// The demotion drops the staged marker, so the replica's producer state
// must again show the transaction open, as its log does: otherwise the
// new leader's ABORT marker, replicated to it, finds no open transaction
// and leaves no aborted-transaction entry, and once this replica leads
// again read_committed readers see the aborted records (seen in
// TestTxnChaosFailover, seed 1796183371282024862: p2-t67-r0 at faults/2
// offset 313).
func TestDemotedLeaderForgetsItsUnwrittenMarker(t *testing.T) {
	c := startCluster(t, 3)
	const topic = "txn"
	c.createTopic(topic, [][]int32{{0, 1, 2}}, nil)
	c.awaitLeader(topic, 0)
	b0, b1 := c.brokers[0], c.brokers[1]
	peerProduce(t, b0.addr, topic, txnBatchOf(100, 0, 3)) // 0-2, on every replica

	held, release := holdFlushes(t, b0, topic)
	type answer struct {
		code int16
		err  error
	}
	first := make(chan answer, 1)
	go func() {
		code, err := markerRaw(b0.addr, topic, 100, false, 0)
		first <- answer{code, err}
	}()
	select {
	case <-held: // the marker is staged, its write round waits
	case <-time.After(10 * time.Second):
		t.Fatal("the marker's write round never started")
	}
	c.changeLeader(topic, 1, []int32{0, 1, 2})
	c.awaitLeader(topic, 1)
	release()
	if a := <-first; a.err != nil || a.code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("marker at the deposed leader: code %d, err %v; want NOT_LEADER_OR_FOLLOWER", a.code, a.err)
	}

	// The coordinator sends the marker again, to the new leader.
	if ec := peerMarker(t, b1.addr, topic, 100, false, 0); ec != 0 { // 3
		t.Fatalf("marker at the new leader: error %d", ec)
	}
	want := []replica.AbortedTxn{{ProducerID: 100, FirstOffset: 0, LastOffset: 3}}
	poll.Until(t, 10*time.Second, func() error {
		p := b0.mgr.Get(topic, 0)
		if hw := p.HighWatermark(); hw != 4 {
			return fmt.Errorf("broker 0: high watermark %d, want 4", hw)
		}
		if got := p.AbortedTransactions(0); !slices.Equal(got, want) {
			return fmt.Errorf("broker 0 (the deposed leader): aborted transactions %+v, want %+v", got, want)
		}
		return nil
	})

	// Broker 0 leads again: read_committed readers see no aborted record.
	c.changeLeader(topic, 0, []int32{0, 1, 2})
	c.awaitLeader(topic, 0)
	peerProduce(t, b0.addr, topic, batchOf(-1, -1, false, "end"))
	if got := readTo(t, c.seeds(), topic, kgo.ReadCommitted(), "end"); !slices.Equal(got, []string{"end"}) {
		t.Fatalf("read_committed from broker 0 read %q, want only [end]: the aborted transaction's records are visible", got)
	}
}

// TestDemotedLeaderForgetsItsUnwrittenBatch: an idempotent batch staged
// on a leader deposed before its write round is dropped, so the replica
// must forget it in its producer state too: otherwise, leading again,
// it takes the producer's retry of that batch for a duplicate and
// acknowledges it at an offset that holds another record, and the
// acknowledged record is lost.
func TestDemotedLeaderForgetsItsUnwrittenBatch(t *testing.T) {
	c := startCluster(t, 3)
	const topic = "idem"
	c.createTopic(topic, [][]int32{{0, 1, 2}}, nil)
	c.awaitLeader(topic, 0)
	b0 := c.brokers[0]

	held, release := holdFlushes(t, b0, topic)
	type answer struct {
		code int16
		err  error
	}
	first := make(chan answer, 1)
	go func() {
		code, _, err := produceRaw(b0.addr, topic, batchOf(200, 0, false, "job"))
		first <- answer{code, err}
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the batch's write round never started")
	}
	c.changeLeader(topic, 1, []int32{0, 1, 2})
	c.awaitLeader(topic, 1)
	release()
	if a := <-first; a.err != nil || a.code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce at the deposed leader: code %d, err %v; want NOT_LEADER_OR_FOLLOWER", a.code, a.err)
	}

	// Broker 0 leads again before the producer retries; another record
	// comes first.
	c.changeLeader(topic, 0, []int32{0, 1, 2})
	c.awaitLeader(topic, 0)
	peerProduce(t, b0.addr, topic, batchOf(-1, -1, false, "other"))
	code, base, err := produceRaw(b0.addr, topic, batchOf(200, 0, false, "job"))
	if err != nil || code != 0 {
		t.Fatalf("the producer's retry: code %d, err %v", code, err)
	}
	peerProduce(t, b0.addr, topic, batchOf(-1, -1, false, "end"))
	got := readTo(t, c.seeds(), topic, kgo.ReadUncommitted(), "end")
	if !slices.Equal(got, []string{"other", "job", "end"}) {
		t.Fatalf("read %q, want [other job end]: the retry was acknowledged at offset %d but is not in the log", got, base)
	}
}
