package tests

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// A transactional (or idempotent) batch must be alone in its partition's
// record set, wherever it stands: one sent behind a plain batch is refused
// with INVALID_RECORD and nothing is appended. Before, only the first
// batch was looked at, so the second skipped the producer state and the
// transactional id's authorization and left a transaction open that held
// read_committed consumers at the last stable offset.
func TestProduceMixedBatchesRefused(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "mixed", 1, nil)
	cl := tc.Client(t, n.Addr())
	for name, set := range map[string][]byte{
		"plain then transactional": append(valuesBatch([]string{"plain-1"}), txnBatch(4242, 0, 0, "txn-1")...),
		"transactional then plain": append(txnBatch(4242, 0, 0, "txn-1"), valuesBatch([]string{"plain-1"})...),
	} {
		p := rawProduce(t, cl, "mixed", set)
		if p.ErrorCode != kerr.InvalidRecord.Code {
			t.Errorf("%s: error %v, want INVALID_RECORD", name, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if end := endOffset(t, tc.Admin(t, n.Addr()), "mixed"); end != 0 {
		t.Fatalf("refused record sets appended %d records", end)
	}
}

// Clients may not append to or delete records of internal topics (the
// coordinators' __consumer_offsets and the others, the audit trail), as
// in Kafka: INVALID_TOPIC_EXCEPTION, nothing written or deleted.
func TestInternalTopicsRefuseClientWrites(t *testing.T) {
	n := tc.Start(t)
	cl := tc.Client(t, n.Addr())
	adm := kadm.NewClient(cl)
	ctx := ctxT(t, 30*time.Second)
	// A group commit creates __consumer_offsets.
	tc.CreateTopic(t, n.Addr(), "plain", 1, nil)
	if _, err := adm.CommitOffsets(ctx, "g", kadm.OffsetsFromRecords(kgo.Record{Topic: "plain", Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	before := endOffset(t, adm, "__consumer_offsets")
	p := rawProduce(t, cl, "__consumer_offsets", valuesBatch([]string{"forged-commit"}))
	if p.ErrorCode != kerr.InvalidTopicException.Code {
		t.Errorf("produce to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(p.ErrorCode))
	}
	if after := endOffset(t, adm, "__consumer_offsets"); after != before {
		t.Errorf("__consumer_offsets grew from %d to %d", before, after)
	}
	res, err := adm.DeleteRecords(ctx, kadm.Offsets{"__consumer_offsets": {0: {Topic: "__consumer_offsets", Partition: 0, At: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := res.Lookup("__consumer_offsets", 0); !ok || !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Errorf("DeleteRecords on __consumer_offsets: %+v, want INVALID_TOPIC_EXCEPTION", r)
	}
}
