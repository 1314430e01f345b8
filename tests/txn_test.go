package tests

// The transaction coordinator on a single node (issue 6): InitProducerId
// with a transactional id, AddPartitionsToTxn, EndTxn and the markers the
// coordinator writes, fencing, the timeout abort, and
// DescribeTransactions/ListTransactions through kadm. The transactional
// batches are sent raw (txnBatch) next to the coordinator's requests, as a
// transactional client does.

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	tc "github.com/berthmq/berth/internal/testcluster"
	"github.com/berthmq/berth/internal/txn"
)

// retriable are the coordinator's answers a client retries.
func retriableTxn(err error) bool {
	return errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
		errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable)
}

// retryTxn calls f until it returns something other than a retriable
// coordinator error, for at most 20 s.
func retryTxn(t *testing.T, what string, f func() error) error {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if !retriableTxn(err) {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after 20 s", what, err)
		}
		time.Sleep(20 * time.Millisecond) // a client's retry backoff, not a wait for a state
	}
}

func initTxnPID(t *testing.T, cl *kgo.Client, id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, error) {
	t.Helper()
	var rp int64
	var re int16
	err := retryTxn(t, "InitProducerId", func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, timeoutMs
		req.ProducerID, req.ProducerEpoch = pid, epoch
		resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
		if err != nil {
			return unreachable(err)
		}
		rp, re = resp.ProducerID, resp.ProducerEpoch
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	return rp, re, err
}

// unreachable makes a failed request (the coordinator's node is down)
// one the helpers retry.
func unreachable(err error) error {
	return fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
}

func addTxnPartition(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, topic string, partitions ...int32) error {
	t.Helper()
	if len(partitions) == 0 {
		partitions = []int32{0}
	}
	return retryTxn(t, "AddPartitionsToTxn", func() error {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, partitions
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
		if err != nil {
			return unreachable(err)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				return kerr.ErrorForCode(p.ErrorCode)
			}
		}
		return nil
	})
}

func endTxn(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, commit bool) error {
	t.Helper()
	return retryTxn(t, "EndTxn", func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
		if err != nil {
			return unreachable(err)
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

// txnV1Client is a client for the raw requests of these tests, which
// drive the Transactions V1 protocol: its EndTxn stays at v4 (v5 is
// Transactions V2, which bumps the epoch at the end of every transaction).
func txnV1Client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	return tc.Client(t, addr, append([]kgo.Opt{kgo.MaxVersions(v)}, opts...)...)
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestTxnCoordinatorCommitAndAbort(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "out", 1, nil)
	cl := txnV1Client(t, n.Addr())
	committed := newConsumer(t, n.Addr(), "out", kgo.ReadCommitted())
	uncommitted := newConsumer(t, n.Addr(), "out", kgo.ReadUncommitted())

	pid, epoch, err := initTxnPID(t, cl, "tx-a", 60000, -1, -1)
	must(t, "InitProducerId", err)
	if pid < 0 || epoch != 0 {
		t.Fatalf("InitProducerId: producer %d epoch %d", pid, epoch)
	}

	// Commit: the coordinator's markers make the records visible.
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-a", pid, epoch, "out"))
	produceTxn(t, cl, "out", pid, epoch, 0, "c0", "c1")
	must(t, "EndTxn commit", endTxn(t, cl, "tx-a", pid, epoch, true))
	committed.waitFor(t, "c0", "c1")

	// Abort (the next AddPartitionsToTxn waits out the commit's markers
	// with CONCURRENT_TRANSACTIONS), then one more commit.
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-a", pid, epoch, "out"))
	produceTxn(t, cl, "out", pid, epoch, 2, "a0")
	// Open: the coordinator's and the partition's gauges show it.
	openSeries := fmt.Sprintf(`berth_txn_open_transactions{partition="%d"}`, txn.PartitionFor("tx-a", 50))
	lsoSeries := `berth_partition_lso_lag_records{partition="0",topic="out"}`
	if v, ok := scrape(t, n, openSeries); !ok || v != 1 {
		t.Fatalf("%s = %v (found %v), want 1", openSeries, v, ok)
	}
	if v, ok := scrape(t, n, lsoSeries); !ok || v != 1 {
		t.Fatalf("%s = %v (found %v), want 1", lsoSeries, v, ok)
	}
	must(t, "EndTxn abort", endTxn(t, cl, "tx-a", pid, epoch, false))
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-a", pid, epoch, "out"))
	produceTxn(t, cl, "out", pid, epoch, 3, "c2")
	must(t, "EndTxn commit", endTxn(t, cl, "tx-a", pid, epoch, true))
	committed.waitFor(t, "c0", "c1", "c2")
	uncommitted.waitFor(t, "c0", "c1", "a0", "c2")
	if v, _ := scrape(t, n, lsoSeries); v != 0 {
		t.Fatalf("%s = %v after the transactions ended, want 0", lsoSeries, v)
	}

	// A retry of the completed commit succeeds; an abort of it is refused.
	must(t, "EndTxn retry", endTxn(t, cl, "tx-a", pid, epoch, true))
	if err := endTxn(t, cl, "tx-a", pid, epoch, false); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("abort after commit: %v, want INVALID_TXN_STATE", err)
	}
}

func TestTxnCoordinatorFencesOldProducer(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "out", 1, nil)
	cl := txnV1Client(t, n.Addr())
	v1 := kversion.Stable()
	v1.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 1)
	clV1 := tc.Client(t, n.Addr(), kgo.MaxVersions(v1))
	committed := newConsumer(t, n.Addr(), "out", kgo.ReadCommitted())

	pid, e1, err := initTxnPID(t, cl, "tx-f", 60000, -1, -1)
	must(t, "InitProducerId", err)
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-f", pid, e1, "out"))
	produceTxn(t, cl, "out", pid, e1, 0, "zombie")

	// A second instance: its InitProducerId aborts the open transaction
	// (CONCURRENT_TRANSACTIONS until the abort completed) and bumps the
	// epoch past the fencing one.
	pid2, e2, err := initTxnPID(t, cl, "tx-f", 60000, -1, -1)
	must(t, "second InitProducerId", err)
	if pid2 != pid || e2 <= e1 {
		t.Fatalf("second InitProducerId: producer %d epoch %d, first %d epoch %d", pid2, e2, pid, e1)
	}

	// The first instance is fenced at the coordinator (PRODUCER_FENCED,
	// INVALID_PRODUCER_EPOCH before EndTxn v2) and at the partition.
	if err := endTxn(t, cl, "tx-f", pid, e1, true); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("old producer's EndTxn: %v, want PRODUCER_FENCED", err)
	}
	if err := endTxn(t, clV1, "tx-f", pid, e1, true); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("old producer's EndTxn v1: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if err := addTxnPartition(t, cl, "tx-f", pid, e1, "out"); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("old producer's AddPartitionsToTxn: %v, want PRODUCER_FENCED", err)
	}
	if r := rawProduce(t, cl, "out", txnBatch(pid, e1, 1, "late")); r.ErrorCode == 0 {
		t.Fatal("old producer's transactional batch accepted after the fence")
	}

	// The new instance commits; the zombie's record never shows.
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-f", pid2, e2, "out"))
	produceTxn(t, cl, "out", pid2, e2, 0, "new")
	must(t, "EndTxn", endTxn(t, cl, "tx-f", pid2, e2, true))
	committed.waitFor(t, "new")
}

