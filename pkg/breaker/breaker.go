// Package breaker is a circuit breaker for a consumer's dependency (a
// database, a payment API): after Failures consecutive failures it opens,
// and for OpenFor the consumer does not call the dependency (pkg/worker
// releases its jobs with their backoff and takes no new ones; pkg/retry
// pauses); then it half-opens and lets one call through as a probe: a
// success closes it, a failure opens it again for OpenFor. Retries against
// a dependency that is down only keep it down; the breaker gives it room
// to recover.
//
// Every state change is logged and counted (Collector).
package breaker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is a breaker's state.
type State int8

const (
	Closed   State = iota // calls go through
	Open                  // calls are refused until OpenFor has passed
	HalfOpen              // one probe call is let through
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "unknown"
}

// ErrOpen is the error of a call the breaker refused.
var ErrOpen = errors.New("breaker: open: the dependency is failing; not called")

// Options configure a Breaker.
type Options struct {
	// Name labels the log lines and metrics (the dependency's name).
	Name string
	// Failures is how many consecutive failures open it (default 5).
	Failures int
	// OpenFor is how long it stays open before a probe (default 30 s).
	OpenFor time.Duration
	// IsFailure decides which errors count as failures (default: every
	// one but context.Canceled); an error that does not count leaves the
	// breaker as it was.
	IsFailure func(error) bool
	// Logger gets a line per state change (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

// Breaker is a circuit breaker; safe for concurrent use.
type Breaker struct {
	o           Options
	mu          sync.Mutex
	state       State
	fails       int
	openedAt    time.Time
	probing     bool
	transitions map[State]int64
}

// New returns a closed breaker.
func New(o Options) *Breaker {
	if o.Failures <= 0 {
		o.Failures = 5
	}
	if o.OpenFor <= 0 {
		o.OpenFor = 30 * time.Second
	}
	if o.IsFailure == nil {
		o.IsFailure = func(err error) bool { return !errors.Is(err, context.Canceled) }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Breaker{o: o, transitions: map[State]int64{}}
}

// State returns the breaker's state now (an open breaker whose OpenFor
// has passed reports HalfOpen).
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick()
	return b.state
}

// tick moves Open to HalfOpen once OpenFor has passed. mu held.
func (b *Breaker) tick() {
	if b.state == Open && b.o.Now().Sub(b.openedAt) >= b.o.OpenFor {
		b.set(HalfOpen)
	}
}

func (b *Breaker) set(s State) {
	if s == b.state {
		return
	}
	from := b.state
	b.state = s
	b.transitions[s]++
	b.probing = false
	switch s {
	case Open:
		b.openedAt = b.o.Now()
		b.o.Logger.Warn("breaker open: calls stop", "breaker", b.o.Name, "from", from.String(), "failures", b.fails, "open_for", b.o.OpenFor)
	case HalfOpen:
		b.o.Logger.Info("breaker half-open: one probe call", "breaker", b.o.Name)
	case Closed:
		b.o.Logger.Info("breaker closed: calls resume", "breaker", b.o.Name, "from", from.String())
	}
}

// Allow reports whether a call may go through now; when not, wait is
// how long until the next probe. A half-open breaker allows one call at
// a time (the probe) until Record settles it.
func (b *Breaker) Allow() (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick()
	switch b.state {
	case Closed:
		return true, 0
	case HalfOpen:
		if !b.probing {
			b.probing = true
			return true, 0
		}
		return false, b.o.OpenFor / 10
	}
	return false, b.o.OpenFor - b.o.Now().Sub(b.openedAt)
}

// Wait blocks until a call may go through (or ctx is done).
func (b *Breaker) Wait(ctx context.Context) error {
	for {
		ok, wait := b.Allow()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(wait, time.Millisecond)):
		}
	}
}

// Record tells the breaker how an allowed call ended.
func (b *Breaker) Record(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil && !b.o.IsFailure(err) {
		b.probing = false // neutral (a cancelled call): another probe may go
		return
	}
	if err == nil {
		b.fails = 0
		if b.state != Closed {
			b.set(Closed)
		}
		return
	}
	b.fails++
	switch {
	case b.state == HalfOpen:
		b.set(Open)
	case b.state == Closed && b.fails >= b.o.Failures:
		b.set(Open)
	}
}

// Collector returns the breaker's metrics, labelled breaker=Name:
// berth_breaker_state (0 closed, 1 open, 2 half-open) and
// berth_breaker_transitions_total{to}.
func (b *Breaker) Collector() prometheus.Collector { return collector{b} }

var (
	descState = prometheus.NewDesc("berth_breaker_state", "Circuit breaker state: 0 closed, 1 open, 2 half-open.", []string{"breaker"}, nil)
	descTrans = prometheus.NewDesc("berth_breaker_transitions_total", "Circuit breaker state changes, by the state entered.", []string{"breaker", "to"}, nil)
)

type collector struct{ b *Breaker }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- descState; ch <- descTrans }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.b.State()
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, float64(s), c.b.o.Name)
	for _, to := range []State{Closed, Open, HalfOpen} {
		ch <- prometheus.MustNewConstMetric(descTrans, prometheus.CounterValue, float64(c.b.transitions[to]), c.b.o.Name, to.String())
	}
}
