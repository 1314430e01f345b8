package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

func TestTxnListAndDescribe(t *testing.T) {
	n := tc.Start(t)
	addr := n.Addr()
	tc.CreateTopic(t, addr, "out", 2, nil)
	cl := tc.Client(t, addr)
	ctx := t.Context()

	// An open transaction on out-0 and out-1 (the client's requests).
	var pid int64
	var epoch int16
	poll.Until(t, 30*time.Second, func() error {
		id := "orders"
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	poll.Until(t, 30*time.Second, func() error {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = "orders", pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "out", []int32{0, 1}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	})

	out, _, err := runCLI(t, "", "txn", "list", "-b", addr, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var listed []txnListEntry
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(listed) != 1 || listed[0].TransactionalID != "orders" || listed[0].State != "Ongoing" || listed[0].ProducerID != pid {
		t.Fatalf("txn list: %+v", listed)
	}
	out, _, err = runCLI(t, "", "txn", "list", "-b", addr, "--state", "CompleteCommit")
	if err != nil || strings.Contains(out, "orders") {
		t.Fatalf("txn list --state CompleteCommit: %v\n%s", err, out)
	}

	out, _, err = runCLI(t, "", "txn", "describe", "orders", "-b", addr, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var described []txnDescribeEntry
	if err := json.Unmarshal([]byte(out), &described); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	d := described[0]
	if d.State != "Ongoing" || d.ProducerEpoch != epoch || d.TimeoutMs != 60000 || d.AgeMs < 0 ||
		strings.Join(d.Partitions, ",") != "out-0,out-1" {
		t.Fatalf("txn describe: %+v", d)
	}
	out, _, err = runCLI(t, "", "txn", "describe", "orders", "nope", "-b", addr)
	if err == nil || !strings.Contains(out, "TRANSACTIONAL_ID_NOT_FOUND") || !strings.Contains(out, "out-0,out-1") {
		t.Fatalf("txn describe with an unknown id: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "", "txn", "list", "-b", addr, "--state", "Running"); err == nil || !strings.Contains(err.Error(), "want one of") {
		t.Fatalf("txn list --state Running: %v", err)
	}
}
