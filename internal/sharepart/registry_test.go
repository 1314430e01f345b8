package sharepart

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/share"
)

// batchAt builds a batch of n records at base offset base.
func batchAt(base int64, n int) []byte {
	recs := make([]batch.KV, n)
	for i := range recs {
		recs[i] = batch.KV{Value: []byte{byte(i)}}
	}
	b := batch.Build(recs, 0)
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	return b
}

func TestShareLogBatchesAndKeepAcquired(t *testing.T) {
	a, b, c := batchAt(0, 3), batchAt(3, 2), batchAt(5, 4)
	read := slices.Concat(a, b, c)
	got := logBatches(read, nil)
	want := []share.LogBatch{{First: 0, Last: 2}, {First: 3, Last: 4}, {First: 5, Last: 8}}
	if !slices.Equal(got, want) {
		t.Fatalf("logBatches = %v, want %v", got, want)
	}
	// A truncated trailing batch is left out.
	if got := logBatches(read[:len(read)-1], nil); len(got) != 2 {
		t.Fatalf("truncated read: %v", got)
	}
	kept := keepAcquired(slices.Clone(read), []share.AcquiredRange{{First: 1, Last: 1, DeliveryCount: 1}, {First: 6, Last: 6, DeliveryCount: 2}})
	if !slices.Equal(kept, slices.Concat(a, c)) {
		t.Fatalf("keepAcquired kept %d bytes, want batches 0 and 2 (%d bytes)", len(kept), len(a)+len(c))
	}
}

// txnBatchAt is batchAt written by producer pid in a transaction.
func txnBatchAt(base int64, n int, pid int64) []byte {
	b := batchAt(base, n)
	binary.BigEndian.PutUint16(b[21:], uint16(batch.AttrTransactional))
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	return b
}

// Markers are always skipped; under read_committed (aborted
// transactions given) so are the batches of an aborted transaction, and
// only those: the producer's batches before its transaction began or
// after its abort marker, another producer's, and non-transactional
// batches are delivered.
func TestShareLogBatchesSkipMarkersAndAborted(t *testing.T) {
	marker := func(base int64, pid int64, typ int16) []byte {
		b := batch.BuildControl(pid, 0, typ, 0, 0)
		binary.BigEndian.PutUint64(b[0:], uint64(base))
		return b
	}
	read := slices.Concat(
		txnBatchAt(0, 2, 7),                // 0-1: pid 7, committed by 2
		marker(2, 7, batch.ControlCommit),  // 2
		txnBatchAt(3, 2, 7),                // 3-4: pid 7, aborted by 7
		batchAt(5, 1),                      // 5: not transactional
		txnBatchAt(6, 1, 8),                // 6: pid 8, committed by 9
		marker(7, 7, batch.ControlAbort),   // 7
		txnBatchAt(8, 1, 7),                // 8: pid 7's next transaction, committed by 10
		marker(9, 8, batch.ControlCommit),  // 9
		marker(10, 7, batch.ControlCommit), // 10
	)
	aborted := []replica.AbortedTxn{{ProducerID: 7, FirstOffset: 3, LastOffset: 7}}
	skips := func(bs []share.LogBatch) []int64 {
		var out []int64
		for _, b := range bs {
			if b.Skip {
				out = append(out, b.First)
			}
		}
		return out
	}
	if got, want := skips(logBatches(read, nil)), []int64{2, 7, 9, 10}; !slices.Equal(got, want) {
		t.Errorf("read_uncommitted: skipped batches at %v, want the markers %v", got, want)
	}
	if got, want := skips(logBatches(read, aborted)), []int64{2, 3, 7, 9, 10}; !slices.Equal(got, want) {
		t.Errorf("read_committed: skipped batches at %v, want the markers and the aborted batch %v", got, want)
	}
}
