package tests

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// A group config changed while the group's consumers run applies to the
// share-partitions they are using: a dead-letter topic set now receives
// the next rejected job.
func TestShareGroupConfigAppliesToRunningGroup(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "orders", 1, nil)
	tc.CreateTopic(t, n.Addr(), "dlq.orders", 1, dlqTopicConfigs())
	prod := tc.Client(t, n.Addr())
	cl := shareConsumer(t, n.Addr(), "packers", "orders")
	warmShare(t, prod, cl, "orders") // the share-partition is loaded, with no DLQ topic

	setGroupConfigs(t, prod, "packers", "errors.deadletterqueue.topic.name", "dlq.orders")
	produceSync(t, prod, &kgo.Record{Topic: "orders", Value: []byte("bad")})
	receiveJob(t, cl, "bad").Ack(kgo.AckReject)
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if d := consumeN(t, n.Addr(), "dlq.orders", 1)[0]; string(d.Value) != "bad" {
		t.Fatalf("DLQ record %q", d.Value)
	}
}
