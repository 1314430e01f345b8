package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthmq/berth/internal/auth"
)

// maxBatch is the most events one write takes (one produce, one fsync).
const maxBatch = 500

// Kinds of events (auth.Event.Kind).
const (
	KindAuthentication = "authentication"
	KindAuthorization  = "authorization"
	KindManagement     = "management"
)

// Config is what a Writer needs from its node.
type Config struct {
	// Kinds are the event kinds recorded (audit.log.events); nil: all.
	Kinds map[string]bool
	// Topic writes the events to __berth_audit.
	Topic bool
	// File, if set, is a JSON-lines file every event is appended to,
	// fsynced after each batch (audit.log.file).
	File string
	// Buffer is how many events wait to be written before new ones are
	// dropped (audit.log.buffer.events).
	Buffer int
	// AggregateEvery is the interval of aggregated data-plane allows
	// (audit.log.allow.aggregation.ms).
	AggregateEvery time.Duration
	// ClusterID returns the cluster's id (the events' source).
	ClusterID func() string
	NodeID    int32
	// Ensure creates __berth_audit if it does not exist
	// (cluster.Topics.EnsureInternal with TopicSpec's settings).
	Ensure func(ctx context.Context) error
	// Sink appends records to __berth_audit (ReplicaSink.Write) and
	// returns those it could not; used when Topic is set.
	Sink   func(ctx context.Context, recs []Record) (rest []Record, err error)
	Logger *slog.Logger
}

// Metrics counts the writer's events.
type Metrics struct {
	Events  atomic.Int64 // events taken (aggregated allows count once per decision)
	Written atomic.Int64 // records appended to __berth_audit
	Dropped atomic.Int64 // events lost: buffer full, or the topic write failed
	Errors  atomic.Int64 // failed writes (topic or file)
}

// Writer implements auth.Auditor. The run goroutine owns the client, the
// file and the batch; aggMu guards the aggregation window.
type Writer struct {
	cfg     Config
	log     *slog.Logger
	Metrics Metrics

	ch     chan auth.Event
	stop   chan struct{}
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once

	aggMu    sync.Mutex
	agg      map[aggKey]*aggEntry
	aggStart time.Time

	file     *os.File
	ensured  bool
	errorLog time.Time
}

type aggKey struct {
	principal, clientID, listener, method, op, typ, name string
}

type aggEntry struct {
	first auth.Event
	count int64
}

