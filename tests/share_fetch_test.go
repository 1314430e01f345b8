package tests

// kgo's share consumer (KIP-932: ShareGroupHeartbeat, ShareFetch,
// ShareAcknowledge) against one broker: competing consumers, release
// with the retry backoff, the delivery limit, lock expiry and a consumer
// that closes with records in hand. Share-partitions start at the high
// watermark (share.auto.offset.reset=latest, Kafka's default; group
// configs are not settable yet), so each test first makes the consumer
// receive a warm-up record: the share-partition exists from then on.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

// warmShare makes the share-partition of topic exist for cl's group:
// it produces warm-up records until cl receives one, and accepts them.
func warmShare(t *testing.T, prod, cl *kgo.Client, topic string) {
	t.Helper()
	tc.Eventually(t, 60*time.Second, func() error {
		produceSync(t, prod, &kgo.Record{Topic: topic, Key: []byte("warm")})
		for _, r := range pollFor(t, cl, time.Second) {
			if string(r.Key) == "warm" {
				r.Ack(kgo.AckAccept)
				if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
					return err
				}
				return nil
			}
		}
		return errors.New("no warm-up record yet")
	})
}

func TestShareFetchCompetingConsumersEachJobOnce(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "jobs", 1, nil)
	prod := tc.Client(t, n.Addr())
	a := shareConsumer(t, n.Addr(), "workers", "jobs", kgo.ShareMaxRecords(10))
	b := shareConsumer(t, n.Addr(), "workers", "jobs", kgo.ShareMaxRecords(10))
	warmShare(t, prod, a, "jobs")

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

	produceSync(t, prod, &kgo.Record{Topic: "retries", Key: []byte("job"), Value: []byte("r")},
		&kgo.Record{Topic: "retries", Key: []byte("job"), Value: []byte("x")})

	// receive waits for the jobs with values vs (in one or more polls:
	// a poll auto-accepts what the one before it returned unacked).
	receive := func(vs ...string) map[string]*kgo.Record {
		t.Helper()
		got := map[string]*kgo.Record{}
		tc.Eventually(t, 30*time.Second, func() error {
			for _, r := range pollFor(t, cl, 500*time.Millisecond) {
				got[string(r.Value)] = r
			}
			for _, v := range vs {
				if got[v] == nil {
					return fmt.Errorf("job %s not delivered", v)
				}
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
	produceSync(t, prod, &kgo.Record{Topic: "locks", Key: []byte("job"), Value: []byte("1")},
		&kgo.Record{Topic: "locks", Key: []byte("job"), Value: []byte("2")})
	held := map[string]bool{}
	tc.Eventually(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, hung, 500*time.Millisecond) {
			held[string(r.Value)] = true
		}
		if !held["1"] || !held["2"] {
			return fmt.Errorf("hung consumer holds %v", held)
		}
		return nil
	})
	acquired := time.Now()
	// hung polls no more: it neither acks nor renews. Another member gets
	// the jobs once the locks expire.
	other := shareConsumer(t, n.Addr(), "lockers", "locks")
	got := map[string]int32{}
	tc.Eventually(t, 30*time.Second, func() error {
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
	tc.Eventually(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, first, 500*time.Millisecond) {
			if string(r.Value) == "1" {
				return nil
			}
		}
		return errors.New("first consumer has no job")
	})
	first.Close() // without acking: kgo releases what it holds
	other := shareConsumer(t, n.Addr(), "handoff", "handoff")
	tc.Eventually(t, 30*time.Second, func() error {
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
