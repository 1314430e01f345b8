package main

// NATS JetStream: a file-storage stream with work-queue retention (an
// acknowledged message is removed), one durable pull consumer with
// explicit acks shared by all workers, each worker its own connection.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type natsPeer struct {
	o  options
	nc *nats.Conn
	js jetstream.JetStream
}

func newNATS(o options) (peer, error) {
	nc, err := nats.Connect("nats://"+o.addr, nats.MaxReconnects(0))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsPeer{o: o, nc: nc, js: js}, nil
}

func (p *natsPeer) close() { p.nc.Close() }

func (p *natsPeer) setup(ctx context.Context, name string) error {
	s, err := p.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".jobs"}, Storage: jetstream.FileStorage, Replicas: 1,
		Retention: jetstream.WorkQueuePolicy,
	})
	if err != nil {
		return err
	}
	_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxAckPending: p.o.natsMaxPend, MaxDeliver: -1,
	})
	return err
}

// drained polls the stream and the consumer until the work-queue stream is
// empty and no ack is pending: every ack has been applied.
func (p *natsPeer) drained(ctx context.Context, name string) error {
	s, err := p.js.Stream(ctx, name)
	if err != nil {
		return err
	}
	for {
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs == 0 {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("%d jobs still in the stream: %w", info.State.Msgs, ctx.Err())
		}
	}
}

func (p *natsPeer) teardown(ctx context.Context, name string) error {
	err := p.js.DeleteStream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	return err
}

func (p *natsPeer) preload(ctx context.Context, name string, n int64, base []byte) error {
	js, err := jetstream.New(p.nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		return err
	}
	for seq := range uint64(n) {
		job := stamp(append([]byte(nil), base...), seq)
		if err := publishAsync(ctx, js, name+".jobs", job); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	s, err := p.js.Stream(ctx, name)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs != uint64(n) {
		return fmt.Errorf("stream holds %d of %d jobs after publishing", info.State.Msgs, n)
	}
	return nil
}

func (p *natsPeer) publisher(ctx context.Context, name string) (func([]byte) error, func() error, error) {
	js, err := jetstream.New(p.nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		return nil, nil, err
	}
	publish := func(job []byte) error { return publishAsync(ctx, js, name+".jobs", job) }
	closeFn := func() error {
		select {
		case <-js.PublishAsyncComplete():
			return nil
		case <-time.After(30 * time.Second):
			return errors.New("publish acks still pending after 30s")
		}
	}
	return publish, closeFn, nil
}

// publishAsync publishes, and when too many publishes await their acks
// (a stream that fsyncs every write is slower than the publisher), waits
// for them and tries again.
func publishAsync(ctx context.Context, js jetstream.JetStream, subject string, job []byte) error {
	for {
		_, err := js.PublishAsync(subject, job)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return err
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type natsWorker struct {
	nc      *nats.Conn
	it      jetstream.MessagesContext
	syncAck bool
}

func (p *natsPeer) worker(ctx context.Context, name string, syncAck bool) (worker, error) {
	nc, err := nats.Connect("nats://"+p.o.addr, nats.MaxReconnects(0))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		var c jetstream.Consumer
		if c, err = js.Consumer(ctx, name, "workers"); err == nil {
			var it jetstream.MessagesContext
			if it, err = c.Messages(jetstream.PullMaxMessages(p.o.prefetch)); err == nil {
				return &natsWorker{nc: nc, it: it, syncAck: syncAck}, nil
			}
		}
	}
	nc.Close()
	return nil, err
}

// consume acknowledges every message: Ack (no answer awaited) in the
// throughput phase, AckSync (the server's answer awaited) in the latency
// phase. When ctx ends, a connection flush (PING/PONG) is the round trip
// that follows the last ack.
func (w *natsWorker) consume(ctx context.Context, handle func([]byte, time.Duration)) error {
	stop := context.AfterFunc(ctx, w.it.Stop)
	defer stop()
	var err error
	for {
		m, nerr := w.it.Next()
		if nerr != nil {
			if !errors.Is(nerr, jetstream.ErrMsgIteratorClosed) {
				err = nerr
			}
			break
		}
		if w.syncAck {
			at := time.Now()
			if aerr := m.DoubleAck(ctx); aerr != nil {
				if ctx.Err() == nil {
					err = aerr
				}
				break
			}
			handle(m.Data(), time.Since(at))
			continue
		}
		if aerr := m.Ack(); aerr != nil {
			err = aerr
			break
		}
		handle(m.Data(), -1)
	}
	if ferr := w.nc.FlushTimeout(10 * time.Second); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

func (w *natsWorker) close() { w.nc.Close() }