// New returns a writer; Start starts it.
func New(cfg Config) *Writer {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 10000
	}
	if cfg.AggregateEvery <= 0 {
		cfg.AggregateEvery = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClusterID == nil {
		cfg.ClusterID = func() string { return "" }
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Writer{
		cfg: cfg, log: cfg.Logger, ch: make(chan auth.Event, cfg.Buffer),
		stop: make(chan struct{}), done: make(chan struct{}), ctx: ctx, cancel: cancel,
		agg: map[aggKey]*aggEntry{}, aggStart: time.Now(),
	}
}

// Start opens the file sink, if any, and starts writing.
func (w *Writer) Start() error {
	if w.cfg.File != "" {
		f, err := os.OpenFile(w.cfg.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("audit.log.file: %w", err)
		}
		w.file = f
	}
	go w.run()
	return nil
}

// Close writes what is buffered (waiting at most a few seconds for the
// topic) and stops the writer. Later events are dropped.
func (w *Writer) Close() {
	w.once.Do(func() {
		close(w.stop)
		select {
		case <-w.done:
		case <-time.After(5 * time.Second):
			w.cancel()
			<-w.done
		}
		w.cancel()
		if w.file != nil {
			w.file.Close()
		}
	})
}

// Audit implements auth.Auditor: it never blocks.
func (w *Writer) Audit(e auth.Event) {
	if w.cfg.Kinds != nil && !w.cfg.Kinds[e.Kind] {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	w.Metrics.Events.Add(1)
	if DataPlane(e) {
		w.aggregate(e)
		return
	}
	select {
	case <-w.stop:
		w.Metrics.Dropped.Add(1)
		return
	default:
	}
	select {
	case w.ch <- e:
	default:
		w.Metrics.Dropped.Add(1)
	}
}

// DataPlane reports an event that is aggregated rather than recorded
// one by one: an authorization allow of READ, WRITE, DESCRIBE or
// IDEMPOTENT_WRITE (what Produce, Fetch, Metadata and the group APIs
// check on every request). Denials and the admin operations (CREATE,
// DELETE, ALTER, ALTER_CONFIGS, ...) are recorded each time.
func DataPlane(e auth.Event) bool {
	if e.Kind != KindAuthorization || !e.Allowed {
		return false
	}
	switch Normalize(e.Operation) {
	case "read", "write", "describe", "idempotentwrite":
		return true
	}
	return false
}

func (w *Writer) aggregate(e auth.Event) {
	k := aggKey{e.Principal.String(), e.ClientID, e.Listener, e.Method, e.Operation, e.ResourceType, e.ResourceName}
	w.aggMu.Lock()
	if a := w.agg[k]; a != nil {
		a.count++
	} else {
		w.agg[k] = &aggEntry{first: e, count: 1}
	}
	w.aggMu.Unlock()
}

// takeAggregates ends the aggregation window at now and returns its
// events.
func (w *Writer) takeAggregates(now time.Time) []pending {
	w.aggMu.Lock()
	agg, start := w.agg, w.aggStart
	w.agg, w.aggStart = map[aggKey]*aggEntry{}, now
	w.aggMu.Unlock()
	out := make([]pending, 0, len(agg))
	for _, a := range agg {
		e := a.first
		e.Time = now
		out = append(out, pending{e: e, agg: &Aggregation{Count: a.count, Start: start.UTC(), End: now.UTC()}})
	}
	return out
}

type pending struct {
	e   auth.Event
	agg *Aggregation
}

func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(w.cfg.AggregateEvery)
	defer tick.Stop()
	var batch []pending
	for {
		select {
		case e := <-w.ch:
			batch = append(batch[:0], pending{e: e})
			batch = w.drain(batch)
			w.write(batch)
		case now := <-tick.C:
			w.write(w.takeAggregates(now))
		case <-w.stop:
			batch = w.drain(batch[:0])
			batch = append(batch, w.takeAggregates(time.Now())...)
			w.write(batch)
			return
		}
	}
}

// drain adds the buffered events to batch, up to maxBatch.
func (w *Writer) drain(batch []pending) []pending {
	for len(batch) < maxBatch {
		select {
		case e := <-w.ch:
			batch = append(batch, pending{e: e})
		default:
			return batch
		}
	}
	return batch
}

// write appends a batch to the file and the topic.
func (w *Writer) write(batch []pending) {
	if len(batch) == 0 {
		return
	}
	cluster := w.cfg.ClusterID()
	src := Source(cluster, w.cfg.NodeID)
	recs := make([]Record, len(batch))
	var lines []byte
	for i, p := range batch {
		v := Encode(Build(p.e, cluster, src, p.agg))
		recs[i] = Record{Key: []byte(principal(p.e)), Value: v, Time: p.e.Time}
		if w.file != nil {
			lines = append(append(lines, v...), '\n')
		}
	}
	if w.file != nil {
		_, err := w.file.Write(lines)
		if err == nil {
			err = w.file.Sync()
		}
		if err != nil {
			w.fail("writing the audit file", err)
		}
	}
	if !w.cfg.Topic {
		return
	}
	all := len(recs)
	rest, err := w.produce(recs)
	// A cluster starting (the topic waits for its brokers) or a leader
	// moving: try the rest again a few times, while new events wait in
	// the buffer.
	for wait := 500 * time.Millisecond; err != nil && wait <= 4*time.Second; wait *= 2 {
		select {
		case <-w.ctx.Done():
		case <-time.After(wait):
			rest, err = w.produce(rest)
			continue
		}
		break
	}
	if err != nil {
		w.Metrics.Dropped.Add(int64(len(rest)))
		w.fail("writing "+strconv.Itoa(len(rest))+" events to "+Topic, err)
	}
	w.Metrics.Written.Add(int64(all - len(rest)))
}

func (w *Writer) produce(recs []Record) (rest []Record, err error) {
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	if !w.ensured && w.cfg.Ensure != nil {
		if err := w.cfg.Ensure(ctx); err != nil {
			return recs, fmt.Errorf("creating %s: %w", Topic, err)
		}
		w.ensured = true
	}
	if w.cfg.Sink == nil {
		return recs, errors.New("no sink")
	}
	return w.cfg.Sink(ctx, recs)
}

// fail counts a failed write and logs it at most every 30 s.
func (w *Writer) fail(what string, err error) {
	w.Metrics.Errors.Add(1)
	if now := time.Now(); now.Sub(w.errorLog) > 30*time.Second {
		w.errorLog = now
		w.log.Warn("audit write failed; events dropped", "what", what, "err", err)
	}
}
