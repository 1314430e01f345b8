package tests

// Stock kgo transactional producers against the transaction coordinator
// on a single node: commit and abort seen by read_committed and
// read_uncommitted consumers, a second instance fencing the first, and a
// transaction left open past its timeout aborted by the coordinator.

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

func txnProducer(t *testing.T, addr, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return tc.Client(t, addr, append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic("out"),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// inTxn produces values in one transaction and ends it.
func inTxn(t *testing.T, cl *kgo.Client, commit kgo.TransactionEndTry, values ...string) {
	t.Helper()
	must(t, "BeginTransaction", cl.BeginTransaction())
	for _, v := range values {
		produceSync(t, cl, &kgo.Record{Value: []byte(v)})
	}
	must(t, "EndTransaction", cl.EndTransaction(ctxT(t, 30*time.Second), commit))
}

func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

func TestTxnKgoCommitAbortAndFencing(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "out", 1, nil)
	committed := newConsumer(t, n.Addr(), "out", kgo.ReadCommitted())
	uncommitted := newConsumer(t, n.Addr(), "out", kgo.ReadUncommitted())

	p1 := txnProducer(t, n.Addr(), "kgo-tx")
	inTxn(t, p1, kgo.TryCommit, "c0", "c1")
	committed.waitFor(t, "c0", "c1")
	inTxn(t, p1, kgo.TryAbort, "x0")
	inTxn(t, p1, kgo.TryCommit, "c2")
	committed.waitFor(t, "c0", "c1", "c2")
	uncommitted.waitFor(t, "c0", "c1", "x0", "c2")

	// A second instance with the same transactional id fences the first.
	must(t, "BeginTransaction", p1.BeginTransaction())
	produceSync(t, p1, &kgo.Record{Value: []byte("zombie")})
	p2 := txnProducer(t, n.Addr(), "kgo-tx")
	inTxn(t, p2, kgo.TryCommit, "n0")
	err := p1.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Value: []byte("zombie2")}).FirstErr()
	if err == nil {
		err = p1.EndTransaction(ctxT(t, 30*time.Second), kgo.TryCommit)
	}
	if !fenced(err) {
		t.Fatalf("the fenced producer's next produce or commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	committed.waitFor(t, "c0", "c1", "c2", "n0")
}

func TestTxnKgoTimeoutAbort(t *testing.T) {
	n := tc.Start(t, tc.With("transaction.abort.timed.out.transaction.cleanup.interval.ms", "50"))
	tc.CreateTopic(t, n.Addr(), "out", 1, nil)
	adm := tc.Admin(t, n.Addr())
	p := txnProducer(t, n.Addr(), "kgo-slow", kgo.TransactionTimeout(time.Second))
	must(t, "BeginTransaction", p.BeginTransaction())
	produceSync(t, p, &kgo.Record{Value: []byte("stuck")})

	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, err := adm.DescribeTransactions(ctxT(t, 10*time.Second), "kgo-slow")
		must(t, "DescribeTransactions", err)
		if d := ds["kgo-slow"]; d.Err == nil && d.State == "CompleteAbort" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("transaction %+v 20 s after its 1 s timeout", d)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	ls, err := adm.ListTransactions(ctxT(t, 10*time.Second), nil, []string{"CompleteAbort"})
	must(t, "ListTransactions", err)
	if _, ok := ls["kgo-slow"]; !ok {
		t.Fatalf("ListTransactions CompleteAbort: %v", ls.TransactionalIDs())
	}
	if err := p.EndTransaction(ctxT(t, 30*time.Second), kgo.TryCommit); !fenced(err) {
		t.Fatalf("commit after the timeout abort: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	if c := latest(t, tc.Client(t, n.Addr()), "out", 1); c != 2 {
		t.Fatalf("read_committed latest %d after the abort, want 2", c)
	}
}