func TestTxnCoordinatorTimeoutAndAdmin(t *testing.T) {
	n := tc.Start(t, tc.With("transaction.abort.timed.out.transaction.cleanup.interval.ms", "50"))
	tc.CreateTopic(t, n.Addr(), "out", 1, nil)
	cl := txnV1Client(t, n.Addr())
	adm := tc.Admin(t, n.Addr())

	pid, epoch, err := initTxnPID(t, cl, "tx-t", 300, -1, -1)
	must(t, "InitProducerId", err)
	idle, _, err := initTxnPID(t, cl, "tx-idle", 60000, -1, -1)
	must(t, "InitProducerId", err)
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-t", pid, epoch, "out"))
	produceTxn(t, cl, "out", pid, epoch, 0, "stuck")

	// Left open past its 300 ms timeout: the coordinator aborts it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, err := adm.DescribeTransactions(ctxT(t, 10*time.Second), "tx-t")
		must(t, "DescribeTransactions", err)
		d := ds["tx-t"]
		must(t, "DescribeTransactions tx-t", d.Err)
		if d.State == "CompleteAbort" {
			if d.ProducerID != pid || d.ProducerEpoch <= epoch || d.TimeoutMillis != 300 {
				t.Fatalf("after the timeout: %+v", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction still %s 20 s after its timeout", d.State)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	// The abort marker moved the last stable offset past the record.
	if c := latest(t, cl, "out", 1); c != 2 {
		t.Fatalf("read_committed latest %d after the abort, want 2", c)
	}
	if err := endTxn(t, cl, "tx-t", pid, epoch, true); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("EndTxn after the timeout: %v, want PRODUCER_FENCED", err)
	}

	ls, err := adm.ListTransactions(ctxT(t, 10*time.Second), nil, nil)
	must(t, "ListTransactions", err)
	got := map[string]string{}
	for _, l := range ls.Sorted() {
		got[l.TxnID] = l.State
	}
	if got["tx-t"] != "CompleteAbort" || got["tx-idle"] != "Empty" {
		t.Fatalf("ListTransactions: %v", got)
	}
	ls, err = adm.ListTransactions(ctxT(t, 10*time.Second), []int64{idle}, []string{"Empty"})
	must(t, "ListTransactions filtered", err)
	if ids := ls.TransactionalIDs(); !slices.Equal(ids, []string{"tx-idle"}) {
		t.Fatalf("ListTransactions by producer id and state: %v", ids)
	}
	ds, err := adm.DescribeTransactions(ctxT(t, 10*time.Second), "nope")
	must(t, "DescribeTransactions", err)
	if err := ds["nope"].Err; !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("unknown id: %v, want TRANSACTIONAL_ID_NOT_FOUND", err)
	}
}

// A coordinator that restarts with a transaction in PrepareCommit (its
// markers refused: the partition is below min.insync.replicas) replays
// __transaction_state and writes the markers once the partition takes
// them; the epoch survives the restart.
func TestTxnCoordinatorResendsMarkersAfterRestart(t *testing.T) {
	dir := t.TempDir()
	n := tc.StartIn(t, dir)
	tc.CreateTopic(t, n.Addr(), "out", 1, nil)
	cl := txnV1Client(t, n.Addr())
	setMinISR := func(cl *kgo.Client, v string) {
		t.Helper()
		rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctxT(t, 10*time.Second),
			[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &v}}, "out")
		must(t, "AlterConfigs", err)
		for _, r := range rs {
			must(t, "AlterConfigs "+r.Name, r.Err)
		}
	}

	pid, epoch, err := initTxnPID(t, cl, "tx-r", 60000, -1, -1)
	must(t, "InitProducerId", err)
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-r", pid, epoch, "out"))
	produceTxn(t, cl, "out", pid, epoch, 0, "r0")
	setMinISR(cl, "2") // one replica: the COMMIT marker is refused
	must(t, "EndTxn", endTxn(t, cl, "tx-r", pid, epoch, true))
	describe := func(cl *kgo.Client) string {
		ds, err := kadm.NewClient(cl).DescribeTransactions(ctxT(t, 10*time.Second), "tx-r")
		if err != nil || ds["tx-r"].Err != nil {
			return "" // loading, or not yet a coordinator
		}
		return ds["tx-r"].State
	}
	if s := describe(cl); s != "PrepareCommit" {
		t.Fatalf("with the marker refused: %q, want PrepareCommit", s)
	}

	n.Close()
	n = tc.StartIn(t, dir)
	cl = txnV1Client(t, n.Addr())
	setMinISR(cl, "1")
	deadline := time.Now().Add(20 * time.Second)
	for s := describe(cl); s != "CompleteCommit"; s = describe(cl) {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: %q, want CompleteCommit", s)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	newConsumer(t, n.Addr(), "out", kgo.ReadCommitted()).waitFor(t, "r0")

	pid2, epoch2, err := initTxnPID(t, cl, "tx-r", 60000, -1, -1)
	must(t, "InitProducerId after the restart", err)
	if pid2 != pid || epoch2 != epoch+1 {
		t.Fatalf("InitProducerId after the restart: producer %d epoch %d, want %d epoch %d", pid2, epoch2, pid, epoch+1)
	}
}

