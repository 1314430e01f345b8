// HarborCart is the seeds' worked example, runnable: an order service
// that writes each order and its OrderPlaced event in one transaction
// (pkg/outbox), a relay that publishes the events to the orders topic, three
// consumer groups that act on every order once (pkg/retry for their
// retries, pkg/inbox for once-only effects: email-notifier writes an email
// row, sales-analytics a revenue contribution, fraud-monitor a flag when an
// order breaks its rule), shipment workers that take each order as a job of
// a work queue (a share group, pkg/worker: 5 attempts, 2/4/8/16 s backoff
// with jitter, then dlq.orders, the seeds' orders.dlq under the dlq. prefix KIP-1191 asks of a work queue's dead-letter topic), and a load generator.
//
//	go run ./examples/harborcart up       # every component, placing orders until Ctrl-C
//	go run ./examples/harborcart check    # every order has exactly one of each effect
//
// Each component is also a command of its own (orders, relay, consumer,
// worker, load), and up runs each as a child process it restarts when it
// dies, as a supervisor would: kill any of them (or a broker) and check
// still passes.
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
)

// common are the flags every command takes.
type common struct {
	brokers  string
	db       string
	postgres string
	http     string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "Berth (or Kafka) bootstrap brokers, comma-separated")
	fs.StringVar(&c.db, "db", "harborcart.db", "the SQLite database file (without --postgres)")
	fs.StringVar(&c.postgres, "postgres", "", "a PostgreSQL URL (postgres://user@host:port/db) instead of SQLite")
	fs.StringVar(&c.http, "http", "127.0.0.1:8088", "the order service's HTTP address")
}

func (c *common) seeds() []string { return strings.Split(c.brokers, ",") }

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmds := map[string]func(context.Context, []string) error{
		"up": up, "setup": setupCmd, "orders": ordersCmd, "relay": relayCmd, "consumer": consumerCmd,
		"worker": workerCmd, "load": loadCmd, "check": checkCmd,
	}
	fn, ok := cmds[os.Args[1]]
	if !ok {
		usage()
		os.Exit(2)
	}
	if err := fn(ctx, os.Args[2:]); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "harborcart %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: harborcart <command> [flags]

  up        set up, then run every component (restarting any that dies) and place orders until Ctrl-C
  check     wait for the pipeline to drain, then verify every order has exactly one email,
            one revenue contribution and one shipment (and a fraud flag where the rule says);
            exits 1 otherwise
  setup     create the topics, the work queue's group configs and the database tables
  orders    the order service: POST /orders {"customer": "...", "total_cents": 5990}
  relay     the outbox relay
  consumer  one consumer group: --group email-notifier|sales-analytics|fraud-monitor
  worker    a shipment worker (share group warehouse)
  load      place orders at --rate per second through the order service

Every command takes --brokers, --db (SQLite file) or --postgres URL, --http.
`)
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
