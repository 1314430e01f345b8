package retry_test

import (
	"context"
	"errors"
	"log"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/pkg/breaker"
	"github.com/berthmq/berth/pkg/retry"
)

// The email notifier of the orders topic: failed sends go through
// orders.retry.2s ... orders.retry.16s to orders.dlq, a key's later
// orders wait behind a failing one, and a breaker pauses the consumer
// while the mail server is down. (Not run: it needs a broker.)
func Example() {
	mail := breaker.New(breaker.Options{Name: "mail-server"})
	c, err := retry.New(retry.Config{
		Topic: "orders", Group: "email-notifier", OrderedKeys: true, Breaker: mail,
		Client: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")},
	}, func(ctx context.Context, r *kgo.Record) error {
		if len(r.Value) == 0 {
			return retry.Permanent(errors.New("empty order")) // straight to orders.dlq
		}
		return sendEmail(ctx, r.Value) // an error: retried later
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_ = c.Run(context.Background())
}

func sendEmail(context.Context, []byte) error { return nil }
