package tests

// `berth bench txn` run in-process (cli.Run) with tiny counts, on both
// transaction protocols: the committed transactions' records are what a
// read_committed consumer sees, the aborted ones are not.

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/cli"
	tc "github.com/berthmq/berth/internal/testcluster"
)

func TestBenchTxn(t *testing.T) {
	addr := tc.Start(t).Addr()
	total := 0
	for _, protocol := range []string{"v2", "v1"} {
		var out, errb bytes.Buffer
		args := []string{"bench", "txn", "-b", addr, "--topic", "bt", "--partitions", "2", "--records-per-txn", "5",
			"--num-transactions", "20", "--abort-every", "4", "--record-size", "64", "--protocol", protocol, "--json"}
		if err := cli.Run(ctxT(t, time.Minute), args, strings.NewReader(""), &out, &errb); err != nil {
			t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		var res struct {
			Committed  int64   `json:"committed_transactions"`
			Aborted    int64   `json:"aborted_transactions"`
			Records    int64   `json:"committed_records"`
			TxnsPerSec float64 `json:"transactions_per_sec"`
			Latency    struct {
				P50 float64 `json:"p50"`
			} `json:"transaction_latency_ms"`
		}
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("--json output %q: %v", out.String(), err)
		}
		if res.Committed != 15 || res.Aborted != 5 || res.Records != 75 || res.TxnsPerSec <= 0 || res.Latency.P50 <= 0 {
			t.Fatalf("%s: %+v, want 15 committed and 5 aborted transactions, 75 records", protocol, res)
		}
		total += 75
	}
	// Every record of the committed transactions, none of the aborted.
	c := newConsumer(t, addr, "bt", kgo.ReadCommitted())
	deadline := time.Now().Add(20 * time.Second)
	for len(c.poll(t, 300*time.Millisecond)) < total && time.Now().Before(deadline) {
	}
	if got := c.poll(t, 300*time.Millisecond); len(got) != total {
		t.Fatalf("read_committed saw %d records, want %d", len(got), total)
	}
}
