package tests

// kgo's share consumer (KIP-932: ShareGroupHeartbeat, ShareFetch,
// ShareAcknowledge) against one broker: competing consumers, release
// with the retry backoff, the delivery limit, lock expiry and a consumer
// that closes with records in hand. Share-partitions start at the high
// watermark (share.auto.offset.reset=latest, Kafka's default), so each
// test first makes the consumer receive a warm-up record: the
// share-partition exists from then on.
//
// A kgo share consumer acquires records in the background, before they
// are polled, and a poll accepts whatever the poll before it returned
// unacknowledged. So a test that must hold several records at once
// produces them as one batch (produceOneBatch), which one ShareFetch
// acquires whole and one poll returns, and leaves no warm-up record
// behind (warmShare).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

func shareConsumer(t *testing.T, addr, group, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(cl.Close) })
	return cl
}

// pollFor polls cl once for at most d and returns the records.
func pollFor(t *testing.T, cl *kgo.Client, d time.Duration) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	fs := cl.PollFetches(ctx)
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Errorf("share fetch %s/%d: %v", topic, p, err)
		}
	})
	return fs.Records()
}

// produceOneBatch produces recs (all to one partition) as one record
// batch: a client that flushes only when told to sends them in one
// request, where a linger timer firing between two records could split
// them. A share consumer then acquires them in one ShareFetch and returns
// them in one poll.
func produceOneBatch(t *testing.T, seeds []string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ManualFlushing())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 30*time.Second)
	errs := make(chan error, len(recs))
	for _, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) { errs <- err })
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flushing one batch: %v", err)
	}
	for range recs {
		if err := <-errs; err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// warmShare makes the share-partition of topic exist for cl's group,
// whose only member cl must be: it produces warm-up records, one a
// second, until cl receives one, then goes on polling until cl has
// received the last one produced too, accepting all it gets. Warm-up
// records produced before the share-partition started are never
// delivered; any produced after the first one cl receives are (a poll can
// end while the fetch carrying its record is on its way, and the next
// round produces another), and they must not be left for the test's own
// polls and counts.
func warmShare(t *testing.T, prod, cl *kgo.Client, topic string) {
	t.Helper()
	produced, received := 0, 0 // warm-up numbers: the last produced, the highest received
	poll.Until(t, 60*time.Second, func() error {
		if received == 0 {
			produced++
			produceSync(t, prod, &kgo.Record{Topic: topic, Key: []byte("warm"), Value: []byte(strconv.Itoa(produced))})
		}
		for _, r := range pollFor(t, cl, time.Second) {
			if n, err := strconv.Atoi(string(r.Value)); string(r.Key) == "warm" && err == nil {
				received = max(received, n)
			}
			r.Ack(kgo.AckAccept)
		}
		if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
			return err
		}
		if received < produced {
			return fmt.Errorf("warm-up record %d received, %d produced", received, produced)
		}
		return nil
	})
}

func TestShareFetchCompetingConsumersEachJobOnce(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "jobs", 1, nil)
	prod := tc.Client(t, n.Addr())
	a := shareConsumer(t, n.Addr(), "workers", "jobs", kgo.ShareMaxRecords(10))
	warmShare(t, prod, a, "jobs")
	b := shareConsumer(t, n.Addr(), "workers", "jobs", kgo.ShareMaxRecords(10))

	const jobs = 200
	var recs []*kgo.Record
	for i := range jobs {
		recs = append(recs, &kgo.Record{Topic: "jobs", Key: []byte("job"), Value: []byte(strconv.Itoa(i))})
	}
	produceSync(t, prod, recs...)

	var mu sync.Mutex
	seen := map[string]int{}
	by := map[string]int{}
	ctx := ctxT(t, 60*time.Second)
	var wg sync.WaitGroup
	for name, cl := range map[string]*kgo.Client{"a": a, "b": b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				done := len(seen) == jobs
				mu.Unlock()
				if done {
					return
				}
				for _, r := range pollFor(t, cl, 500*time.Millisecond) {
					if string(r.Key) == "job" {
						mu.Lock()
						seen[string(r.Value)]++
						by[name]++
						mu.Unlock()
					}
					r.Ack(kgo.AckAccept)
				}
				if err := cl.FlushAcks(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("consumer %s: flushing acks: %v", name, err)
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != jobs {
		t.Fatalf("%d of %d jobs delivered", len(seen), jobs)
	}
	// Accepted jobs are never delivered again.
	for _, cl := range []*kgo.Client{a, b} {
		for _, r := range pollFor(t, cl, time.Second) {
			if string(r.Key) == "job" {
				seen[string(r.Value)]++
			}
		}
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("job %s delivered %d times", v, c)
		}
	}
	t.Logf("jobs per consumer: %v", by)
}

