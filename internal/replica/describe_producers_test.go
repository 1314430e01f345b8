package replica

import (
	"slices"
	"testing"

	"github.com/berthmq/berth/internal/batch"
)

// Producers reports each producer's epoch, last sequence and open
// transaction, and the same after a restart that rebuilds the state.
func TestProducersDescribesIdempotentAndTransactional(t *testing.T) {
	dir := t.TempDir()
	p, closeP := openPartitionAt(t, dir)
	appendDurable(t, p, makeBatch(-1, 0, 0, 2, "plain")) // 0-1: no producer
	appendDurable(t, p, makeBatch(5, 2, 0, 3, "idem"))   // 2-4
	appendDurable(t, p, makeBatch(5, 2, 3, 2, "idem"))   // 5-6
	appendDurable(t, p, txnBatch(7, 1, 0, 2, "t7"))      // 7-8
	appendDurable(t, p, txnBatch(7, 1, 2, 1, "t7"))      // 9

	strip := func(ps []ProducerInfo) []ProducerInfo {
		for i := range ps {
			if ps[i].LastTimestamp <= 0 {
				t.Errorf("producer %d: last timestamp %d", ps[i].ProducerID, ps[i].LastTimestamp)
			}
			ps[i].LastTimestamp = 0
		}
		return ps
	}
	want := []ProducerInfo{
		{ProducerID: 5, Epoch: 2, LastSequence: 4, TxnStartOffset: -1},
		{ProducerID: 7, Epoch: 1, LastSequence: 2, TxnStartOffset: 7},
	}
	if got := strip(p.Producers()); !slices.Equal(got, want) {
		t.Fatalf("open transaction: %+v, want %+v", got, want)
	}

	markerDurable(t, p, 7, 1, batch.ControlCommit) // 10
	want[1].TxnStartOffset = -1
	if got := strip(p.Producers()); !slices.Equal(got, want) {
		t.Fatalf("after commit: %+v, want %+v", got, want)
	}

	// A new open transaction survives a restart (snapshot) with its start.
	appendDurable(t, p, txnBatch(7, 1, 3, 1, "t7")) // 11
	want[1].LastSequence, want[1].TxnStartOffset = 3, 11
	closeP()
	p, _ = openPartitionAt(t, dir)
	if got := strip(p.Producers()); !slices.Equal(got, want) {
		t.Fatalf("after restart: %+v, want %+v", got, want)
	}
}
