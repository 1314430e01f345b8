package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/pkg/breaker"
	"github.com/berthmq/berth/pkg/event"
	"github.com/berthmq/berth/pkg/outbox"
	"github.com/berthmq/berth/pkg/retry"
	"github.com/berthmq/berth/pkg/worker"
)

const (
	ordersTopic = "orders"
	dlqTopic    = "dlq.orders" // KIP-1191: a share group's dead-letter topic starts with the broker's prefix, dlq.
	shipGroup   = "warehouse"
	// fraudCents is fraud-monitor's rule: an order above it is flagged.
	fraudCents = 50000
)

var groups = []string{"email-notifier", "sales-analytics", "fraud-monitor"}

// Order is the OrderPlaced event's payload.
type Order struct {
	ID         string `json:"id"`
	Customer   string `json:"customer"`
	TotalCents int64  `json:"total_cents"`
	CreatedMs  int64  `json:"created_ms"`
}

func logger(component string) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", component)
}

// setupCmd creates the topics (orders: 24 partitions, 3 replicas with min
// ISR 2 where the cluster has three brokers, 3 days; dlq.orders: 14 days),
// the work queue's group configs and the database tables.
func setupCmd(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("setup", flag.ExitOnError)
	c.register(fs)
	_ = fs.Parse(args)
	return setup(ctx, &c)
}

func setup(ctx context.Context, c *common) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("reaching the brokers at %s: %w", c.brokers, err)
	}
	rf := int16(min(3, len(brokers)))
	str := func(s string) *string { return &s }
	ordersCfg := map[string]*string{"retention.ms": str("259200000")}
	if rf == 3 {
		ordersCfg["min.insync.replicas"] = str("2")
	}
	for _, t := range []struct {
		name  string
		parts int32
		cfg   map[string]*string
	}{
		{ordersTopic, 24, ordersCfg},
		{dlqTopic, 24, map[string]*string{"retention.ms": str("1209600000"), "errors.deadletterqueue.group.enable": str("true")}},
	} {
		res, err := adm.CreateTopic(ctx, t.parts, rf, t.cfg, t.name)
		if err == nil {
			err = res.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating %s: %w", t.name, err)
		}
	}
	// The shipment work queue: the seeds' retry policy.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, shipGroup
	for _, kv := range [][2]string{
		{"share.auto.offset.reset", "earliest"},
		// A worker that dies holds its jobs until their locks run out:
		// the shortest lock the broker allows (group.share.min.record.lock.duration.ms).
		{"share.record.lock.duration.ms", "15000"},
		{"errors.deadletterqueue.topic.name", dlqTopic},
		{"share.delivery.count.limit", "5"},
		{"share.retry.backoff.initial.ms", "2000"},
		{"share.retry.backoff.multiplier", "2"},
		{"share.retry.backoff.max.ms", "16000"},
		{"share.retry.backoff.jitter", "0.2"},
	} {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = kv[0], kmsg.StringPtr(kv[1])
		res.Configs = append(res.Configs, rc)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("configuring group %s: %w", shipGroup, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = ": " + *r.ErrorMessage
			}
			return fmt.Errorf("configuring group %s: %w%s", shipGroup, err, msg)
		}
	}
	s, err := openStore(c.db, c.postgres)
	if err != nil {
		return err
	}
	defer s.db.Close()
	return s.migrate(ctx)
}

// ordersCmd is the order service: POST /orders writes the order and its
// event in one transaction.
func ordersCmd(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("orders", flag.ExitOnError)
	c.register(fs)
	_ = fs.Parse(args)
	s, err := openStore(c.db, c.postgres)
	if err != nil {
		return err
	}
	defer s.db.Close()
	log := logger("orders")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		var o Order
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil || o.Customer == "" || o.TotalCents <= 0 {
			http.Error(w, `give {"customer": "...", "total_cents": n > 0}`, http.StatusBadRequest)
			return
		}
		var b [6]byte
		_, _ = rand.Read(b[:])
		o.ID = "HC-" + hex.EncodeToString(b[:])
		o.CreatedMs = time.Now().UnixMilli()
		payload, _ := json.Marshal(o)
		tx, err := s.db.BeginTx(r.Context(), nil)
		if err == nil {
			_, err = tx.ExecContext(r.Context(), s.q(`INSERT INTO orders (id, customer, total_cents, created_ms) VALUES (?, ?, ?, ?)`),
				o.ID, o.Customer, o.TotalCents, o.CreatedMs)
			if err == nil {
				_, err = s.ob.Add(r.Context(), tx, outbox.Message{Topic: ordersTopic, Key: []byte("order:" + o.ID), Value: payload,
					EventID: "order-placed-" + o.ID,
					Headers: []kgo.RecordHeader{{Key: event.HeaderContentType, Value: []byte(event.JSON)}}})
			}
			if err == nil {
				err = tx.Commit()
			} else {
				tx.Rollback()
			}
		}
		if err != nil {
			log.Warn("order not placed", "err", err)
			http.Error(w, "order not placed: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(payload)
	})
	srv := &http.Server{Addr: c.http, Handler: mux}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info("order service listening", "http", c.http)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return ctx.Err()
}

