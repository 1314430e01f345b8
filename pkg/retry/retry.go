// Package retry gives an ordinary consumer group non-blocking retries and
// a dead-letter topic: a record whose handler fails is copied to a retry
// topic and its offset committed, so the partition goes on; the retry
// topic's consumer runs it again once its delay has passed, then the next
// retry topic, then the dead-letter topic:
//
//	orders → orders.retry.2s → orders.retry.4s → orders.retry.8s → orders.retry.16s → orders.dlq
//
// The retry and dead-letter topics are the topic's, shared by every group
// that reads it with this package: a copy names its group
// (__dlq.errors.group) and each group's retry consumers skip the others'.
//
// Copies carry the record's key, value and headers (its event-id among
// them) and the dead-letter context headers Berth's share-group DLQ
// writes (__dlq.errors.topic, .partition, .offset, .group,
// .delivery.count, .message, .berth.reason, .berth.timestamp,
// .berth.client.error: the handler's error), so `berth
// dlq` lists, inspects and redrives the dead-letter topic as it does a
// work queue's (it is created with errors.deadletterqueue.group.enable=true).
//
// Use it where a share group (a work queue, pkg/worker) does not fit
// because order per key matters to most records. Retries reorder: a
// record in retry is handled after later records of its partition. With
// Config.OrderedKeys, later records of a key in retry are held back behind
// it (they follow it through the retry topics and are handled after it),
// which keeps a key's order at the cost of delaying the key; strict
// first-in-first-out and retries conflict, and this is the trade-off the
// option makes. The holding is tracked in the consumer's memory: it holds
// across the partitions one process consumes, and a restart or a
// rebalance that moves a key's retry topic partition to another process
// can let a held record run before the one it waited for.
//
// A Breaker (Config.Breaker) stops attempts while a dependency is down:
// after consecutive failures it opens, and the consumer pauses (stops
// handling records, its offsets stay) until a probe succeeds.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/pkg/berthmsg"
	"github.com/berthmq/berth/pkg/breaker"
)

// Handler handles one record; an error sends it to the next retry topic
// (or, wrapped by Permanent, straight to the dead-letter topic).
type Handler func(ctx context.Context, r *kgo.Record) error

// Config describes a consumer with retry topics.
type Config struct {
	// Topic is the topic consumed; Group the consumer group.
	Topic, Group string
	// Delays are the waits before each retry (default 2 s, 4 s, 8 s,
	// 16 s): one retry topic each. A record is attempted len(Delays)+1
	// times before it is dead-lettered.
	Delays []time.Duration
	// RetryTopic names the retry topic of a delay (default
	// "<topic>.retry.<delay>", e.g. orders.retry.2s).
	RetryTopic func(topic string, delay time.Duration) string
	// DLQTopic is the dead-letter topic (default "<topic>.dlq").
	DLQTopic string
	// CreateTopics creates the retry and dead-letter topics when missing,
	// with the main topic's partitions (default true; set SkipCreate to
	// turn it off). DLQRetention is the dead-letter topic's retention.ms
	// (default 14 days).
	SkipCreate   bool
	DLQRetention time.Duration
	// OrderedKeys holds later records of a key in retry behind it.
	OrderedKeys bool
	// Breaker, if set, pauses the consumer while the dependency it
	// guards is failing.
	Breaker *breaker.Breaker
	// Client are the kgo options every client of the consumer gets (seed
	// brokers, TLS, SASL).
	Client []kgo.Opt
	Logger *slog.Logger
}

// Consumer consumes Config.Topic and its retry topics.
type Consumer struct {
	cfg    Config
	h      Handler
	tiers  []tier // 0: the main topic; i: the i-th retry topic
	prod   *kgo.Client
	log    *slog.Logger
	mu     sync.Mutex
	queue  map[string][]string // key -> its records in retry, oldest first (OrderedKeys)
	counts struct {
		sync.Mutex
		retried, dead, held int64
	}
}

type tier struct {
	topic string
	delay time.Duration
	cl    *kgo.Client
}

type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Permanent wraps err so the record goes to the dead-letter topic without
// further retries. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// DefaultDelays are the retry delays when Config.Delays is empty.
var DefaultDelays = []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}

