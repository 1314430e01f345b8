// Command shipments is the shipment-jobs work queue of Berth's docs
// (docs/queues.md): an order service produces one job per shipment, keyed
// by shipment ID, and workers "book a carrier" for each job with
// pkg/worker. Booking fails transiently now and then (the carrier API
// times out: the job is released and retried after the broker's backoff)
// and permanently for a bad address (the job is rejected and parked in the
// dead-letter topic with the error text).
//
//	go run ./examples/shipments setup
//	go run ./examples/shipments work -concurrency 4
//	go run ./examples/shipments produce -n 20
//
// See examples/shipments/README.md for the whole walk-through against
// `berth serve`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/pkg/worker"
)

// Job is one shipment to book.
type Job struct {
	ShipmentID string `json:"shipment_id"`
	OrderID    string `json:"order_id"`
	Address    string `json:"address"`
	Parcels    int    `json:"parcels"`
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "setup":
		err = setup(ctx, os.Args[2:])
	case "produce":
		err = produce(ctx, os.Args[2:])
	case "work":
		err = work(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  shipments setup [-brokers B] [-topic T] [-group G] [-partitions P]
                                                                    create the topics, set the group's configs
  shipments produce [-brokers B] [-topic T] [-n N] [-bad-every K]   produce N shipment jobs
  shipments work [-brokers B] [-topic T] [-group G] [-concurrency C] [-fail-rate F]
                                                                    book carriers until Ctrl-C`)
	os.Exit(2)
}

// setup creates the work queue's topic and its dead-letter topic, and
// sets the share group's configs: start at the earliest job, park
// rejected and exhausted jobs in the DLQ topic, retry after 2 s, 4 s,
// 8 s, 16 s (±20%), give up after 5 deliveries. The same as
//
//	berth topic create shipment-jobs --partitions 3
//	berth topic create dlq.shipment-jobs --config errors.deadletterqueue.group.enable=true
//	kafka-configs.sh --bootstrap-server 127.0.0.1:9092 --alter --entity-type groups --entity-name shippers \
//	  --add-config share.auto.offset.reset=earliest,errors.deadletterqueue.topic.name=dlq.shipment-jobs,...
func setup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("setup", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma-separated")
	topic := fs.String("topic", "shipment-jobs", "the work queue's topic")
	group := fs.String("group", "shippers", "the share group of the workers")
	partitions := fs.Int("partitions", 3, "partitions of the work queue's topic")
	_ = fs.Parse(args)

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	dlq := "dlq." + *topic
	enable := "true"
	for _, t := range []struct {
		name       string
		partitions int32
		configs    map[string]*string
	}{
		{*topic, int32(*partitions), nil},
		{dlq, 1, map[string]*string{"errors.deadletterqueue.group.enable": &enable}},
	} {
		resp, err := adm.CreateTopic(ctx, t.partitions, -1, t.configs, t.name)
		if err == nil {
			err = resp.Err
		}
		switch {
		case errors.Is(err, kerr.TopicAlreadyExists):
			fmt.Printf("topic %s exists\n", t.name)
		case err != nil:
			return fmt.Errorf("creating topic %s: %w", t.name, err)
		default:
			fmt.Printf("created topic %s (%d partitions)\n", t.name, t.partitions)
		}
	}

	configs := [][2]string{
		{"share.auto.offset.reset", "earliest"},
		{"errors.deadletterqueue.topic.name", dlq},
		{"share.delivery.count.limit", "5"},
		{"share.retry.backoff.initial.ms", "2000"},
		{"share.retry.backoff.multiplier", "2"},
		{"share.retry.backoff.max.ms", "16000"},
		{"share.retry.backoff.jitter", "0.2"},
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, *group
	for _, kv := range configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("setting the configs of group %s: %w", *group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = ": " + *r.ErrorMessage
			}
			return fmt.Errorf("setting the configs of group %s: %w%s", *group, err, msg)
		}
	}
	for _, kv := range configs {
		fmt.Printf("group %s: %s=%s\n", *group, kv[0], kv[1])
	}
	return nil
}

// produce writes n jobs, keyed by shipment ID (so the jobs of a shipment
// stay in one partition); every k-th has an address no carrier accepts.
func produce(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma-separated")
	topic := fs.String("topic", "shipment-jobs", "the work queue's topic")
	n := fs.Int("n", 20, "jobs to produce")
	badEvery := fs.Int("bad-every", 7, "every k-th job has a bad address (0: none)")
	first := fs.Int("first", 2048, "number of the first shipment (ship-HC-<n>)")
	_ = fs.Parse(args)

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.DefaultProduceTopic(*topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range *n {
		j := Job{
			ShipmentID: fmt.Sprintf("ship-HC-%d", *first+i),
			OrderID:    fmt.Sprintf("order-%d", 90000+*first+i),
			Address:    "1 Harbour Street, Portsmouth PO1 3LJ",
			Parcels:    1 + i%3,
		}
		if *badEvery > 0 && (i+1)%*badEvery == 0 {
			j.Address = "Nowhere Lane, ??"
		}
		v, _ := json.Marshal(j)
		recs = append(recs, &kgo.Record{Key: []byte(j.ShipmentID), Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	fmt.Printf("produced %d shipment jobs to %s (ship-HC-%d .. ship-HC-%d)\n", *n, *topic, *first, *first+*n-1)
	return nil
}

// errBadAddress: no carrier can deliver there; retrying cannot help.
var errBadAddress = errors.New("bad address")

// carrier books shipments. Booking is idempotent: a shipment already
// booked is not booked again (the effect is keyed by shipment ID), so a
// job delivered twice (at least once delivery) books one parcel pickup.
// A real service would keep the bookings in its database.
type carrier struct {
	failRate float64
	mu       sync.Mutex
	booked   map[string]string // shipment ID → booking reference
}

func (c *carrier) book(ctx context.Context, j Job) (string, error) {
	c.mu.Lock()
	ref, done := c.booked[j.ShipmentID]
	c.mu.Unlock()
	if done {
		return ref, nil // delivered again after a lost ack: already booked
	}
	if strings.Contains(j.Address, "??") {
		return "", fmt.Errorf("%w: carrier API: 422 cannot geocode %q", errBadAddress, j.Address)
	}
	select { // the carrier API call
	case <-time.After(time.Duration(50+rand.IntN(250)) * time.Millisecond):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if rand.Float64() < c.failRate {
		return "", errors.New("carrier API: 503 timed out")
	}
	h := fnv.New32a()
	h.Write([]byte(j.ShipmentID))
	ref = fmt.Sprintf("BK-%08X", h.Sum32())
	c.mu.Lock()
	c.booked[j.ShipmentID] = ref
	c.mu.Unlock()
	return ref, nil
}

// work runs a worker until Ctrl-C.
func work(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("work", flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma-separated")
	topic := fs.String("topic", "shipment-jobs", "the work queue's topic")
	group := fs.String("group", "shippers", "the share group of the workers")
	concurrency := fs.Int("concurrency", 4, "jobs booked at once")
	failRate := fs.Float64("fail-rate", 0.2, "share of carrier calls that time out (transient)")
	_ = fs.Parse(args)

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c := &carrier{failRate: *failRate, booked: map[string]string{}}
	w, err := worker.New(func(ctx context.Context, r *kgo.Record) error {
		var j Job
		if err := json.Unmarshal(r.Value, &j); err != nil {
			return worker.Permanent(fmt.Errorf("job %s@%d is not JSON: %w", r.Topic, r.Offset, err))
		}
		ref, err := c.book(ctx, j)
		if errors.Is(err, errBadAddress) {
			return worker.Permanent(fmt.Errorf("booking %s: %w", j.ShipmentID, err))
		}
		if err != nil {
			return fmt.Errorf("booking %s (attempt %d): %w", j.ShipmentID, r.DeliveryCount(), err)
		}
		fmt.Printf("booked   %s  %s  attempt %d\n", j.ShipmentID, ref, r.DeliveryCount())
		return nil
	}, worker.Options{
		Group:       *group,
		Topics:      []string{*topic},
		Concurrency: *concurrency,
		Logger:      log,
		OnDone: func(res worker.Result) {
			switch res.Outcome {
			case worker.Released:
				fmt.Printf("retry    %s  %v\n", res.Record.Key, res.Err)
			case worker.Rejected:
				fmt.Printf("parked   %s  %v\n", res.Record.Key, res.Err)
			case worker.Abandoned:
				fmt.Printf("released %s  (shutting down)\n", res.Record.Key)
			}
		},
	}, kgo.SeedBrokers(strings.Split(*brokers, ",")...))
	if err != nil {
		return err
	}
	fmt.Printf("booking carriers for %s as group %s, %d at a time; Ctrl-C stops\n", *topic, *group, *concurrency)
	return w.Run(ctx)
}