// relayCmd publishes the outbox.
func relayCmd(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("relay", flag.ExitOnError)
	c.register(fs)
	_ = fs.Parse(args)
	s, err := openStore(c.db, c.postgres)
	if err != nil {
		return err
	}
	defer s.db.Close()
	r, err := s.ob.NewRelay(s.db, outbox.RelayOptions{Idle: 20 * time.Millisecond, Logger: logger("relay"),
		Producer: []kgo.Opt{kgo.SeedBrokers(c.seeds()...)}})
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Run(ctx)
}

// consumerCmd runs one consumer group on orders: its effect once per
// order through the inbox, failures through the retry topics.
func consumerCmd(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("consumer", flag.ExitOnError)
	c.register(fs)
	group := fs.String("group", "email-notifier", "email-notifier, sales-analytics or fraud-monitor")
	_ = fs.Parse(args)
	s, err := openStore(c.db, c.postgres)
	if err != nil {
		return err
	}
	defer s.db.Close()
	var effect func(ctx context.Context, tx *sql.Tx, o Order) error
	switch *group {
	case "email-notifier":
		effect = func(ctx context.Context, tx *sql.Tx, o Order) error {
			_, err := tx.ExecContext(ctx, s.q(`INSERT INTO emails (order_id, sent_ms) VALUES (?, ?)`), o.ID, time.Now().UnixMilli())
			return err
		}
	case "sales-analytics":
		effect = func(ctx context.Context, tx *sql.Tx, o Order) error {
			day := time.UnixMilli(o.CreatedMs).UTC().Format("2006-01-02")
			_, err := tx.ExecContext(ctx, s.q(`INSERT INTO revenue (day, order_id, cents) VALUES (?, ?, ?)`), day, o.ID, o.TotalCents)
			return err
		}
	case "fraud-monitor":
		effect = func(ctx context.Context, tx *sql.Tx, o Order) error {
			if o.TotalCents <= fraudCents {
				return nil
			}
			_, err := tx.ExecContext(ctx, s.q(`INSERT INTO fraud_flags (order_id, reason) VALUES (?, ?)`), o.ID,
				fmt.Sprintf("total %d cents over %d", o.TotalCents, fraudCents))
			return err
		}
	default:
		return fmt.Errorf("no group %q: use email-notifier, sales-analytics or fraud-monitor", *group)
	}
	log := logger(*group)
	db := breaker.New(breaker.Options{Name: *group + "-db", Failures: 5, OpenFor: 5 * time.Second, Logger: log})
	cons, err := retry.New(retry.Config{Topic: ordersTopic, Group: *group, DLQTopic: dlqTopic, OrderedKeys: true,
		Breaker: db, Logger: log, Client: []kgo.Opt{kgo.SeedBrokers(c.seeds()...),
			// A consumer killed without leaving its group holds its
			// partitions until its session times out: keep that short.
			kgo.SessionTimeout(6 * time.Second), kgo.RebalanceTimeout(10 * time.Second)}},
		func(ctx context.Context, r *kgo.Record) error {
			var o Order
			if err := json.Unmarshal(r.Value, &o); err != nil {
				return retry.Permanent(fmt.Errorf("not an order: %w", err))
			}
			_, err := s.ib.Process(ctx, s.db, *group, r, func(tx *sql.Tx) error { return effect(ctx, tx, o) })
			return err
		})
	if err != nil {
		return err
	}
	defer cons.Close()
	log.Info("consuming", "topic", ordersTopic)
	return cons.Run(ctx)
}

// workerCmd is a shipment worker: each order is one shipment job, taken
// by one worker of the share group.
func workerCmd(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	c.register(fs)
	name := fs.String("name", "", "the worker's name in the shipments table (default: its pid)")
	_ = fs.Parse(args)
	if *name == "" {
		*name = fmt.Sprintf("worker-%d", os.Getpid())
	}
	s, err := openStore(c.db, c.postgres)
	if err != nil {
		return err
	}
	defer s.db.Close()
	log := logger("worker")
	w, err := worker.New(func(ctx context.Context, r *kgo.Record) error {
		var o Order
		if err := json.Unmarshal(r.Value, &o); err != nil {
			return worker.Permanent(fmt.Errorf("not an order: %w", err))
		}
		_, err := s.ib.Process(ctx, s.db, shipGroup, r, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, s.q(`INSERT INTO shipments (order_id, worker, shipped_ms) VALUES (?, ?, ?)`), o.ID, *name, time.Now().UnixMilli())
			return err
		})
		return err
	}, worker.Options{Group: shipGroup, Topics: []string{ordersTopic}, Concurrency: 8, Logger: log,
		Breaker: breaker.New(breaker.Options{Name: "warehouse-db", Logger: log}),
		OnDone: func(res worker.Result) {
			if res.Err != nil { // released for a later attempt, or rejected: say why
				log.Warn("shipment job failed", "outcome", res.Outcome, "partition", res.Record.Partition, "offset", res.Record.Offset,
					"delivery", res.Record.DeliveryCount(), "took", res.Took.Round(time.Millisecond), "err", res.Err)
			}
		}},
		kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		return err
	}
	log.Info("taking shipment jobs", "group", shipGroup)
	return w.Run(ctx)
}
