package tests

// pkg/worker against one broker: competing workers each run every job
// once, a failed job comes back with delivery count 2, a job longer than
// its lock keeps it by renewal, a permanent failure is rejected with its
// error text (BerthAnnotateShareRecords), and a worker that shuts down
// releases what it has not finished. Each group reads its topic from
// the start (share.auto.offset.reset=earliest).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
	"github.com/berthmq/berth/pkg/berthmsg"
	"github.com/berthmq/berth/pkg/breaker"
	"github.com/berthmq/berth/pkg/worker"
)

// jobLog records what the workers of a test did.
type jobLog struct {
	mu      sync.Mutex
	seen    map[string][]string // job key → the workers that ran it, in order
	results []worker.Result
}

func newJobLog() *jobLog { return &jobLog{seen: map[string][]string{}} }

func (l *jobLog) ran(name string, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[string(r.Key)] = append(l.seen[string(r.Key)], name)
}

func (l *jobLog) done(res worker.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.results = append(l.results, res)
}

func (l *jobLog) runs(key string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen[key]...)
}

func (l *jobLog) resultsFor(key string) []worker.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []worker.Result
	for _, r := range l.results {
		if string(r.Record.Key) == key {
			out = append(out, r)
		}
	}
	return out
}

// startWorker runs a worker until the test ends (or stop is called) and
// checks that Run returns nil.
func startWorker(t *testing.T, addr, group, topic, name string, l *jobLog, o worker.Options, h worker.Handler) (stop func()) {
	t.Helper()
	o.Group, o.Topics = group, []string{topic}
	o.Logger = slog.New(slog.NewTextHandler(tWriter{t}, nil)).With("worker", name)
	o.OnDone = l.done
	w, err := worker.New(func(ctx context.Context, r *kgo.Record) error {
		l.ran(name, r)
		return h(ctx, r)
	}, o, kgo.SeedBrokers(addr), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("worker %s: Run: %v", name, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("worker %s: Run did not return 30 s after cancel", name)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// queueSetup creates topic and makes group read it from the start.
func queueSetup(t *testing.T, addr, topic, group string, kv ...string) *kgo.Client {
	t.Helper()
	tc.CreateTopic(t, addr, topic, 1, nil)
	prod := tc.Client(t, addr)
	setGroupConfigs(t, prod, group, append([]string{"share.auto.offset.reset", "earliest"}, kv...)...)
	return prod
}

func TestWorkerEachJobOnce(t *testing.T) {
	n := tc.Start(t)
	prod := queueSetup(t, n.Addr(), "jobs", "workers")
	l := newJobLog()
	var mu sync.Mutex
	inFlight, maxInFlight := 0, 0
	h := func(ctx context.Context, r *kgo.Record) error {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // the job's work
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil
	}
	for i := range 3 {
		startWorker(t, n.Addr(), "workers", "jobs", "w"+strconv.Itoa(i), l, worker.Options{Concurrency: 4}, h)
	}

	const jobs = 300
	var recs []*kgo.Record
	for i := range jobs {
		recs = append(recs, &kgo.Record{Topic: "jobs", Key: []byte("job-" + strconv.Itoa(i))})
	}
	produceSync(t, prod, recs...)
	poll.Until(t, 60*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.seen) < jobs {
			return fmt.Errorf("%d of %d jobs run", len(l.seen), jobs)
		}
		return nil
	})
	// A sentinel produced after the jobs and run means the workers have
	// polled past every job; none may have run twice.
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("end")})
	poll.Until(t, 30*time.Second, func() error {
		if len(l.resultsFor("end")) == 0 {
			return errors.New("sentinel not run yet")
		}
		return nil
	})
	by := map[string]int{}
	for i := range jobs {
		runs := l.runs("job-" + strconv.Itoa(i))
		if len(runs) != 1 {
			t.Errorf("job-%d ran %d times (%v)", i, len(runs), runs)
			continue
		}
		by[runs[0]]++
		if res := l.resultsFor("job-" + strconv.Itoa(i)); len(res) != 1 || res[0].Outcome != worker.Accepted {
			t.Errorf("job-%d results %+v", i, res)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if maxInFlight > 3*4 {
		t.Errorf("%d jobs ran at once, more than 3 workers × 4", maxInFlight)
	}
	t.Logf("jobs per worker %v, at most %d at once", by, maxInFlight)
}

func TestWorkerErrorRedelivers(t *testing.T) {
	n := tc.Start(t,
		tc.With("group.share.retry.backoff.initial.ms", "300"),
		tc.With("group.share.retry.backoff.max.ms", "300"))
	prod := queueSetup(t, n.Addr(), "jobs", "workers")
	l := newJobLog()
	startWorker(t, n.Addr(), "workers", "jobs", "w", l, worker.Options{Concurrency: 2}, func(ctx context.Context, r *kgo.Record) error {
		if r.DeliveryCount() == 1 {
			return errors.New("carrier API timed out")
		}
		return nil
	})
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("flaky")})
	poll.Until(t, 30*time.Second, func() error {
		if res := l.resultsFor("flaky"); len(res) < 2 {
			return fmt.Errorf("%d results", len(res))
		}
		return nil
	})
	res := l.resultsFor("flaky")
	if len(res) != 2 || res[0].Outcome != worker.Released || res[1].Outcome != worker.Accepted {
		t.Fatalf("results %+v", res)
	}
	if d := res[1].Record.DeliveryCount(); d != 2 {
		t.Fatalf("second delivery count %d, want 2", d)
	}
	if res[0].AnnotateErr != nil {
		t.Errorf("the release's error text was not taken: %v", res[0].AnnotateErr)
	}
}