// AddPartitionsToTxn v4, the broker form: batched transactions, and the
// verify-only check a partition leader makes before a transactional
// batch.
func TestTxnCoordinatorAddPartitionsV4(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "out", 2, nil)
	cl := txnV1Client(t, n.Addr())
	pa, ea, err := initTxnPID(t, cl, "tx-v4a", 60000, -1, -1)
	must(t, "InitProducerId", err)
	pb, eb, err := initTxnPID(t, cl, "tx-v4b", 60000, -1, -1)
	must(t, "InitProducerId", err)

	send := func(txns ...kmsg.AddPartitionsToTxnRequestTransaction) map[string]map[int32]int16 {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 4
		req.Transactions = txns
		resp, err := tc.DirectRequest(ctxT(t, 10*time.Second), cl, req)
		must(t, "AddPartitionsToTxn v4", err)
		out := map[string]map[int32]int16{}
		for _, tx := range resp.(*kmsg.AddPartitionsToTxnResponse).Transactions {
			out[tx.TransactionalID] = map[int32]int16{}
			for _, tt := range tx.Topics {
				for _, p := range tt.Partitions {
					out[tx.TransactionalID][p.Partition] = p.ErrorCode
				}
			}
		}
		return out
	}
	tx := func(id string, pid int64, epoch int16, verify bool, parts ...int32) kmsg.AddPartitionsToTxnRequestTransaction {
		x := kmsg.NewAddPartitionsToTxnRequestTransaction()
		x.TransactionalID, x.ProducerID, x.ProducerEpoch, x.VerifyOnly = id, pid, epoch, verify
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "out", parts
		x.Topics = append(x.Topics, tt)
		return x
	}
	got := send(tx("tx-v4a", pa, ea, false, 0), tx("tx-v4b", pb, eb+1, false, 1))
	if got["tx-v4a"][0] != 0 || got["tx-v4b"][1] != kerr.ProducerFenced.Code {
		t.Fatalf("batched add: %v", got)
	}
	got = send(tx("tx-v4a", pa, ea, true, 0, 1), tx("tx-v4b", pb, eb, true, 1))
	if got["tx-v4a"][0] != 0 || got["tx-v4a"][1] != kerr.InvalidTxnState.Code || got["tx-v4b"][1] != kerr.InvalidTxnState.Code {
		t.Fatalf("verify only: %v", got)
	}
	ds, err := tc.Admin(t, n.Addr()).DescribeTransactions(ctxT(t, 10*time.Second), "tx-v4a", "tx-v4b")
	must(t, "DescribeTransactions", err)
	if a, b := ds["tx-v4a"], ds["tx-v4b"]; a.State != "Ongoing" || b.State != "Empty" {
		t.Fatalf("after verify only: tx-v4a %s, tx-v4b %s; want Ongoing and Empty", a.State, b.State)
	}
}

