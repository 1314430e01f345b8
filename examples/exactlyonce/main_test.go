package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// The walk-through of docs/transactions.md against a broker: two runs of
// the invoicer over two rounds of orders invoice every order exactly once.
func TestInvoicerExactlyOnce(t *testing.T) {
	n := tc.Start(t)
	seeds := kgo.SeedBrokers(n.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := setup(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	// The second run goes on from the offsets the first committed in its
	// transactions: starting over would invoice the first 300 again.
	if err := produce(ctx, seeds, 0, 300); err != nil {
		t.Fatal(err)
	}
	runUntil(t, seeds, 300)
	if err := produce(ctx, seeds, 300, 200); err != nil {
		t.Fatal(err)
	}
	runUntil(t, seeds, 500)
	// countInvoices stops reading after 2 s without a record, so a read
	// on a loaded machine can stop short: read again until all 500 are
	// there, failing on any duplicate.
	deadline := time.Now().Add(60 * time.Second)
	for {
		orders, dups, err := countInvoices(ctx, seeds)
		if err != nil || dups != 0 {
			t.Fatalf("%d orders invoiced, %d more than once (%v): want 500, 0", orders, dups, err)
		}
		if orders == 500 {
			break
		}
		if orders > 500 || time.Now().After(deadline) {
			t.Fatalf("%d orders invoiced, want 500", orders)
		}
	}
}

func runUntil(t *testing.T, seeds kgo.Opt, want int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- invoice(ctx, seeds) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		orders, dups, err := countInvoices(context.Background(), seeds)
		if err != nil {
			t.Fatal(err)
		}
		if dups > 0 {
			t.Fatalf("%d orders invoiced more than once", dups)
		}
		if orders >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d orders invoiced after 60 s", orders, want)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("invoicer: %v", err)
	}
}