func TestWorkerRenewKeepsLongJob(t *testing.T) {
	n := tc.Start(t, tc.With("group.share.record.lock.duration.ms", "1000"),
		tc.With("group.share.retry.backoff.initial.ms", "100"),
		tc.With("group.share.retry.backoff.max.ms", "100"))
	prod := queueSetup(t, n.Addr(), "jobs", "workers")
	l := newJobLog()
	long := func(ctx context.Context, r *kgo.Record) error {
		if string(r.Key) != "long" {
			return nil
		}
		select { // the job's work: 3.5 locks long
		case <-time.After(3500 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	startWorker(t, n.Addr(), "workers", "jobs", "a", l, worker.Options{Concurrency: 2}, long)
	startWorker(t, n.Addr(), "workers", "jobs", "b", l, worker.Options{Concurrency: 2}, long)
	// A first job loads the share-partition (and creates
	// __share_group_state), so that the long job's renewals are all the
	// test waits on.
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("first")})
	poll.Until(t, 30*time.Second, func() error {
		if len(l.resultsFor("first")) == 0 {
			return errors.New("first job not done yet")
		}
		return nil
	})
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("long")})
	poll.Until(t, 30*time.Second, func() error {
		if len(l.resultsFor("long")) == 0 {
			return errors.New("long job not done yet")
		}
		return nil
	})
	// More jobs go through the other worker meanwhile and after; the
	// long one is never run again.
	for i := range 20 {
		produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("short-" + strconv.Itoa(i))})
	}
	poll.Until(t, 30*time.Second, func() error {
		for i := range 20 {
			if len(l.runs("short-"+strconv.Itoa(i))) == 0 {
				return fmt.Errorf("short-%d not run yet", i)
			}
		}
		return nil
	})
	res := l.resultsFor("long")
	if runs := l.runs("long"); len(runs) != 1 || len(res) != 1 || res[0].Outcome != worker.Accepted || res[0].Record.DeliveryCount() != 1 {
		t.Fatalf("long job: runs %v, results %+v", runs, res)
	}
	if res[0].Took < 3*time.Second {
		t.Fatalf("long job took %v", res[0].Took)
	}
}

