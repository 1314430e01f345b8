package tests

// librdkafka against the transaction coordinator: confluent-kafka-python's
// transactional producer commits, aborts and commits again; kcat and kgo
// read the result at both isolation levels.

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

func TestTxnLibrdkafkaProducer(t *testing.T) {
	py := need(t, "/usr/bin/python3")
	kcat := need(t, "/usr/bin/kcat")
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "py-txn", 1, nil)
	if out := run(t, "", py, "testdata/confluent_txn.py", n.Addr(), "py-txn"); !strings.Contains(out, "ok") {
		t.Fatalf("script said %q", out)
	}
	var committed, all []string
	for i := range 10 {
		committed = append(committed, "c"+string(rune('0'+i)))
	}
	all = append(all, committed[:5]...)
	for i := range 5 {
		all = append(all, "x"+string(rune('0'+i)))
	}
	all = append(all, committed[5:]...)

	newConsumer(t, n.Addr(), "py-txn", kgo.ReadCommitted()).waitFor(t, committed...)
	newConsumer(t, n.Addr(), "py-txn", kgo.ReadUncommitted()).waitFor(t, all...)
	for level, want := range map[string][]string{"read_committed": committed, "read_uncommitted": all} {
		out := run(t, "", kcat, "-b", n.Addr(), "-C", "-t", "py-txn", "-e", "-f", "%s\n", "-X", "isolation.level="+level)
		if got := strings.Fields(out); !slices.Equal(got, want) {
			t.Fatalf("kcat %s read %v, want %v", level, got, want)
		}
	}
}
