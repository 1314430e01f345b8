package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/berthmq/berth/pkg/berthmsg"
	"github.com/berthmq/berth/pkg/breaker"
)

// Handler processes one job. ctx ends when the worker gives the job up
// (the shutdown grace passed); r is valid until the handler returns.
type Handler func(ctx context.Context, r *kgo.Record) error

// Options configure a Worker.
type Options struct {
	// Group is the share group the worker joins (required).
	Group string
	// Topics are the topics it takes jobs from (required).
	Topics []string
	// Concurrency is the number of jobs run at once (default 1).
	Concurrency int
	// RenewEvery is how often a running job's lock is renewed. Zero:
	// half of the lock the broker reported when it handed the job out
	// (group.share.record.lock.duration.ms, 30 s by default), at least
	// 100 ms.
	RenewEvery time.Duration
	// ShutdownGrace is how long running handlers may finish after Run's
	// context is cancelled (default 10 s).
	ShutdownGrace time.Duration
	// Logger receives the worker's warnings (default slog.Default()).
	Logger *slog.Logger
	// OnDone, if set, is called after each job is acknowledged, from the
	// job's goroutine (metrics, tracing).
	OnDone func(Result)
	// Breaker, if set, guards the dependency the handler calls: while it
	// is open the worker takes no new jobs, and jobs already taken are
	// released with their backoff (Result.Err is breaker.ErrOpen)
	// instead of attempted; a half-open breaker lets one job through as
	// its probe. The handler's errors count as failures; Permanent ones
	// (the dependency answered, the job is bad) as successes.
	Breaker *breaker.Breaker
}

// Outcome is how a job was acknowledged.
type Outcome int8

const (
	Accepted  Outcome = iota + 1 // the handler returned nil
	Released                     // it failed (or panicked): delivered again after the backoff
	Rejected                     // it failed permanently: parked in the dead-letter topic
	Abandoned                    // still running at shutdown: released for another worker
)

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case Released:
		return "released"
	case Rejected:
		return "rejected"
	case Abandoned:
		return "abandoned"
	}
	return fmt.Sprintf("outcome(%d)", int8(o))
}

// Result is one job's end, for Options.OnDone.
type Result struct {
	Record  *kgo.Record
	Outcome Outcome
	Err     error         // the handler's error (nil when accepted)
	Took    time.Duration // handler time
	// AnnotateErr is why the error text could not be sent with a
	// released or rejected job (ErrNotBerth: the broker is not Berth).
	AnnotateErr error
}

// permanent marks an error as not worth retrying.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Permanent wraps err so that the worker rejects the job (dead-letter
// topic, no retry) instead of releasing it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// IsPermanent reports whether err, or an error it wraps, came from
// Permanent.
func IsPermanent(err error) bool {
	var p *permanent
	return errors.As(err, &p)
}

// maxErrorText bounds the text sent with a failure (the broker keeps
// 8 KiB by default).
const maxErrorText = 16 << 10

// Worker takes jobs from a share group and runs a Handler on them.
type Worker struct {
	h    Handler
	o    Options
	cl   *kgo.Client
	ann  *annotator
	log  *slog.Logger
	used atomic.Bool
}

