package replica_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	"github.com/berthmq/berth/internal/replica"
)

// txnBatchOf is a transactional batch of n records from producer pid.
func txnBatchOf(pid int64, seq int32, n int) []byte {
	var recs []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(fmt.Sprint("v", i))}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{Magic: 2, Attributes: 0x10, LastOffsetDelta: int32(n - 1), NumRecords: int32(n),
		ProducerID: pid, FirstSequence: seq, FirstTimestamp: now, MaxTimestamp: now, Records: recs}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func peerProduce(t *testing.T, addr, topic string, data []byte) {
	t.Helper()
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
		t.Fatal(err)
	}
	if ec := kr.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; ec != 0 {
		t.Fatalf("produce: error %d", ec)
	}
}

// peerMarker sends a marker of coordinator epoch coordinatorEpoch for pid
// to topic-0 at addr and returns the partition's error code.
func peerMarker(t *testing.T, addr, topic string, pid int64, commit bool, coordinatorEpoch int32) int16 {
	t.Helper()
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
		t.Fatal(err)
	}
	return kr.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
}

// Markers are replicated like any batch: every replica ends the
// transaction, keeps the aborted list and computes the same LSO, so a new
// leader serves read_committed readers as the old one did. Followers also
// keep each producer's coordinator epoch from the marker's value, so a new
// leader refuses a deposed coordinator's marker as the old one would.
func TestReplicationTransactionMarkers(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("txn", [][]int32{{0, 1, 2}}, nil)
	leader := c.brokers[0].addr
	poll.Until(t, 10*time.Second, func() error {
		if p := c.brokers[0].mgr.Get("txn", 0); p == nil || !p.IsLeader() {
			return fmt.Errorf("no leader yet")
		}
		return nil
	})
	peerProduce(t, leader, "txn", txnBatchOf(100, 0, 3))            // 0-2
	if ec := peerMarker(t, leader, "txn", 100, false, 3); ec != 0 { // 3
		t.Fatalf("WriteTxnMarkers: error %d", ec)
	}
	peerProduce(t, leader, "txn", txnBatchOf(101, 0, 2)) // 4-5, left open
	wantAborted := []replica.AbortedTxn{{ProducerID: 100, FirstOffset: 0, LastOffset: 3}}
	wantCoordEpoch := map[int64]int32{100: 3, 101: -1} // -1: no marker yet
	check := func(b int, lso, hw int64) error {
		p := c.brokers[b].mgr.Get("txn", 0)
		if p == nil {
			return fmt.Errorf("broker %d: no partition", b)
		}
		if got, gotHW := p.LastStableOffset(), p.HighWatermark(); got != lso || gotHW != hw {
			return fmt.Errorf("broker %d: LSO %d HW %d, want %d and %d", b, got, gotHW, lso, hw)
		}
		if got := p.AbortedTransactions(0); !slices.Equal(got, wantAborted) {
			return fmt.Errorf("broker %d: aborted %+v", b, got)
		}
		for _, pi := range p.Producers() {
			if want := wantCoordEpoch[pi.ProducerID]; pi.CoordinatorEpoch != want {
				return fmt.Errorf("broker %d: producer %d coordinator epoch %d, want %d", b, pi.ProducerID, pi.CoordinatorEpoch, want)
			}
		}
		return nil
	}
	poll.Until(t, 10*time.Second, func() error {
		for b := range c.brokers {
			if err := check(b, 4, 6); err != nil {
				return err
			}
		}
		return nil
	})

	// Broker 1 takes over with producer 101's transaction still open and
	// ends it.
	c.changeLeader("txn", 1, []int32{0, 1, 2})
	poll.Until(t, 10*time.Second, func() error {
		if p := c.brokers[1].mgr.Get("txn", 0); !p.IsLeader() {
			return fmt.Errorf("broker 1 not leading yet")
		}
		return check(1, 4, 6)
	})
	if ec := peerMarker(t, c.brokers[1].addr, "txn", 100, false, 2); ec != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("marker from coordinator epoch 2 after one from 3: error %d, want TRANSACTION_COORDINATOR_FENCED", ec)
	}
	if ec := peerMarker(t, c.brokers[1].addr, "txn", 101, true, 0); ec != 0 { // 6
		t.Fatalf("WriteTxnMarkers: error %d", ec)
	}
	wantCoordEpoch[101] = 0
	poll.Until(t, 10*time.Second, func() error {
		for b := range c.brokers {
			if err := check(b, 7, 7); err != nil {
				return err
			}
		}
		return nil
	})
}