// RetryTopicName is the default retry topic name: "<topic>.retry.<delay>".
func RetryTopicName(topic string, delay time.Duration) string {
	return topic + ".retry." + delay.String()
}

// New returns a consumer of cfg.Topic that runs h, with its retry topics.
func New(cfg Config, h Handler) (*Consumer, error) {
	if cfg.Topic == "" || cfg.Group == "" {
		return nil, errors.New("retry: a topic and a group are needed")
	}
	if len(cfg.Delays) == 0 {
		cfg.Delays = DefaultDelays
	}
	if cfg.RetryTopic == nil {
		cfg.RetryTopic = RetryTopicName
	}
	if cfg.DLQTopic == "" {
		cfg.DLQTopic = cfg.Topic + ".dlq"
	}
	if cfg.DLQRetention == 0 {
		cfg.DLQRetention = 14 * 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Consumer{cfg: cfg, h: h, queue: map[string][]string{}, log: cfg.Logger.With("topic", cfg.Topic, "group", cfg.Group)}
	prod, err := kgo.NewClient(append(append([]kgo.Opt{}, cfg.Client...), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return nil, fmt.Errorf("retry: %w", err)
	}
	c.prod = prod
	topics := []string{cfg.Topic}
	for _, d := range cfg.Delays {
		name := cfg.RetryTopic(cfg.Topic, d)
		if slices.Contains(topics, name) || name == cfg.DLQTopic {
			prod.Close()
			return nil, fmt.Errorf("retry: two retry topics named %s: give each delay its own name (distinct delays, or Config.RetryTopic)", name)
		}
		topics = append(topics, name)
	}
	for i, t := range topics {
		group := cfg.Group
		delay := time.Duration(0)
		if i > 0 {
			group = cfg.Group + "." + t // its own group: its own offsets and lag
			delay = cfg.Delays[i-1]
		}
		cl, err := kgo.NewClient(append(append([]kgo.Opt{}, cfg.Client...),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(t), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.BlockRebalanceOnPoll())...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("retry: %w", err)
		}
		c.tiers = append(c.tiers, tier{topic: t, delay: delay, cl: cl})
	}
	return c, nil
}

// Close leaves the groups and closes the clients.
func (c *Consumer) Close() {
	for _, t := range c.tiers {
		t.cl.Close()
	}
	if c.prod != nil {
		c.prod.Close()
	}
}

// Stats counts what the consumer did.
type Stats struct {
	Retried int64 // copies sent to a retry topic
	Dead    int64 // records sent to the dead-letter topic
	Held    int64 // records held back behind their key (OrderedKeys)
}

// Stats returns the consumer's counts.
func (c *Consumer) Stats() Stats {
	c.counts.Lock()
	defer c.counts.Unlock()
	return Stats{c.counts.retried, c.counts.dead, c.counts.held}
}

// Run creates the missing topics (unless SkipCreate), then consumes the
// main topic and every retry topic until ctx is done.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.cfg.SkipCreate {
		if err := c.createTopics(ctx); err != nil {
			return err
		}
	}
	errs := make(chan error, len(c.tiers))
	for i := range c.tiers {
		go func() { errs <- c.consume(ctx, i) }()
	}
	var first error
	for range c.tiers {
		if err := <-errs; err != nil && first == nil && ctx.Err() == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return ctx.Err()
}

func (c *Consumer) createTopics(ctx context.Context) error {
	adm := kadm.NewClient(c.prod)
	td, err := adm.ListTopics(ctx, c.cfg.Topic)
	if err != nil {
		return fmt.Errorf("retry: describe %s: %w", c.cfg.Topic, err)
	}
	main, ok := td[c.cfg.Topic]
	if !ok || main.Err != nil {
		return fmt.Errorf("retry: topic %s does not exist: create it first", c.cfg.Topic)
	}
	parts := int32(len(main.Partitions))
	create := func(name string, configs map[string]*string) error {
		res, err := adm.CreateTopic(ctx, parts, -1, configs, name)
		if err == nil {
			err = res.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("retry: create %s: %w", name, err)
		}
		return nil
	}
	for _, t := range c.tiers[1:] {
		if err := create(t.topic, nil); err != nil {
			return err
		}
	}
	ret := strconv.FormatInt(c.cfg.DLQRetention.Milliseconds(), 10)
	enable := "true"
	return create(c.cfg.DLQTopic, map[string]*string{"retention.ms": &ret, berthmsg.TopicConfigDLQGroupEnable: &enable})
}

// consume runs tier i's loop: poll, handle every record in order (waiting
// out a retry topic's delay first), commit what was handled.
func (c *Consumer) consume(ctx context.Context, i int) error {
	t := c.tiers[i]
	for {
		fs := t.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.cl.AllowRebalance()
			return nil
		}
		fs.EachError(func(topic string, p int32, err error) {
			c.log.Warn("retry: fetch", "topic", topic, "partition", p, "err", err)
		})
		var done []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			// handle fails only when ctx is done: nothing after a
			// failure is handled, so nothing past it is committed.
			if ctx.Err() != nil {
				return
			}
			if err := c.handle(ctx, i, r); err != nil {
				c.log.Warn("retry: record not forwarded; it will be handled again", "topic", r.Topic,
					"partition", r.Partition, "offset", r.Offset, "err", err)
				return
			}
			done = append(done, r)
		})
		if len(done) > 0 {
			if err := t.cl.CommitRecords(context.WithoutCancel(ctx), done...); err != nil {
				c.log.Warn("retry: commit", "topic", t.topic, "err", err)
			}
		}
		t.cl.AllowRebalance()
	}
}

