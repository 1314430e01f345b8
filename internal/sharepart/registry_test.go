package sharepart

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/berthmq/berth/internal/batch"
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
	got := logBatches(read)
	want := []share.LogBatch{{First: 0, Last: 2}, {First: 3, Last: 4}, {First: 5, Last: 8}}
	if !slices.Equal(got, want) {
		t.Fatalf("logBatches = %v, want %v", got, want)
	}
	// A truncated trailing batch is left out.
	if got := logBatches(read[:len(read)-1]); len(got) != 2 {
		t.Fatalf("truncated read: %v", got)
	}
	kept := keepAcquired(slices.Clone(read), []share.AcquiredRange{{First: 1, Last: 1, DeliveryCount: 1}, {First: 6, Last: 6, DeliveryCount: 2}})
	if !slices.Equal(kept, slices.Concat(a, c)) {
		t.Fatalf("keepAcquired kept %d bytes, want batches 0 and 2 (%d bytes)", len(kept), len(a)+len(c))
	}
}
