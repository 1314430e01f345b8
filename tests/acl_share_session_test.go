package tests

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A share session's partitions are authorized on every ShareFetch, not
// only when a request names them: once READ on the topic is revoked, the
// worker's open session acquires nothing more (as Kafka checks READ on
// every partition of the session).
func TestACLShareSessionReauthorized(t *testing.T) {
	n := startSecured(t)
	ctx := ctxT(t, 60*time.Second)
	admin := kadm.NewClient(as(t, n, "admin"))
	if r, err := admin.CreateTopic(ctx, 1, 1, nil, "parcels"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	grant := kadm.NewACLs().Allow("User:courier").AllowHosts().Topics("parcels").Operations(kadm.OpRead)
	mustCreateACLs(t, admin, grant)
	mustCreateACLs(t, admin, kadm.NewACLs().Allow("User:courier").Groups("couriers").Operations(kadm.OpRead))
	worker := shareConsumer(t, n.Addr(), "couriers", "parcels", kgo.ClientID("courier"))
	prod := as(t, n, "admin")
	warmShare(t, prod, worker, "parcels")

	dres, err := admin.DeleteACLs(ctx, grant)
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, r := range dres {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		deleted += len(r.Deleted)
	}
	if deleted != 1 {
		t.Fatalf("DeleteACLs removed %d bindings, want 1", deleted)
	}
	// A ShareFetch already waiting was authorized when it arrived (as in
	// Kafka); let those end (the consumer's max wait is 500 ms).
	pctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	worker.PollFetches(pctx)
	cancel()
	produceSync(t, prod, &kgo.Record{Topic: "parcels", Key: []byte("after"), Value: []byte("revoked")})
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := worker.PollFetches(pctx) // errors (authorization) are expected here
		cancel()
		for _, r := range fs.Records() {
			if string(r.Key) == "after" {
				t.Fatalf("the worker acquired %q after READ on the topic was revoked", r.Value)
			}
			r.Ack(kgo.AckAccept)
		}
	}
}