// handle runs the handler on r (from tier i) or forwards it; an error
// means it was neither done nor forwarded.
func (c *Consumer) handle(ctx context.Context, i int, r *kgo.Record) error {
	t := c.tiers[i]
	if t.delay > 0 {
		due := r.Timestamp.Add(t.delay)
		if wait := time.Until(due); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
	}
	if i > 0 && header(r, berthmsg.HeaderDLQGroup) != c.cfg.Group {
		return nil // another group's retry: the retry topics are shared by the topic's groups
	}
	key := string(r.Key)
	ordered := c.cfg.OrderedKeys && r.Key != nil
	id := ticketOf(r, i)
	if ordered {
		c.mu.Lock()
		q := c.queue[key]
		switch {
		case i == 0 && len(q) > 0:
			// Earlier records of the key are in retry: this one joins
			// them, unattempted.
			c.queue[key] = append(q, id)
			c.mu.Unlock()
			c.count(&c.counts.held)
			return c.forward(ctx, i, r, errors.New("held back: an earlier record of its key is in retry"), true)
		case i > 0 && i < len(c.tiers)-1 && len(q) > 0 && q[0] != id && slices.Contains(q, id):
			// (In the last retry topic the earlier record was ahead of
			// it in the same partition, so it is done by now.)
			// An earlier record of the key is further along: follow it.
			c.mu.Unlock()
			return c.forward(ctx, i, r, errors.New("held back: an earlier record of its key is in retry"), true)
		}
		c.mu.Unlock()
	}
	if b := c.cfg.Breaker; b != nil {
		if err := b.Wait(ctx); err != nil {
			return err
		}
	}
	err := c.h(ctx, r)
	if b := c.cfg.Breaker; b != nil {
		b.Record(err)
	}
	if err == nil {
		c.done(ordered, key, id)
		return nil
	}
	var p *permanent
	if errors.As(err, &p) || i == len(c.tiers)-1 {
		if ferr := c.deadLetter(ctx, i, r, err, errors.As(err, &p)); ferr != nil {
			return ferr
		}
		c.done(ordered, key, id)
		return nil
	}
	if ordered && i == 0 {
		c.mu.Lock()
		c.queue[key] = append(c.queue[key], id)
		c.mu.Unlock()
	}
	return c.forward(ctx, i, r, err, false)
}

// ticketOf identifies the record a copy came from: the main topic's
// coordinates.
func ticketOf(r *kgo.Record, i int) string {
	if i == 0 {
		return r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "@" + strconv.FormatInt(r.Offset, 10)
	}
	return header(r, berthmsg.HeaderDLQTopic) + "/" + header(r, berthmsg.HeaderDLQPartition) + "@" + header(r, berthmsg.HeaderDLQOffset)
}

