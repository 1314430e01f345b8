// Command exactlyonce is the consume-transform-produce example of Berth's
// docs (docs/transactions.md): an invoicer reads orders and writes one
// invoice per order, exactly once, with kgo's GroupTransactSession. Each
// poll's invoices and the orders' offsets are committed in one
// transaction; a crash (kill it at any moment) or a rebalance aborts the
// open transaction, and the next run goes on from the committed offsets,
// so read_committed readers of the invoices see each order's invoice once.
//
//	go run ./examples/exactlyonce setup
//	go run ./examples/exactlyonce produce -n 1000
//	go run ./examples/exactlyonce invoice            # Ctrl-C or kill -9 it, run it again
//	go run ./examples/exactlyonce check              # every order invoiced exactly once?
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	ordersTopic   = "orders"
	invoicesTopic = "invoices"
	group         = "invoicer"
	txnID         = "invoicer-1" // one per instance: a restart with the same id fences the old one
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: exactlyonce setup|produce|invoice|check [-brokers host:port]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	n := fs.Int("n", 1000, "orders to produce (produce)")
	from := fs.Int("from", 0, "number of the first order (produce)")
	_ = fs.Parse(os.Args[2:])
	seeds := kgo.SeedBrokers(strings.Split(*brokers, ",")...)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch os.Args[1] {
	case "setup":
		err = setup(ctx, seeds)
	case "produce":
		err = produce(ctx, seeds, *from, *n)
	case "invoice":
		err = invoice(ctx, seeds)
	case "check":
		err = check(ctx, seeds)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "exactlyonce:", err)
		os.Exit(1)
	}
}

func setup(ctx context.Context, seeds kgo.Opt) error {
	cl, err := kgo.NewClient(seeds)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, t := range []string{ordersTopic, invoicesTopic} {
		if _, err := adm.CreateTopic(ctx, 3, -1, nil, t); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return err
		}
	}
	return nil
}

func produce(ctx context.Context, seeds kgo.Opt, from, n int) error {
	cl, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic(ordersTopic))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("order-%06d", i)
		cl.Produce(ctx, &kgo.Record{Key: []byte(id), Value: []byte(id)}, nil)
	}
	return cl.Flush(ctx)
}

// invoice is the consume-transform-produce loop.
func invoice(ctx context.Context, seeds kgo.Opt) error {
	sess, err := kgo.NewGroupTransactSession(seeds,
		kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(ordersTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // never read another pipeline's aborted output
		kgo.RequireStableFetchOffsets(),              // wait for offsets of a transaction still completing
		kgo.DefaultProduceTopic(invoicesTopic),
	)
	if err != nil {
		return err
	}
	defer sess.Close()
	total := 0
	for {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fs.Err0(); err != nil {
			return err
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return err
		}
		for _, r := range recs {
			inv := &kgo.Record{Key: r.Key, Value: append([]byte("invoice for "), r.Value...)}
			sess.Produce(ctx, inv, nil)
		}
		// End flushes the invoices, adds the orders' offsets to the
		// transaction and commits; if anything failed (or the group
		// rebalanced meanwhile) it aborts and committed is false: the
		// orders are read again from the committed offsets.
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			return err
		}
		if committed {
			total += len(recs)
			fmt.Printf("committed %d invoices (%d in this run)\n", len(recs), total)
		}
	}
}

// check reads the invoices as a read_committed consumer and counts each
// order's invoices.
func check(ctx context.Context, seeds kgo.Opt) error {
	orders, dups, err := countInvoices(ctx, seeds)
	if err != nil {
		return err
	}
	fmt.Printf("%d orders invoiced, %d more than once\n", orders, dups)
	if dups > 0 {
		return errors.New("duplicates")
	}
	return nil
}

// countInvoices returns how many orders have an invoice and how many have
// more than one, reading until the invoices topic is quiet for 2 s.
func countInvoices(ctx context.Context, seeds kgo.Opt) (orders, dups int, err error) {
	cl, err := kgo.NewClient(seeds, kgo.ConsumeTopics(invoicesTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	seen := map[string]int{}
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Key)]++; n++ })
		if n == 0 || ctx.Err() != nil {
			break
		}
	}
	for _, c := range seen {
		if c > 1 {
			dups++
		}
	}
	return len(seen), dups, ctx.Err()
}
