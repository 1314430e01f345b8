package tests

// Work queues on a three-node cluster: competing kgo share consumers
// process every job while jobs are produced and the leader of a
// partition is killed mid-stream. A job is accepted once; it comes back
// only if it was in flight when its leader died, and then with a higher
// delivery count, never as a fresh delivery.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

func TestShareClusterCompetingWorkersThroughFailover(t *testing.T) {
	c := tc.StartCluster(t, 3,
		"--group.share.record.lock.duration.ms", "3000",
		"--group.share.retry.backoff.initial.ms", "200",
		"--group.share.retry.backoff.max.ms", "200")
	seeds := c.Addrs()
	ctx := ctxT(t, 180*time.Second)
	adm := tc.Admin(t, seeds[0])
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50 * time.Millisecond)}
	prod := tc.Client(t, seeds[0], opts...)
	// Every share-partition starts at the log start, whenever a consumer
	// first fetches it.
	poll.Until(t, 30*time.Second, func() error {
		return alterGroupConfigs(t, prod, "workers", "share.auto.offset.reset", "earliest")
	})

	const jobs = 600
	type delivery struct{ count int32 }
	var (
		mu   sync.Mutex
		seen = map[string][]delivery{}
	)
	done := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		cl := shareConsumer(t, seeds[0], "workers", "jobs", opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				pctx, cancel := context.WithTimeout(wctx, time.Second)
				fs := cl.PollFetches(pctx)
				cancel()
				for _, r := range fs.Records() {
					mu.Lock()
					seen[string(r.Value)] = append(seen[string(r.Value)], delivery{r.DeliveryCount()})
					mu.Unlock()
					r.Ack(kgo.AckAccept)
				}
				if err := cl.FlushAcks(wctx); err != nil && wctx.Err() == nil {
					t.Logf("worker %s: flushing acks: %v (the jobs come back)", name, err)
				}
			}
		}()
	}

	// Produce at about 200 jobs/s; kill the leader of partition 0 once a
	// quarter of the jobs are done.
	perr := make(chan error, 1)
	go func() {
		for i := range jobs {
			r := &kgo.Record{Topic: "jobs", Key: fmt.Appendf(nil, "k%d", i%30), Value: fmt.Appendf(nil, "job-%d", i)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				perr <- err
				return
			}
			time.Sleep(5 * time.Millisecond) // pacing, not synchronisation
		}
		perr <- nil
	}()
	poll.Until(t, 60*time.Second, func() error {
		if n := done(); n < jobs/4 {
			return fmt.Errorf("%d jobs done", n)
		}
		return nil
	})
	var leader int32 = -1
	poll.Until(t, 10*time.Second, func() error {
		ts, err := adm.ListTopics(ctx, "jobs")
		if err != nil {
			return err
		}
		// Node ids start at 1: a missing partition reads as leader 0.
		if leader = ts["jobs"].Partitions[0].Leader; leader <= 0 {
			return fmt.Errorf("no leader: %+v", ts["jobs"])
		}
		return nil
	})
	c.Kill(leader)
	t.Logf("killed node %d, leader of jobs/0, after %d jobs", leader, done())
	if err := <-perr; err != nil {
		t.Fatalf("producing: %v", err)
	}
	poll.Until(t, 90*time.Second, func() error {
		if n := done(); n < jobs {
			return fmt.Errorf("%d of %d jobs done", n, jobs)
		}
		return nil
	})
	stop()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	again := 0
	for v, ds := range seen {
		// Each delivery of a job has a count of its own: a forgotten
		// delivery would hand the job out again with a count already
		// used. The workers' order of appending is not the broker's order
		// of delivering (a client may hold a fetched copy while its lock
		// runs out and the other worker takes the job), so the counts are
		// compared sorted.
		counts := make([]int32, len(ds))
		for i, d := range ds {
			counts[i] = d.count
		}
		slices.Sort(counts)
		for i := 1; i < len(counts); i++ {
			if counts[i] == counts[i-1] {
				t.Errorf("%s delivered twice with count %d (counts %v): a delivery was forgotten", v, counts[i], counts)
			}
		}
		if len(ds) > 1 {
			again++
		}
	}
	t.Logf("%d jobs, %d delivered more than once (in flight when the leader died)", len(seen), again)
	if again > jobs/4 {
		t.Errorf("%d of %d jobs delivered more than once: more than were in flight", again, jobs)
	}
}