// New makes a worker; opts are the kgo client's options (seed brokers,
// TLS, SASL, ...). The worker adds the share group, the topics, a record
// limit of Concurrency per fetch with no fetching ahead (a record fetched
// ahead would sit in the client with its lock running), Berth's API key
// in kgo.MaxVersions, a wrapper around the dialer (kgo.Dialer, or kgo's
// own with kgo.DialTLSConfig) through which it learns its member ID, and
// a kgo.ShareAckCallback that logs refused acknowledgements (replacing
// one given in opts) and, unless opts give a logger, kgo.WithLogger
// passing the client's warnings and errors to Options.Logger.
func New(h Handler, o Options, opts ...kgo.Opt) (*Worker, error) {
	if h == nil {
		return nil, errors.New("worker: nil handler")
	}
	if o.Group == "" || len(o.Topics) == 0 {
		return nil, errors.New("worker: Options.Group and Options.Topics are required")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	// kgo does not expose a share member's ID, which annotations need:
	// the worker reads it from the heartbeats its connections write, so
	// it wraps the dialer the options give (TLS included), and it lets
	// kgo send Berth's key.
	probe, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...), kgo.ShareGroup(o.Group))...) // no topics: joins nothing
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	dial, _ := probe.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error))
	versions, _ := probe.OptValue(kgo.MaxVersions).(*kversion.Versions)
	if l, _ := probe.OptValue(kgo.WithLogger).(kgo.Logger); l == nil || l.Level() == kgo.LogLevelNone {
		// The client's own warnings (records it had to give back, lost
		// sessions) belong in the worker's log.
		opts = append(opts[:len(opts):len(opts)], kgo.WithLogger(kgoLogger{o.Logger}))
	}
	probe.Close()
	m := &memberID{group: o.Group}
	all := append(append([]kgo.Opt(nil), opts...),
		kgo.ShareGroup(o.Group), kgo.ConsumeTopics(o.Topics...),
		kgo.ShareMaxRecords(int32(o.Concurrency)), kgo.ShareMaxRecordsStrict(), kgo.MaxConcurrentFetches(0),
		kgo.DialTLSConfig(nil), kgo.Dialer(m.dialer(dial)), // dial already does the TLS
		kgo.MaxVersions(berthmsg.WithVersions(versions)))
	w := &Worker{h: h, o: o, log: o.Logger.With("group", o.Group)}
	all = append(all, kgo.ShareAckCallback(w.acked))
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	w.cl = cl
	w.ann = &annotator{cl: cl, group: o.Group, member: m, maxText: maxErrorText}
	return w, nil
}

// acked logs the acknowledgements the broker refused (kgo's
// ShareAckCallback). A refused RENEW or terminal acknowledgement means
// the job's lock was lost: the broker delivers it again, possibly while
// this worker's handler still runs it.
func (w *Worker) acked(_ *kgo.Client, rs kgo.ShareAckResults) {
	for _, r := range rs {
		if r.Err != nil {
			w.log.Warn("worker: acknowledgement refused; the job will be delivered again", "topic", r.Topic, "partition", r.Partition, "err", r.Err)
		}
	}
}

// Client is the worker's kgo client (for admin requests, metrics hooks
// already given as options, ...). Do not poll it.
func (w *Worker) Client() *kgo.Client { return w.cl }

// Run takes and runs jobs until ctx is cancelled, then shuts down (see
// the package documentation) and closes the client. It returns nil after
// a shutdown by ctx, and an error if the client failed. A Worker runs
// once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.used.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	defer w.cl.Close() // leaves the group; releases anything not acknowledged
	var runErr error
	for ctx.Err() == nil {
		if b := w.o.Breaker; b != nil && b.State() == breaker.Open {
			// Take no jobs while the dependency is down: the broker
			// keeps them for the workers that can.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		fs := w.cl.PollRecords(ctx, w.o.Concurrency)
		if fs.IsClientClosed() {
			runErr = errors.New("worker: client closed")
			break
		}
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				w.log.Warn("worker: fetch error", "topic", topic, "partition", p, "err", err)
			}
		})
		if recs := fs.Records(); len(recs) > 0 {
			w.runBatch(ctx, recs)
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), w.o.ShutdownGrace)
	defer cancel()
	if err := w.cl.FlushAcks(fctx); err != nil {
		w.log.Warn("worker: flushing acknowledgements at shutdown", "err", err)
	}
	return runErr
}

// job is one record in flight. state goes running → done (the handler
// returned and acknowledged) or running → abandoned (shutdown released
// it); whoever moves it first acknowledges.
type job struct {
	r     *kgo.Record
	state atomic.Int32
}

const (
	running int32 = iota
	done
	abandoned
)

