package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// `berth txn producers` shows a transactional producer with its open
// transaction's start offset on the partition it writes, nothing on the
// other partition, and refuses an unknown topic or partition.
func TestTxnProducers(t *testing.T) {
	n := tc.Start(t)
	addr := n.Addr()
	tc.CreateTopic(t, addr, "orders", 2, nil)
	ctx := t.Context()
	p := tc.Client(t, addr, kgo.TransactionalID("orders-tx"), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b"} {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: 1}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pid, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	out, _, err := runCLI(t, "", "txn", "producers", "--topic", "orders", "-b", addr, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got []txnProducerEntry
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got) != 1 {
		t.Fatalf("txn producers: %+v, want one producer", got)
	}
	e := got[0]
	if e.Topic != "orders" || e.Partition != 1 || e.ProducerID != pid || e.ProducerEpoch != epoch || e.LastSequence != 1 ||
		e.TxnStartOffset != 0 || e.CoordinatorEpoch != -1 || e.LastTimestamp == "" || e.Error != "" {
		t.Fatalf("txn producers: %+v (producer %d epoch %d)", e, pid, epoch)
	}
	if ts, err := time.Parse(time.RFC3339Nano, e.LastTimestamp); err != nil || time.Since(ts) > time.Minute {
		t.Fatalf("last timestamp %q: %v", e.LastTimestamp, err)
	}

	out, _, err = runCLI(t, "", "txn", "producers", "--topic", "orders", "--partition", "1", "-b", addr)
	if err != nil || !strings.Contains(out, "TXN START OFFSET") || !strings.Contains(out, "orders") {
		t.Fatalf("txn producers --partition 1: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "", "txn", "producers", "--topic", "orders", "--partition", "0", "-b", addr, "--json")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("txn producers --partition 0: %v\n%s", err, out)
	}

	// After the commit the producer is still there, with no transaction.
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		out, _, err := runCLI(t, "", "txn", "producers", "--topic", "orders", "--partition", "1", "-b", addr, "--json")
		if err != nil {
			return err
		}
		var got []txnProducerEntry
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			return err
		}
		if len(got) != 1 || got[0].TxnStartOffset != -1 {
			return fmt.Errorf("after commit: %+v", got)
		}
		return nil
	})

	if _, _, err := runCLI(t, "", "txn", "producers", "--topic", "nope", "-b", addr); err == nil ||
		!strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("txn producers of an unknown topic: %v", err)
	}
	if _, _, err := runCLI(t, "", "txn", "producers", "--topic", "orders", "--partition", "5", "-b", addr); err == nil ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("txn producers of an unknown partition: %v", err)
	}
	if _, _, err := runCLI(t, "", "txn", "producers", "-b", addr); err == nil || !strings.Contains(err.Error(), "--topic") {
		t.Fatalf("txn producers without --topic: %v", err)
	}
}