// done ends a record's time in retry (OrderedKeys): it leaves its key's
// queue, and the next one may run.
func (c *Consumer) done(ordered bool, key, id string) {
	if !ordered {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queue[key]
	if k := slices.Index(q, id); k >= 0 {
		q = slices.Delete(q, k, k+1)
	}
	if len(q) == 0 {
		delete(c.queue, key)
	} else {
		c.queue[key] = q
	}
}

func (c *Consumer) count(n *int64) {
	c.counts.Lock()
	*n++
	c.counts.Unlock()
}

const (
	headerHeld    = "__retry.held"
	reasonRetry   = "retry"
	reasonLimit   = "delivery limit reached"
	reasonReject  = "rejected"
	maxErrorBytes = 16 << 10
)

// forward copies r to the retry topic after tier i.
func (c *Consumer) forward(ctx context.Context, i int, r *kgo.Record, cause error, held bool) error {
	next := c.tiers[i+1].topic
	out := c.copyOf(r, i, cause, reasonRetry)
	out.Topic = next
	out.Headers = setHeader(out.Headers, headerHeld, map[bool]string{true: "1", false: "0"}[held])
	if err := c.produce(ctx, out); err != nil {
		return err
	}
	if !held {
		c.count(&c.counts.retried)
	}
	return nil
}

// deadLetter copies r to the dead-letter topic.
func (c *Consumer) deadLetter(ctx context.Context, i int, r *kgo.Record, cause error, permanent bool) error {
	reason := reasonLimit
	if permanent {
		reason = reasonReject
	}
	out := c.copyOf(r, i, cause, reason)
	out.Topic = c.cfg.DLQTopic
	if err := c.produce(ctx, out); err != nil {
		return err
	}
	c.count(&c.counts.dead)
	c.log.Warn("retry: record dead-lettered", "dlq", c.cfg.DLQTopic, "source_topic", header(r, berthmsg.HeaderDLQTopic),
		"attempts", i+1, "reason", reason, "err", cause)
	return nil
}

// produce writes a copy, trying again (with a growing pause, up to 5 s)
// until it is written or ctx is done: the source record's offset is
// committed only after its copy is written, and a record after it in its
// partition may not be committed before it, so a copy is never given up.
func (c *Consumer) produce(ctx context.Context, out *kgo.Record) error {
	backoff := 100 * time.Millisecond
	for {
		err := c.prod.ProduceSync(ctx, out).FirstErr()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("retry: to %s: %w", out.Topic, err)
		}
		c.log.Warn("retry: writing a copy failed; trying again", "topic", out.Topic, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// copyOf is r with the dead-letter context headers: where it came from
// (kept from the first copy), how often it was attempted, why.
func (c *Consumer) copyOf(r *kgo.Record, i int, cause error, reason string) *kgo.Record {
	hs := append([]kgo.RecordHeader(nil), r.Headers...)
	if i == 0 {
		hs = setHeader(hs, berthmsg.HeaderDLQTopic, r.Topic)
		hs = setHeader(hs, berthmsg.HeaderDLQPartition, strconv.Itoa(int(r.Partition)))
		hs = setHeader(hs, berthmsg.HeaderDLQOffset, strconv.FormatInt(r.Offset, 10))
		hs = setHeader(hs, berthmsg.HeaderDLQTimestamp, strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
	}
	msg := cause.Error()
	if len(msg) > maxErrorBytes {
		msg = msg[:maxErrorBytes]
	}
	hs = setHeader(hs, berthmsg.HeaderDLQGroup, c.cfg.Group)
	hs = setHeader(hs, berthmsg.HeaderDLQDeliveryCount, strconv.Itoa(i+1))
	hs = setHeader(hs, berthmsg.HeaderDLQMessage, msg)
	hs = setHeader(hs, berthmsg.HeaderDLQClientError, msg) // what `berth dlq inspect` shows
	hs = setHeader(hs, berthmsg.HeaderDLQReason, reason)
	// The copy's timestamp is now: a retry topic's delay counts from it.
	return &kgo.Record{Key: r.Key, Value: r.Value, Headers: hs, Timestamp: time.Now()}
}

func header(r *kgo.Record, key string) string {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value)
		}
	}
	return ""
}

func setHeader(hs []kgo.RecordHeader, key, v string) []kgo.RecordHeader {
	out := hs[:0:0]
	for _, h := range hs {
		if h.Key != key {
			out = append(out, h)
		}
	}
	return append(out, kgo.RecordHeader{Key: key, Value: []byte(v)})
}
