package main

// RabbitMQ quorum queues over AMQP 0-9-1: publisher confirms, persistent
// messages, consumers with manual acks (basic.ack per message) and a
// basic.qos prefetch.

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

type rabbit struct {
	o    options
	conn *amqp.Connection
	ch   *amqp.Channel // for declaring and deleting queues
}

func newRabbit(o options) (peer, error) {
	conn, err := amqp.Dial("amqp://guest:guest@" + o.addr + "/")
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &rabbit{o: o, conn: conn, ch: ch}, nil
}

func (r *rabbit) setup(_ context.Context, name string) error {
	_, err := r.ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	return err
}

func (r *rabbit) teardown(_ context.Context, name string) error {
	_, err := r.ch.QueueDelete(name, false, false, false)
	return err
}

func (r *rabbit) close() { r.conn.Close() }

// drained cannot tell: AMQP shows a queue's ready messages, not whether
// its acks are settled.
func (r *rabbit) drained(context.Context, string) error { return nil }

// confirmChannel opens a connection with a channel in confirm mode.
func (r *rabbit) confirmChannel() (*amqp.Connection, *amqp.Channel, error) {
	conn, err := amqp.Dial("amqp://guest:guest@" + r.o.addr + "/")
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, ch, nil
}

func publishing(body []byte) amqp.Publishing {
	return amqp.Publishing{Body: body, DeliveryMode: amqp.Persistent, ContentType: "application/octet-stream"}
}

// preload publishes n jobs keeping at most 2,000 unconfirmed (as the
// shared peer harness does).
func (r *rabbit) preload(ctx context.Context, name string, n int64, base []byte) error {
	conn, ch, err := r.confirmChannel()
	if err != nil {
		return err
	}
	defer conn.Close()
	const window = 2000
	var pending []*amqp.DeferredConfirmation
	wait := func(dc *amqp.DeferredConfirmation) error {
		if ok, err := dc.WaitContext(ctx); err != nil {
			return err
		} else if !ok {
			return errors.New("publish nacked")
		}
		return nil
	}
	for seq := range uint64(n) {
		job := stamp(append([]byte(nil), base...), seq)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", name, false, false, publishing(job))
		if err != nil {
			return err
		}
		pending = append(pending, dc)
		if len(pending) >= window {
			if err := wait(pending[0]); err != nil {
				return err
			}
			pending = pending[1:]
		}
	}
	for _, dc := range pending {
		if err := wait(dc); err != nil {
			return err
		}
	}
	return nil
}

func (r *rabbit) publisher(ctx context.Context, name string) (func([]byte) error, func() error, error) {
	conn, ch, err := r.confirmChannel()
	if err != nil {
		return nil, nil, err
	}
	confirms := make(chan *amqp.DeferredConfirmation, 1<<16)
	errc := make(chan error, 1)
	go func() {
		var first error
		for dc := range confirms {
			if ok, err := dc.WaitContext(ctx); (err != nil || !ok) && first == nil {
				first = fmt.Errorf("publish not confirmed (%v)", err)
			}
		}
		errc <- first
	}()
	publish := func(job []byte) error {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", name, false, false, publishing(job))
		if err != nil {
			return err
		}
		confirms <- dc
		return nil
	}
	closeFn := func() error {
		close(confirms)
		err := <-errc
		conn.Close()
		return err
	}
	return publish, closeFn, nil
}

type rabbitWorker struct {
	conn *amqp.Connection
	ch   *amqp.Channel
	dels <-chan amqp.Delivery
}

func (r *rabbit) worker(_ context.Context, name string, _ bool) (worker, error) {
	conn, err := amqp.Dial("amqp://guest:guest@" + r.o.addr + "/")
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Qos(r.o.prefetch, 0, false)
	}
	var dels <-chan amqp.Delivery
	if err == nil {
		dels, err = ch.Consume(name, "", false, false, false, false, nil)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &rabbitWorker{conn: conn, ch: ch, dels: dels}, nil
}

// consume acknowledges every delivery with basic.ack (not multiple).
// basic.ack has no answer; when ctx ends, closing the channel
// (channel.close / close-ok) is the round trip that follows the last ack.
func (w *rabbitWorker) consume(ctx context.Context, handle func([]byte, time.Duration)) error {
	var err error
loop:
	for {
		select {
		case d, ok := <-w.dels:
			if !ok {
				err = errors.New("delivery channel closed")
				break loop
			}
			if aerr := d.Ack(false); aerr != nil {
				err = aerr
				break loop
			}
			handle(d.Body, -1)
		case <-ctx.Done():
			break loop
		}
	}
	// amqp091 blocks Channel.Close while deliveries are undrained.
	go func() {
		for range w.dels {
		}
	}()
	done := make(chan error, 1)
	go func() { done <- w.ch.Close() }()
	select {
	case cerr := <-done:
		if err == nil && cerr != nil && !errors.Is(cerr, amqp.ErrClosed) {
			err = cerr
		}
	case <-time.After(10 * time.Second):
	}
	return err
}

func (w *rabbitWorker) close() { w.conn.Close() }
