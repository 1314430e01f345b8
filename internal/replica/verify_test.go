package replica

import (
	"errors"
	"testing"

	"github.com/berthmq/berth/internal/batch"
)

// The verification guard: a transactional batch checked with its
// coordinator is refused if a marker ended the producer's transaction in
// the meantime (a timeout abort racing the check), and taken otherwise.
func TestTxnGuard(t *testing.T) {
	p, _ := openPartitionAt(t, t.TempDir())
	scratch := batch.GetScratch()
	defer batch.PutScratch(scratch)

	// Unknown producer: a check is needed; nothing in between, taken.
	g, need := p.NeedsTxnCheck(7, 0)
	if !need {
		t.Fatal("an unknown producer's first transactional batch needs no check")
	}
	if _, err := p.AppendChecked(txnBatch(7, 0, 0, 1, "a"), scratch, g); err != nil {
		t.Fatalf("checked batch: %v", err)
	}
	// Its transaction is open at epoch 0: later batches need no check, a
	// batch of another epoch does.
	if _, need := p.NeedsTxnCheck(7, 0); need {
		t.Fatal("a batch of the open transaction needs a check")
	}
	if _, need := p.NeedsTxnCheck(7, 1); !need {
		t.Fatal("a batch of a newer epoch needs no check")
	}
	markerDurable(t, p, 7, 0, batch.ControlCommit)

	// The next transaction: the check is answered, then an ABORT marker
	// (the coordinator timed the transaction out) lands before the batch.
	g, need = p.NeedsTxnCheck(7, 0)
	if !need {
		t.Fatal("the first batch of the next transaction needs no check")
	}
	markerDurable(t, p, 7, 0, batch.ControlAbort)
	if _, err := p.AppendChecked(txnBatch(7, 0, 1, 1, "late"), scratch, g); !errors.Is(err, ErrTxnChanged) {
		t.Fatalf("a batch checked before its transaction's ABORT: %v, want ErrTxnChanged", err)
	}
	p.appendMu.Lock()
	open := p.producers.m[7].InTxn
	p.appendMu.Unlock()
	if open {
		t.Fatal("the refused batch opened a transaction")
	}
	// Asked again, it is taken.
	g, _ = p.NeedsTxnCheck(7, 0)
	if _, err := p.AppendChecked(txnBatch(7, 0, 1, 1, "again"), scratch, g); err != nil {
		t.Fatalf("checked again: %v", err)
	}
}
