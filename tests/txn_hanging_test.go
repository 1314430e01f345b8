package tests

// `berth txn find-hanging` and `berth txn abort` (KIP-664) run in-process
// (cli.Run) against a hanging transaction made the way one still arises:
// transactional batches produced without a transactional id (so no
// coordinator checks them, tests/txn_partition_test.go) from a producer id
// no coordinator knows, which nothing will ever end.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// hangingEntry is a row of `berth txn find-hanging --json`.
type hangingEntry struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	StartOffset      int64  `json:"start_offset"`
	AgeMs            int64  `json:"age_ms"`
	TransactionalID  string `json:"transactional_id"`
}

// txnCLI runs `berth args... -b addr` in-process and returns its output.
func txnCLI(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	out, _, err := berthCLI(ctxT(t, time.Minute), "", append(args, "-b", addr)...)
	return out, err
}

func findHangingJSON(t *testing.T, addr string, args ...string) []hangingEntry {
	t.Helper()
	out, err := txnCLI(t, addr, append([]string{"txn", "find-hanging", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("berth txn find-hanging %v: %v\n%s", args, err, out)
	}
	var got []hangingEntry
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("find-hanging --json output %q: %v", out, err)
	}
	return got
}

// A hanging transaction holds back read_committed consumers, even past a
// later committed transaction; find-hanging lists it (JSON and table) but
// not a kgo transactional producer's ongoing transaction on the same
// partition, nor anything idle for less than --max-transaction-timeout;
// abort --start-offset ends it, after which the last stable offset reaches
// the end and read_committed consumers read on without its records. abort
// refuses an offset where no transaction starts, and takes an explicit
// producer id, epoch and coordinator epoch too.
func TestTxnFindHangingAndAbort(t *testing.T) {
	n := tc.Start(t)
	addr := n.Addr()
	tc.CreateTopic(t, addr, "hang", 1, nil)
	tc.CreateTopic(t, addr, "hang2", 1, nil)
	cl := tc.Client(t, addr)

	pid, epoch := initPID(t, cl)                         // no transactional id: no coordinator knows it
	produceTxn(t, cl, "hang", pid, epoch, 0, "h0", "h1") // 0-1, never ended
	tx := txnProducer(t, addr, "hang-tx", kgo.DefaultProduceTopic("hang"))
	must(t, "BeginTransaction", tx.BeginTransaction())
	produceSync(t, tx, &kgo.Record{Value: []byte("t0")}) // 2, ongoing
	txPID, _, err := tx.ProducerID(ctxT(t, 10*time.Second))
	must(t, "ProducerID", err)

	committed := newConsumer(t, addr, "hang", kgo.ReadCommitted())
	if got := committed.poll(t, 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("read_committed saw %q past a hanging transaction", got)
	}
	if u, c := latest(t, cl, "hang", 0), latest(t, cl, "hang", 1); u != 3 || c != 0 {
		t.Fatalf("latest offsets: read_uncommitted %d, read_committed %d; want 3 and 0", u, c)
	}

	// Only the transaction no coordinator runs is hanging; the ongoing
	// one is a candidate at 0s but its coordinator has the partition.
	var got []hangingEntry
	poll.Until(t, 10*time.Second, func() error { // idle for more than 0 ms
		if got = findHangingJSON(t, addr, "--max-transaction-timeout", "0s"); len(got) != 1 {
			return fmt.Errorf("find-hanging: %+v, want one transaction", got)
		}
		return nil
	})
	want := hangingEntry{Topic: "hang", Partition: 0, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: -1, StartOffset: 0}
	g := got[0]
	age := g.AgeMs
	g.AgeMs = 0
	if age < 0 || age > time.Minute.Milliseconds() || g != want {
		t.Fatalf("find-hanging: %+v, want %+v (the kgo producer %d is ongoing)", got[0], want, txPID)
	}
	if got := findHangingJSON(t, addr, "--max-transaction-timeout", "0s", "--topic", "hang"); len(got) != 1 || got[0].ProducerID != pid {
		t.Fatalf("find-hanging --topic hang: %+v", got)
	}
	if got := findHangingJSON(t, addr); len(got) != 0 {
		t.Fatalf("find-hanging at the default 15m: %+v, want none", got)
	}
	out, err := txnCLI(t, addr, "txn", "find-hanging", "--max-transaction-timeout", "0s")
	// One row: topic, partition, producer id, epoch, coordinator epoch
	// (none yet), start offset, age, no transactional id, the reason.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var row []string
	if len(lines) == 2 {
		row = strings.Fields(lines[1])
	}
	if err != nil || !strings.Contains(lines[0], "START OFFSET") || len(row) < 8 ||
		!slices.Equal(row[:6], []string{"hang", "0", strconv.FormatInt(pid, 10), strconv.Itoa(int(epoch)), "-", "0"}) || row[7] != "-" {
		t.Fatalf("find-hanging table (producer %d, not %d): %v\n%s", pid, txPID, err, out)
	}

	// Committing the legitimate transaction does not help read_committed
	// readers: the hanging one still starts below it.
	must(t, "EndTransaction", tx.EndTransaction(ctxT(t, 30*time.Second), kgo.TryCommit)) // 3
	if c := latest(t, cl, "hang", 1); c != 0 {
		t.Fatalf("read_committed latest %d after the commit, want 0 (held by the hanging transaction)", c)
	}

	if out, err := txnCLI(t, addr, "txn", "abort", "--topic", "hang", "--partition", "0", "--start-offset", "1"); err == nil ||
		!strings.Contains(err.Error(), "no producer has an open transaction starting at offset 1") {
		t.Fatalf("abort at an offset where no transaction starts: %v\n%s", err, out)
	}
	out, err = txnCLI(t, addr, "txn", "abort", "--topic", "hang", "--partition", "0", "--start-offset", "0", "--json") // 4
	if err != nil {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	var ab struct {
		ProducerID       int64 `json:"producer_id"`
		ProducerEpoch    int16 `json:"producer_epoch"`
		CoordinatorEpoch int32 `json:"coordinator_epoch"`
		Aborted          bool  `json:"aborted"`
	}
	if err := json.Unmarshal([]byte(out), &ab); err != nil || !ab.Aborted || ab.ProducerID != pid || ab.ProducerEpoch != epoch || ab.CoordinatorEpoch != 0 {
		t.Fatalf("abort --json: %v %s", err, out)
	}
	poll.Until(t, 10*time.Second, func() error { // the commit's marker may still be on its way
		if u, c := latest(t, cl, "hang", 0), latest(t, cl, "hang", 1); u != 5 || c != 5 {
			return fmt.Errorf("after the abort: latest %d / %d, want 5 / 5", u, c)
		}
		return nil
	})
	committed.waitFor(t, "t0")
	produceSync(t, cl, &kgo.Record{Topic: "hang", Value: []byte("plain")})
	committed.waitFor(t, "t0", "plain")
	newConsumer(t, addr, "hang", kgo.ReadUncommitted()).waitFor(t, "h0", "h1", "t0", "plain")
	if got := findHangingJSON(t, addr, "--max-transaction-timeout", "0s"); len(got) != 0 {
		t.Fatalf("find-hanging after the abort: %+v", got)
	}
	if _, err := txnCLI(t, addr, "txn", "abort", "--topic", "hang", "--partition", "0", "--start-offset", "0"); err == nil ||
		!strings.Contains(err.Error(), "none is open there") {
		t.Fatalf("a second abort: %v", err)
	}

	// With the producer named explicitly (table output).
	pid2, epoch2 := initPID(t, cl)
	produceTxn(t, cl, "hang2", pid2, epoch2, 0, "x0") // 0
	out, err = txnCLI(t, addr, "txn", "abort", "--topic", "hang2", "--partition", "0", "--producer-id", strconv.FormatInt(pid2, 10),
		"--producer-epoch", strconv.Itoa(int(epoch2)), "--coordinator-epoch", "0")
	if err != nil || !strings.Contains(out, "aborted") {
		t.Fatalf("abort --producer-id: %v\n%s", err, out)
	}
	if u, c := latest(t, cl, "hang2", 0), latest(t, cl, "hang2", 1); u != 2 || c != 2 {
		t.Fatalf("hang2 after the abort: latest %d / %d, want 2 / 2", u, c)
	}
	if _, err := txnCLI(t, addr, "txn", "abort", "--topic", "hang2", "--partition", "0", "--producer-id", "5"); err == nil ||
		!strings.Contains(err.Error(), "go together") {
		t.Fatalf("abort with --producer-id alone: %v", err)
	}
}

// A partition keeps the coordinator epoch of a producer's last marker and
// refuses an older coordinator's marker with TRANSACTION_COORDINATOR_FENCED:
// after a marker from coordinator epoch 7 (a newer coordinator than this
// node's, whose __transaction_state leader epoch is 0), the coordinator's
// COMMIT markers for the producer's next transaction are refused, so the
// records stay unstable and the transaction stays PrepareCommit (the
// coordinator stops sending them, as Kafka's does: the newer coordinator
// owns the transaction). DescribeProducers shows epoch 7, and `berth txn
// abort --start-offset` uses it, so its marker is not refused.
func TestTxnMarkerFromOlderCoordinatorFenced(t *testing.T) {
	n := tc.Start(t)
	addr := n.Addr()
	tc.CreateTopic(t, addr, "cf", 1, nil)
	cl := txnV1Client(t, addr)
	pid, epoch, err := initTxnPID(t, cl, "tx-cf", 60000, -1, -1)
	must(t, "InitProducerId", err)

	if ec := writeMarkerFrom(t, cl, "cf", pid, epoch, false, 7); ec != 0 { // 0
		t.Fatalf("marker from coordinator epoch 7: %v", kerr.ErrorForCode(ec))
	}
	if ec := writeMarkerFrom(t, cl, "cf", pid, epoch, false, 6); ec != kerr.TransactionCoordinatorFenced.Code { // refused
		t.Fatalf("marker from coordinator epoch 6 after 7: %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(ec))
	}
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-cf", pid, epoch, "cf"))
	produceTxn(t, cl, "cf", pid, epoch, 0, "c0") // 1
	must(t, "EndTxn commit", endTxn(t, cl, "tx-cf", pid, epoch, true))

	// The coordinator stops: over 3 s no client of this test sends a
	// request, and the node reads at most the one WriteTxnMarkers that may
	// still have been on its way (a sender retrying would send one every
	// 50 ms to 1 s).
	requests := func() float64 {
		v, ok := scrape(t, n, "berth_server_requests_total")
		if !ok {
			t.Fatal("no berth_server_requests_total")
		}
		return v
	}
	r0 := requests()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); { // what must not change, watched for a while
		if r := requests(); r > r0+1 {
			t.Fatalf("%v requests read in the quiet window: the coordinator is still sending refused markers", r-r0)
		}
		time.Sleep(50 * time.Millisecond) // scrape pacing, not a wait for a state
	}
	adm := tc.Admin(t, addr)
	if u, c := latest(t, cl, "cf", 0), latest(t, cl, "cf", 1); u != 2 || c != 1 {
		t.Fatalf("latest %d / %d, want 2 / 1: the fenced coordinator's COMMIT marker was written", u, c)
	}
	ds, err := adm.DescribeTransactions(ctxT(t, 10*time.Second), "tx-cf")
	must(t, "DescribeTransactions", err)
	if d := ds["tx-cf"]; d.Err != nil || d.State != "PrepareCommit" {
		t.Fatalf("tx-cf: %+v, want PrepareCommit (its markers are refused)", d)
	}
	p, err := describeProducer(t, adm, "cf", pid)
	must(t, "DescribeProducers", err)
	if p.CoordinatorEpoch != 7 || p.CurrentTxnStartOffset != 1 {
		t.Fatalf("producer %d: %+v, want coordinator epoch 7 and a transaction open at 1", pid, p)
	}

	out, err := txnCLI(t, addr, "txn", "abort", "--topic", "cf", "--partition", "0", "--start-offset", "1")
	if err != nil || !strings.Contains(out, "aborted") {
		t.Fatalf("abort with the producer's coordinator epoch: %v\n%s", err, out)
	}
	if u, c := latest(t, cl, "cf", 0), latest(t, cl, "cf", 1); u != 3 || c != 3 {
		t.Fatalf("after the abort: latest %d / %d, want 3 / 3", u, c)
	}
	produceSync(t, cl, &kgo.Record{Topic: "cf", Value: []byte("plain")})
	newConsumer(t, addr, "cf", kgo.ReadCommitted()).waitFor(t, "plain")
}

// With transaction.partition.verification.enable=false a V1 producer's
// batch for a partition it never added to its transaction opens one there
// that its coordinator does not know of: find-hanging lists it with the
// producer's transactional id, whether the id has no ongoing transaction
// or an ongoing one without the partition, and abort ends it.
func TestTxnFindHangingWithTransactionalID(t *testing.T) {
	n := tc.Start(t, tc.With("transaction.partition.verification.enable", "false"))
	addr := n.Addr()
	tc.CreateTopic(t, addr, "late", 1, nil)
	tc.CreateTopic(t, addr, "other", 1, nil)
	v1 := kversion.Stable()
	v1.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	v1.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	cl := tc.Client(t, addr, kgo.MaxVersions(v1))
	pid, epoch, err := initTxnPID(t, cl, "tx-late", 60000, -1, -1)
	must(t, "InitProducerId", err)
	if r := txnProduce(t, cl, "tx-late", "late", pid, epoch, 0, "stray"); r.ErrorCode != 0 { // 0
		t.Fatalf("unverified transactional batch: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	check := func(reason string) {
		t.Helper()
		var got []hangingEntry
		poll.Until(t, 10*time.Second, func() error { // idle for more than 0 ms
			if got = findHangingJSON(t, addr, "--max-transaction-timeout", "0s"); len(got) != 1 {
				return fmt.Errorf("find-hanging: %+v, want one transaction", got)
			}
			return nil
		})
		out, err := txnCLI(t, addr, "txn", "find-hanging", "--max-transaction-timeout", "0s", "--json")
		if g := got[0]; g.Topic != "late" || g.ProducerID != pid || g.StartOffset != 0 || g.TransactionalID != "tx-late" ||
			err != nil || !strings.Contains(out, reason) {
			t.Fatalf("find-hanging: %+v, want tx-late's producer %d at late-0 offset 0 (%s): %v\n%s", g, pid, reason, err, out)
		}
	}
	check("no ongoing transaction")
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-late", pid, epoch, "other"))
	check("does not include the partition")

	out, err := txnCLI(t, addr, "txn", "abort", "--topic", "late", "--partition", "0", "--start-offset", "0")
	if err != nil || !strings.Contains(out, "aborted") {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	if u, c := latest(t, cl, "late", 0), latest(t, cl, "late", 1); u != 2 || c != 2 {
		t.Fatalf("after the abort: latest %d / %d, want 2 / 2", u, c)
	}
	if got := findHangingJSON(t, addr, "--max-transaction-timeout", "0s"); len(got) != 0 {
		t.Fatalf("find-hanging after the abort: %+v", got)
	}
}
