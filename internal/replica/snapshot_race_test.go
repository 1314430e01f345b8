package replica

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
)

// TestProducerSnapshotNeverAheadOfTheLog: the periodic producer snapshot
// must not be taken while a write round has taken staged batches but not
// written them: the state already reflects them, and the snapshot would
// stand for them at an offset the log does not reach. Here a deposed
// leader's ABORT marker is written after such a snapshot, then cut by the
// follower's truncation: the state rebuilt from the snapshot showed the
// transaction ended while the log holds it open, so the new leader's
// marker, replicated, got no aborted-transaction entry and read_committed
// readers of this replica would see the aborted records. (A crash, or a
// failed write, between the snapshot and the write loses the batches the
// same way.)
func TestProducerSnapshotNeverAheadOfTheLog(t *testing.T) {
	m, p, _ := openPartitionOf(t, nil, true, []int32{1, 2})
	if _, err := p.Append(txnBatch(7, 0, 0, 2, "a"), nil); err != nil { // 0-1
		t.Fatal(err)
	}
	m.flushAndSync()
	if _, err := p.AppendMarker(7, 0, batch.ControlAbort, 0); err != nil { // 2, staged
		t.Fatal(err)
	}
	m.takenHook = func(p *Partition) { p.snapshotProducers(false) } // the minute's snapshot, mid-write
	m.flushAndSync()
	m.takenHook = nil

	// Broker 2 leads at epoch 1 without the marker: this replica cuts it.
	mp := metadata.Partition{Index: 0, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	p.applyPartition(&mp)
	if err := p.truncateTo(2); err != nil {
		t.Fatal(err)
	}
	if p.LogEndOffset() != 2 {
		t.Fatalf("log end %d after the truncation, want 2", p.LogEndOffset())
	}
	// The new leader's ABORT marker, replicated at offset 2.
	mk := batch.BuildControl(7, 0, batch.ControlAbort, 1, time.Now().UnixMilli())
	binary.BigEndian.PutUint64(mk[0:], 2)
	binary.BigEndian.PutUint32(mk[12:], 1)
	if err := p.appendReplicated(mk, 3, 0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	want := []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 2}}
	if got := p.AbortedTransactions(0); !slices.Equal(got, want) {
		t.Fatalf("aborted transactions %+v, want %+v: the producer state rebuilt from the snapshot had the cut marker's effect", got, want)
	}
}