// The broker side of the error-text channel, with a raw request: only
// the member holding a record may annotate it.
func TestWorkerAnnotateRequest(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "jobs", 1, nil)
	prod := tc.Client(t, n.Addr())
	cons := shareConsumer(t, n.Addr(), "workers", "jobs")
	warmShare(t, prod, cons, "jobs")
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("job")})
	var rec *kgo.Record
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, cons, time.Second) {
			if string(r.Key) == "job" {
				rec = r
			}
		}
		if rec == nil {
			return errors.New("job not fetched yet")
		}
		return nil
	})
	ctx := ctxT(t, 30*time.Second)
	g, err := describeShare(ctx, tc.Client(t, n.Addr()), "workers")
	if err != nil || len(g.Members) != 1 {
		t.Fatalf("describe: %v, %+v", err, g.Members)
	}
	member := g.Members[0].MemberID
	td, err := tc.Admin(t, n.Addr()).ListTopics(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	raw := tc.Client(t, n.Addr(), kgo.MaxVersions(berthmsg.WithVersions(nil)))
	annotate := func(member string, offset int64) (int16, int16) {
		t.Helper()
		req := berthmsg.NewAnnotateShareRecordsRequest()
		req.GroupID, req.MemberID = "workers", member
		req.Topics = []berthmsg.AnnotateShareRecordsTopic{{TopicID: td["jobs"].ID, Partitions: []berthmsg.AnnotateShareRecordsPartition{
			{Partition: 0, FirstOffset: offset, LastOffset: offset, ErrorText: "bad address"},
		}}}
		kresp, err := raw.Broker(int(td["jobs"].Partitions[0].Leader)).Request(ctx, req)
		if err != nil {
			t.Fatalf("BerthAnnotateShareRecords: %v", err)
		}
		resp := kresp.(*berthmsg.AnnotateShareRecordsResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return resp.ErrorCode, -1
		}
		return resp.ErrorCode, resp.Topics[0].Partitions[0].ErrorCode
	}
	if top, part := annotate(member, rec.Offset); top != 0 || part != 0 {
		t.Fatalf("the holder's annotation: errors %d, %d", top, part)
	}
	if top, _ := annotate("not-a-member", rec.Offset); top != kerr.UnknownMemberID.Code {
		t.Fatalf("a stranger's annotation: error %d, want UNKNOWN_MEMBER_ID", top)
	}
	if _, part := annotate(member, rec.Offset+100); part != kerr.InvalidRecordState.Code {
		t.Fatalf("annotating a record not held: error %d, want INVALID_RECORD_STATE", part)
	}
	rec.Ack(kgo.AckReject)
	if err := cons.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	// A finished record (below the share-partition start offset) is
	// ignored, as ShareAcknowledge ignores it.
	if top, part := annotate(member, rec.Offset); top != 0 || part != 0 {
		t.Fatalf("annotating a finished record: errors %d, %d", top, part)
	}
}

func TestWorkerPermanentRejectsToDLQ(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "dlq.jobs", 1, dlqTopicConfigs())
	prod := queueSetup(t, n.Addr(), "jobs", "workers", "errors.deadletterqueue.topic.name", "dlq.jobs")
	l := newJobLog()
	startWorker(t, n.Addr(), "workers", "jobs", "w", l, worker.Options{Concurrency: 2}, func(ctx context.Context, r *kgo.Record) error {
		if string(r.Key) == "bad" {
			return fmt.Errorf("booking %s: %w", r.Key, worker.Permanent(errors.New("bad address: no such street")))
		}
		return nil
	})
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("bad"), Value: []byte("job")}, &kgo.Record{Topic: "jobs", Key: []byte("after")})
	d := consumeN(t, n.Addr(), "dlq.jobs", 1)[0]
	h := headerMap(t, d)
	checkContext(t, h, map[string]string{
		"__dlq.errors.berth.client.error": "booking bad: bad address: no such street",
		"__dlq.errors.berth.reason":       "rejected",
		"__dlq.errors.delivery.count":     "1",
		"__dlq.errors.group":              "workers",
	})
	if string(d.Key) != "bad" || string(d.Value) != "job" {
		t.Errorf("DLQ record %q=%q", d.Key, d.Value)
	}
	poll.Until(t, 30*time.Second, func() error {
		if len(l.resultsFor("after")) == 0 {
			return errors.New("the next job is not done yet")
		}
		return nil
	})
	res := l.resultsFor("bad")
	if runs := l.runs("bad"); len(runs) != 1 || len(res) != 1 || res[0].Outcome != worker.Rejected || !worker.IsPermanent(res[0].Err) || res[0].AnnotateErr != nil {
		t.Fatalf("runs %v, results %+v", runs, res)
	}
}

// An ordinary error at the delivery limit parks the job with the last
// attempt's error text (sent before each release).
func TestWorkerDeliveryLimitCarriesLastError(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "dlq.jobs", 1, dlqTopicConfigs())
	prod := queueSetup(t, n.Addr(), "jobs", "workers",
		"errors.deadletterqueue.topic.name", "dlq.jobs",
		"share.delivery.count.limit", "3",
		"share.retry.backoff.initial.ms", "100",
		"share.retry.backoff.max.ms", "100")
	l := newJobLog()
	startWorker(t, n.Addr(), "workers", "jobs", "w", l, worker.Options{}, func(ctx context.Context, r *kgo.Record) error {
		return fmt.Errorf("carrier API timed out (attempt %d)", r.DeliveryCount())
	})
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("flaky")})
	d := consumeN(t, n.Addr(), "dlq.jobs", 1)[0]
	checkContext(t, headerMap(t, d), map[string]string{
		"__dlq.errors.berth.client.error": "carrier API timed out (attempt 3)",
		"__dlq.errors.berth.reason":       "delivery limit reached",
		"__dlq.errors.delivery.count":     "3",
	})
	if res := l.resultsFor("flaky"); len(res) != 3 {
		t.Fatalf("results %+v", res)
	}
}

