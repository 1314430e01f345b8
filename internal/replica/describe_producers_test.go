package replica

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

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
		{ProducerID: 5, Epoch: 2, LastSequence: 4, TxnStartOffset: -1, CoordinatorEpoch: -1},
		{ProducerID: 7, Epoch: 1, LastSequence: 2, TxnStartOffset: 7, CoordinatorEpoch: -1},
	}
	if got := strip(p.Producers()); !slices.Equal(got, want) {
		t.Fatalf("open transaction: %+v, want %+v", got, want)
	}

	markerDurable(t, p, 7, 1, batch.ControlCommit) // 10, coordinator epoch 0
	want[1].TxnStartOffset, want[1].CoordinatorEpoch = -1, 0
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

// The coordinator epoch of a producer's last marker (Kafka's
// ProducerStateEntry.coordinatorEpoch): reported by Producers, kept across
// a restart from the snapshot and one that rebuilds the state from the
// log (the marker's value), and a marker from an older coordinator is
// refused with ErrCoordinatorFenced while an equal or newer one, or one
// for a producer without a marker yet, is not.
func TestMarkerCoordinatorEpochKeptAndFenced(t *testing.T) {
	dir := t.TempDir()
	p, closeP := openPartitionAt(t, dir)
	appendDurable(t, p, txnBatch(7, 1, 0, 1, "t7")) // 0
	appendDurable(t, p, txnBatch(8, 0, 0, 1, "t8")) // 1
	coordEpochs := func(p *Partition) map[int64]int32 {
		m := map[int64]int32{}
		for _, pi := range p.Producers() {
			m[pi.ProducerID] = pi.CoordinatorEpoch
		}
		return m
	}
	if got := coordEpochs(p); got[7] != -1 || got[8] != -1 {
		t.Fatalf("before any marker: coordinator epochs %v, want -1", got)
	}
	marker := func(p *Partition, pid int64, epoch int16, coordinatorEpoch int32) error {
		t.Helper()
		res, err := p.AppendMarker(pid, epoch, batch.ControlCommit, coordinatorEpoch)
		if err != nil {
			return err
		}
		if err := p.WaitDurable(res.Durable, res.Gen, time.Now().Add(10*time.Second), true); err != nil {
			t.Fatalf("marker durable: %v", err)
		}
		return nil
	}
	if err := marker(p, 7, 1, 5); err != nil { // 2
		t.Fatal(err)
	}
	want := map[int64]int32{7: 5, 8: -1}
	if got := coordEpochs(p); !maps.Equal(got, want) {
		t.Fatalf("after a marker from coordinator epoch 5: %v, want %v", got, want)
	}
	closeP()
	p, closeP = openPartitionAt(t, dir)
	if got := coordEpochs(p); !maps.Equal(got, want) {
		t.Fatalf("after a restart from the snapshot: %v, want %v", got, want)
	}
	closeP()
	if err := os.Remove(filepath.Join(dir, "t-0", "producer-state.snapshot")); err != nil {
		t.Fatal(err)
	}
	p, _ = openPartitionAt(t, dir)
	if got := coordEpochs(p); !maps.Equal(got, want) {
		t.Fatalf("after rebuilding from the log: %v, want %v", got, want)
	}

	appendDurable(t, p, txnBatch(7, 1, 1, 1, "t7")) // 3
	if err := marker(p, 7, 1, 4); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("marker from coordinator epoch 4 after 5: %v, want ErrCoordinatorFenced", err)
	}
	if got := p.LastStableOffset(); got != 1 {
		t.Fatalf("LSO %d after the fenced marker, want 1 (producer 8's transaction)", got)
	}
	if err := marker(p, 8, 0, 0); err != nil { // 4: no marker of 8 yet
		t.Fatalf("first marker of producer 8 at coordinator epoch 0: %v", err)
	}
	if err := marker(p, 7, 1, 5); err != nil { // 5: same coordinator
		t.Fatalf("marker from the same coordinator epoch: %v", err)
	}
	if err := marker(p, 7, 1, 6); err != nil { // 6: a newer coordinator
		t.Fatalf("marker from a newer coordinator epoch: %v", err)
	}
	if got, want := coordEpochs(p), map[int64]int32{7: 6, 8: 0}; !maps.Equal(got, want) {
		t.Fatalf("coordinator epochs %v, want %v", got, want)
	}
}
