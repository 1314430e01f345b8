package tests

// Transactions V2 (EndTxn v5): the producer's next requests while the
// markers of its last transaction are still going out. EndTxn answers
// with the bumped epoch once PrepareCommit is durable, before the
// markers; a client that aborts its next transaction at once (kgo does,
// to clear server-side registrations, when a rebalance revokes its
// partitions before any produce succeeded) must be told to wait, not
// that it was fenced (issue 12).

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// endTxnV2 sends one EndTxn v5 (no retry) and returns the producer id
// and epoch it answered with.
func endTxnV2(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, commit bool) (int64, int16, error) {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 5
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	resp, err := tc.DirectRequest(ctxT(t, 20*time.Second), cl, req)
	must(t, "EndTxn", err)
	r := resp.(*kmsg.EndTxnResponse)
	return r.ProducerID, r.ProducerEpoch, kerr.ErrorForCode(r.ErrorCode)
}

// setTopicConfig sets one config of a topic.
func setTopicConfig(t *testing.T, cl *kgo.Client, topic, name, value string) {
	t.Helper()
	rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctxT(t, 10*time.Second),
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: &value}}, topic)
	must(t, "AlterConfigs", err)
	for _, r := range rs {
		must(t, "AlterConfigs "+r.Name, r.Err)
	}
}

func TestTxnV2AbortWhileCommitMarkersPending(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "out", 1, nil)
	cl := tc.Client(t, n.Addr())
	adm := kadm.NewClient(cl)
	const id = "tx-v2-pending"

	pid, epoch, err := initTxnPID(t, cl, id, 60000, -1, -1)
	must(t, "InitProducerId", err)
	if r := txnProduce(t, cl, id, "out", pid, epoch, 0, "c0"); r.ErrorCode != 0 {
		t.Fatalf("produce c0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// The partition refuses the COMMIT marker (one replica, two needed):
	// the transaction stays PrepareCommit after EndTxn answered.
	setTopicConfig(t, cl, "out", "min.insync.replicas", "2")
	rp, re, err := endTxnV2(t, cl, id, pid, epoch, true)
	must(t, "EndTxn commit", err)
	if rp != pid || re != epoch+1 {
		t.Fatalf("EndTxn commit: producer %d epoch %d, want %d epoch %d", rp, re, pid, epoch+1)
	}
	epoch = re
	if d := describeTxn(t, adm, id); d.State != "PrepareCommit" || d.ProducerEpoch != epoch {
		t.Fatalf("after EndTxn with the marker refused: %s epoch %d, want PrepareCommit epoch %d", d.State, d.ProducerEpoch, epoch)
	}

	// The next transaction at the bumped epoch: its produce waits for the
	// markers and fails (retriable) when they take too long, enlisting
	// nothing; its abort waits too and answers CONCURRENT_TRANSACTIONS,
	// which clients retry. It was PRODUCER_FENCED.
	if r := txnProduce(t, cl, id, "out", pid, epoch, 0, "x0"); r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("produce while the markers are pending: %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(r.ErrorCode))
	}
	if _, _, err := endTxnV2(t, cl, id, pid, epoch, false); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("EndTxn abort at the bumped epoch while the markers are pending: %v, want CONCURRENT_TRANSACTIONS", err)
	}

	// The marker goes through; the abort of the empty transaction (retried
	// as a client does) bumps the epoch again.
	setTopicConfig(t, cl, "out", "min.insync.replicas", "1")
	err = retryTxn(t, "EndTxn abort", func() error {
		rp, re, err = endTxnV2(t, cl, id, pid, epoch, false)
		return err
	})
	must(t, "EndTxn abort after the markers", err)
	if rp != pid || re != epoch+1 {
		t.Fatalf("EndTxn abort: producer %d epoch %d, want %d epoch %d", rp, re, pid, epoch+1)
	}
	epoch = re

	// A partly enlisted transaction: the produce enlists out-0 and its
	// append fails (a new epoch must start at sequence 0); the abort at
	// the current epoch ends it and writes the ABORT marker.
	if r := txnProduce(t, cl, id, "out", pid, epoch, 5, "x1"); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("produce at sequence 5: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(r.ErrorCode))
	}
	if d := describeTxn(t, adm, id); d.State != "Ongoing" || len(d.Topics["out"]) != 1 {
		t.Fatalf("after the failed produce: %s %v, want Ongoing with out-0", d.State, d.Topics)
	}
	rp, re, err = endTxnV2(t, cl, id, pid, epoch, false)
	must(t, "EndTxn abort of the partly enlisted transaction", err)
	if rp != pid || re != epoch+1 {
		t.Fatalf("EndTxn abort: producer %d epoch %d, want %d epoch %d", rp, re, pid, epoch+1)
	}
	epoch = re

	// The producer goes on: the next transaction commits.
	if r := txnProduce(t, cl, id, "out", pid, epoch, 0, "c1"); r.ErrorCode != 0 {
		t.Fatalf("produce c1: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	must(t, "EndTxn commit", retryTxn(t, "EndTxn commit", func() error {
		_, _, err := endTxnV2(t, cl, id, pid, epoch, true)
		return err
	}))
	newConsumer(t, n.Addr(), "out", kgo.ReadCommitted()).waitFor(t, "c0", "c1")
}