func TestWorkerShutdownReleases(t *testing.T) {
	n := tc.Start(t,
		tc.With("group.share.retry.backoff.initial.ms", "100"),
		tc.With("group.share.retry.backoff.max.ms", "100"))
	prod := queueSetup(t, n.Addr(), "jobs", "workers")
	l := newJobLog()
	started := make(chan struct{}, 1)
	stopA := startWorker(t, n.Addr(), "workers", "jobs", "a", l, worker.Options{Concurrency: 2, ShutdownGrace: 300 * time.Millisecond},
		func(ctx context.Context, r *kgo.Record) error {
			if string(r.Key) == "stuck" {
				started <- struct{}{}
				<-ctx.Done() // never finishes on its own
				return ctx.Err()
			}
			return nil
		})
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("stuck")})
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("worker a did not start the job")
	}
	startWorker(t, n.Addr(), "workers", "jobs", "b", l, worker.Options{}, func(ctx context.Context, r *kgo.Record) error { return nil })
	stopped := time.Now()
	stopA()
	poll.Until(t, 20*time.Second, func() error { // well inside the 30 s lock
		if runs := l.runs("stuck"); len(runs) < 2 {
			return fmt.Errorf("runs %v", runs)
		}
		return nil
	})
	t.Logf("worker b had the job %v after a's shutdown began", time.Since(stopped))
	res := l.resultsFor("stuck")
	if runs := l.runs("stuck"); runs[0] != "a" || runs[1] != "b" {
		t.Fatalf("runs %v", runs)
	}
	if len(res) < 2 || res[0].Outcome != worker.Abandoned {
		t.Fatalf("results %+v", res)
	}
	poll.Until(t, 10*time.Second, func() error {
		for _, r := range l.resultsFor("stuck") {
			if r.Outcome == worker.Accepted && r.Record.DeliveryCount() == 2 {
				return nil
			}
		}
		return errors.New("worker b has not accepted the job at delivery count 2")
	})
}

// A worker's breaker: two failures open it; the jobs the worker holds
// are then released with breaker.ErrOpen, unattempted, and it takes no
// new ones until the breaker half-opens; the probe succeeds and every
// job is accepted.
func TestWorkerBreaker(t *testing.T) {
	n := tc.Start(t,
		tc.With("group.share.retry.backoff.initial.ms", "100"),
		tc.With("group.share.retry.backoff.max.ms", "100"))
	prod := queueSetup(t, n.Addr(), "jobs", "workers", "share.delivery.count.limit", "10")
	l := newJobLog()
	b := breaker.New(breaker.Options{Name: "carrier", Failures: 2, OpenFor: 500 * time.Millisecond})
	var mu sync.Mutex
	down := true
	calls := 0
	startWorker(t, n.Addr(), "workers", "jobs", "w", l, worker.Options{Concurrency: 1, Breaker: b}, func(ctx context.Context, r *kgo.Record) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if down {
			return errors.New("carrier API 503")
		}
		return nil
	})
	for i := range 6 {
		produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte(fmt.Sprint("job-", i))})
	}
	poll.Until(t, 30*time.Second, func() error {
		if b.State() != breaker.Open {
			return errors.New("breaker not open yet")
		}
		return nil
	})
	mu.Lock()
	opened := calls
	down = false
	mu.Unlock()
	if opened != 2 {
		t.Errorf("%d calls when the breaker opened, want 2", opened)
	}
	poll.Until(t, 30*time.Second, func() error {
		accepted := 0
		for i := range 6 {
			for _, r := range l.resultsFor(fmt.Sprint("job-", i)) {
				if r.Outcome == worker.Accepted {
					accepted++
				}
			}
		}
		if accepted != 6 {
			return fmt.Errorf("%d of 6 jobs accepted", accepted)
		}
		return nil
	})
	refused := 0
	for i := range 6 {
		for _, r := range l.resultsFor(fmt.Sprint("job-", i)) {
			if errors.Is(r.Err, breaker.ErrOpen) {
				refused++
				if r.Outcome != worker.Released {
					t.Errorf("a job refused by the open breaker was %v, want released", r.Outcome)
				}
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 8 { // two failures, then the probe and five more: none while open
		t.Errorf("%d handler calls, want 8 (2 failed, 6 accepted); %d jobs released by the open breaker", calls, refused)
	}
}
