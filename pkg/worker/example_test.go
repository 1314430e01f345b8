package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/pkg/worker"
)

var errBadAddress = errors.New("bad address")

func bookCarrier(ctx context.Context, job []byte) error { return nil }

// A worker that books a carrier for each shipment job, four at a time,
// until Ctrl-C.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	w, err := worker.New(func(ctx context.Context, r *kgo.Record) error {
		err := bookCarrier(ctx, r.Value)
		switch {
		case errors.Is(err, errBadAddress):
			return worker.Permanent(fmt.Errorf("shipment %s: %w", r.Key, err)) // parked in the DLQ with this text
		case err != nil:
			return err // retried after the broker's backoff
		}
		return nil // done
	}, worker.Options{Group: "shippers", Topics: []string{"shipment-jobs"}, Concurrency: 4},
		kgo.SeedBrokers("127.0.0.1:9092"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