// runBatch runs the handler on every record of one poll, renews their
// locks while they run, and returns once each is acknowledged.
func (w *Worker) runBatch(ctx context.Context, recs []*kgo.Record) {
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	jobs := make([]*job, len(recs))
	ended := make(chan struct{}, len(recs))
	for i, r := range recs {
		j := &job{r: r}
		jobs[i] = j
		go func() {
			w.runJob(hctx, j)
			ended <- struct{}{}
		}()
	}
	every := w.renewEvery(recs)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var grace <-chan time.Time
	stopping := ctx.Done()
	for left := len(jobs); left > 0; {
		select {
		case <-ended:
			left--
		case <-tick.C:
			w.renew(jobs, every)
		case <-stopping:
			stopping = nil
			t := time.NewTimer(w.o.ShutdownGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			for _, j := range jobs {
				if j.state.CompareAndSwap(running, abandoned) {
					j.r.Ack(kgo.AckRelease)
					w.log.Warn("worker: shutdown grace over, job released", "topic", j.r.Topic, "partition", j.r.Partition, "offset", j.r.Offset)
					if w.o.OnDone != nil {
						w.o.OnDone(Result{Record: j.r, Outcome: Abandoned, Err: context.Canceled})
					}
				}
			}
			return // handlers still running see hctx cancelled; their acknowledgements are no-ops
		}
	}
}

// renewEvery is Options.RenewEvery or half the shortest lock of recs.
func (w *Worker) renewEvery(recs []*kgo.Record) time.Duration {
	if w.o.RenewEvery > 0 {
		return w.o.RenewEvery
	}
	now := time.Now()
	every := 15 * time.Second
	for _, r := range recs {
		if d := r.AcquisitionDeadline(); !d.IsZero() {
			every = min(every, d.Sub(now)/2)
		}
	}
	return max(every, 100*time.Millisecond)
}

// renew extends the locks of the running jobs and pushes the renewals
// out at once (kgo would otherwise send them within a second).
func (w *Worker) renew(jobs []*job, every time.Duration) {
	n := 0
	for _, j := range jobs {
		if j.state.Load() == running {
			j.r.Ack(kgo.AckRenew)
			n++
		}
	}
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), every)
	defer cancel()
	_ = w.cl.FlushAcks(ctx) // a renewal that does not arrive shows as a refused acknowledgement later
}

// runJob runs the handler on j and acknowledges the outcome.
func (w *Worker) runJob(ctx context.Context, j *job) {
	start := time.Now()
	var err error
	if b := w.o.Breaker; b != nil {
		if ok, _ := b.Allow(); !ok {
			err = breaker.ErrOpen
		} else {
			err = w.call(ctx, j.r)
			if IsPermanent(err) {
				b.Record(nil)
			} else {
				b.Record(err)
			}
		}
	} else {
		err = w.call(ctx, j.r)
	}
	took := time.Since(start)
	res := Result{Record: j.r, Err: err, Took: took}
	status := kgo.AckAccept
	res.Outcome = Accepted
	if err != nil {
		status, res.Outcome = kgo.AckRelease, Released
		if IsPermanent(err) {
			status, res.Outcome = kgo.AckReject, Rejected
		}
		if j.state.Load() == running {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			res.AnnotateErr = w.ann.annotate(actx, j.r, err.Error())
			cancel()
			if res.AnnotateErr != nil && !errors.Is(res.AnnotateErr, ErrNotBerth) {
				w.log.Warn("worker: the error text could not be sent; acknowledging without it",
					"topic", j.r.Topic, "partition", j.r.Partition, "offset", j.r.Offset, "err", res.AnnotateErr)
			}
		}
	}
	if !j.state.CompareAndSwap(running, done) {
		return // abandoned at shutdown: already released
	}
	j.r.Ack(status)
	if w.o.OnDone != nil {
		w.o.OnDone(res)
	}
}

// call runs the handler, turning a panic into an error with the stack.
func (w *Worker) call(ctx context.Context, r *kgo.Record) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("worker: handler panicked: %v\n%s", p, debug.Stack())
			w.log.Error("worker: handler panicked; job released", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "panic", p)
		}
	}()
	return w.h(ctx, r)
}

// kgoLogger passes the kgo client's warnings and errors to a slog.Logger.
type kgoLogger struct{ l *slog.Logger }

func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	k.l.Log(context.Background(), lv, "kgo: "+msg, keyvals...)
}