// An id with no transaction for transactional.id.expiration.ms is deleted
// by the coordinator's expiry timer; one with a transaction open is not.
func TestTxnCoordinatorExpiresIdleIDs(t *testing.T) {
	n := tc.Start(t, tc.With("transactional.id.expiration.ms", "300"),
		tc.With("transaction.remove.expired.transaction.cleanup.interval.ms", "50"))
	tc.CreateTopic(t, n.Addr(), "out", 1, nil)
	cl := txnV1Client(t, n.Addr())
	adm := tc.Admin(t, n.Addr())
	_, _, err := initTxnPID(t, cl, "tx-idle", 60000, -1, -1)
	must(t, "InitProducerId", err)
	pid, epoch, err := initTxnPID(t, cl, "tx-busy", 60000, -1, -1)
	must(t, "InitProducerId", err)
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-busy", pid, epoch, "out"))

	deadline := time.Now().Add(20 * time.Second)
	for {
		ls, err := adm.ListTransactions(ctxT(t, 10*time.Second), nil, nil)
		must(t, "ListTransactions", err)
		if _, ok := ls["tx-idle"]; !ok {
			if _, ok := ls["tx-busy"]; !ok {
				t.Fatal("the id with an open transaction expired")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tx-idle still listed 20 s after it expired: %v", ls.TransactionalIDs())
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	// A new InitProducerId starts the id afresh.
	_, e, err := initTxnPID(t, cl, "tx-idle", 60000, -1, -1)
	must(t, "InitProducerId after expiry", err)
	if e != 0 {
		t.Fatalf("epoch %d after expiry, want 0", e)
	}
}

// A write to __transaction_state that does not become durable (its
// partition below min.insync.replicas) answers a retriable error and the
// coordinator rebuilds its state from the log; once the partition takes
// writes again the id goes on from what the log holds.
func TestTxnCoordinatorRebuildsAfterFailedWrite(t *testing.T) {
	n := tc.Start(t)
	cl := txnV1Client(t, n.Addr())
	_, e0, err := initTxnPID(t, cl, "tx-w", 60000, -1, -1)
	must(t, "InitProducerId", err)
	setMinISR := func(v string) {
		t.Helper()
		rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctxT(t, 10*time.Second),
			[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &v}}, "__transaction_state")
		must(t, "AlterConfigs", err)
		for _, r := range rs {
			must(t, "AlterConfigs "+r.Name, r.Err)
		}
	}
	setMinISR("2")
	req := kmsg.NewPtrInitProducerIDRequest()
	id := "tx-w"
	req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
	raw, err := tc.DirectRequest(ctxT(t, 40*time.Second), cl, req) // no client retries
	must(t, "InitProducerId", err)
	if resp := raw.(*kmsg.InitProducerIDResponse); resp.ErrorCode == 0 {
		t.Fatal("InitProducerId answered while its record could not become durable")
	}
	setMinISR("1")
	_, e2, err := initTxnPID(t, cl, "tx-w", 60000, -1, -1)
	must(t, "InitProducerId after the partition recovered", err)
	if e2 <= e0 {
		t.Fatalf("epoch %d after recovery, want above %d", e2, e0)
	}
	ds, err := kadm.NewClient(cl).DescribeTransactions(ctxT(t, 10*time.Second), "tx-w")
	must(t, "DescribeTransactions", err)
	if d := ds["tx-w"]; d.Err != nil || d.State != "Empty" || d.ProducerEpoch != e2 {
		t.Fatalf("after recovery: %+v", d)
	}
}