func TestShareFetchReleaseBackoffAndDeliveryLimit(t *testing.T) {
	n := tc.Start(t,
		tc.With("group.share.delivery.count.limit", "2"),
		tc.With("group.share.retry.backoff.initial.ms", "400"),
		tc.With("group.share.retry.backoff.max.ms", "400"))
	tc.CreateTopic(t, n.Addr(), "retries", 1, nil)
	prod := tc.Client(t, n.Addr())
	cl := shareConsumer(t, n.Addr(), "retry", "retries")
	warmShare(t, prod, cl, "retries")

	produceOneBatch(t, []string{n.Addr()}, &kgo.Record{Topic: "retries", Key: []byte("job"), Value: []byte("r")},
		&kgo.Record{Topic: "retries", Key: []byte("job"), Value: []byte("x")})

	// receive waits for the poll that returns the jobs with values vs,
	// all of them: were they split over two polls, the second would
	// accept those the first returned.
	receive := func(vs ...string) map[string]*kgo.Record {
		t.Helper()
		var got map[string]*kgo.Record
		poll.Until(t, 30*time.Second, func() error {
			got = map[string]*kgo.Record{}
			for _, r := range pollFor(t, cl, 500*time.Millisecond) {
				got[string(r.Value)] = r
			}
			var missing []string
			for _, v := range vs {
				if got[v] == nil {
					missing = append(missing, v)
				}
			}
			if len(missing) == len(vs) {
				return fmt.Errorf("jobs %v not delivered", vs)
			}
			if len(missing) > 0 {
				t.Fatalf("jobs %v came without %v in the same poll", vs, missing)
			}
			return nil
		})
		return got
	}
	got := receive("r", "x")
	first, x := got["r"], got["x"]
	if first.DeliveryCount() != 1 {
		t.Fatalf("first delivery count %d", first.DeliveryCount())
	}
	// Reject x now (it must never come back); release r.
	x.Ack(kgo.AckReject)
	released := time.Now()
	first.Ack(kgo.AckRelease)
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	second := receive("r")["r"]
	// 400 ms ±20% jitter: not before 320 ms after the release.
	if d := time.Since(released); d < 320*time.Millisecond {
		t.Fatalf("released record redelivered after %v, before its backoff", d)
	}
	if second.DeliveryCount() != 2 {
		t.Fatalf("second delivery count %d, want 2", second.DeliveryCount())
	}
	// At the delivery limit (2) a release archives it.
	second.Ack(kgo.AckRelease)
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	produceSync(t, prod, &kgo.Record{Topic: "retries", Key: []byte("marker")})
	deadline := time.Now().Add(30 * time.Second)
	for gotMarker := false; !gotMarker; {
		if time.Now().After(deadline) {
			t.Fatal("marker not delivered")
		}
		for _, r := range pollFor(t, cl, 500*time.Millisecond) {
			switch {
			case string(r.Key) == "marker":
				gotMarker = true
			case string(r.Value) == "r" || string(r.Value) == "x":
				t.Fatalf("job %s delivered again (delivery %d) past its limit or rejection", r.Value, r.DeliveryCount())
			}
			r.Ack(kgo.AckAccept)
		}
	}
	// The marker came after the backoff of r would have ended: r is gone.
	for _, r := range pollFor(t, cl, time.Second) {
		if string(r.Value) == "r" || string(r.Value) == "x" {
			t.Fatalf("job %s delivered again", r.Value)
		}
	}
}

func TestShareFetchLockExpiryRedelivers(t *testing.T) {
	n := tc.Start(t,
		tc.With("group.share.record.lock.duration.ms", "1000"),
		tc.With("group.share.retry.backoff.initial.ms", "0"))
	tc.CreateTopic(t, n.Addr(), "locks", 1, nil)
	prod := tc.Client(t, n.Addr())
	hung := shareConsumer(t, n.Addr(), "lockers", "locks")
	warmShare(t, prod, hung, "locks")
	// One batch, so one poll returns both: a second poll would accept
	// what the first returned.
	produceOneBatch(t, []string{n.Addr()}, &kgo.Record{Topic: "locks", Key: []byte("job"), Value: []byte("1")},
		&kgo.Record{Topic: "locks", Key: []byte("job"), Value: []byte("2")})
	held := map[string]bool{}
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, hung, 500*time.Millisecond) {
			held[string(r.Value)] = true
		}
		if len(held) == 0 {
			return errors.New("hung consumer holds nothing yet")
		}
		if !held["1"] || !held["2"] {
			t.Fatalf("hung consumer got %v in one poll, want both jobs", held)
		}
		return nil
	})
	acquired := time.Now()
	// hung polls no more: it neither acks nor renews. Another member gets
	// the jobs once the locks expire.
	other := shareConsumer(t, n.Addr(), "lockers", "locks")
	got := map[string]int32{}
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, other, 500*time.Millisecond) {
			got[string(r.Value)] = r.DeliveryCount()
			r.Ack(kgo.AckAccept)
		}
		if got["1"] == 0 || got["2"] == 0 {
			return fmt.Errorf("other consumer got %v", got)
		}
		return nil
	})
	if d := time.Since(acquired); d < 500*time.Millisecond {
		t.Errorf("redelivered %v after the first consumer got the jobs: before the 1 s lock expired", d)
	}
	// At least 2: the hung client's background fetches may have taken
	// them again (and let them expire again) before the other did.
	if got["1"] < 2 || got["2"] < 2 {
		t.Errorf("delivery counts %v, want at least 2", got)
	}
}

func TestShareFetchClosedConsumerRecordsGoToOther(t *testing.T) {
	n := tc.Start(t, tc.With("group.share.retry.backoff.initial.ms", "0"))
	tc.CreateTopic(t, n.Addr(), "handoff", 1, nil)
	prod := tc.Client(t, n.Addr())
	first, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ShareGroup("handoff"), kgo.ConsumeTopics("handoff"),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	warmShare(t, prod, first, "handoff")
	produceSync(t, prod, &kgo.Record{Topic: "handoff", Key: []byte("job"), Value: []byte("1")})
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, first, 500*time.Millisecond) {
			if string(r.Value) == "1" {
				return nil
			}
		}
		return errors.New("first consumer has no job")
	})
	first.Close() // without acking: kgo releases what it holds
	other := shareConsumer(t, n.Addr(), "handoff", "handoff")
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, other, 500*time.Millisecond) {
			if string(r.Value) == "1" {
				if r.DeliveryCount() != 2 {
					t.Errorf("delivery count %d, want 2", r.DeliveryCount())
				}
				return nil
			}
		}
		return errors.New("job not redelivered")
	})
}
