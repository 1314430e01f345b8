package tests

// Share-partition state persisted in __share_group_state: a SIGKILLed
// broker or a moved leader neither loses a job nor forgets its delivery
// count or its retry time.

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// stateJobs drives the common part of the tests: 6 jobs in one batch
// (produced through seeds), taken by cl in one poll; jobs 0-2 accepted,
// job 3 released, jobs 4-5 left acquired. It returns when the
// acknowledgements are durable, with the times of the acquisition and the
// release.
func stateJobs(t *testing.T, seeds []string, cl *kgo.Client, topic string) (acquired, released time.Time) {
	t.Helper()
	var recs []*kgo.Record
	for i := range 6 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("job"), Value: []byte(strconv.Itoa(i))})
	}
	produceOneBatch(t, seeds, recs...)
	var got []*kgo.Record
	poll.Until(t, 30*time.Second, func() error {
		got = append(got, pollFor(t, cl, time.Second)...)
		if len(got) == 0 {
			return errors.New("no jobs yet")
		}
		return nil
	})
	acquired = time.Now()
	if len(got) != 6 {
		t.Fatalf("one poll returned %d of the 6 jobs of one batch", len(got))
	}
	for _, r := range got {
		if r.DeliveryCount() != 1 {
			t.Fatalf("job %s: delivery count %d, want 1", r.Value, r.DeliveryCount())
		}
		switch v, _ := strconv.Atoi(string(r.Value)); {
		case v < 3:
			r.Ack(kgo.AckAccept)
		case v == 3:
			r.Ack(kgo.AckRelease)
		}
	}
	released = time.Now()
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	return acquired, released
}

// expectRedelivered polls cl until jobs 3, 4 and 5 come back, accepting
// them, and fails if one comes with a delivery count other than 2 or if
// an accepted job (0-2) comes back. Then it makes sure, with a marker,
// that nothing else is pending.
func expectRedelivered(t *testing.T, prod, cl *kgo.Client, topic string) map[string]time.Time {
	t.Helper()
	at := map[string]time.Time{}
	poll.Until(t, 60*time.Second, func() error {
		for _, r := range pollFor(t, cl, time.Second) {
			v := string(r.Value)
			switch {
			case string(r.Key) != "job":
			case v == "0" || v == "1" || v == "2":
				t.Fatalf("accepted job %s delivered again (delivery %d)", v, r.DeliveryCount())
			case r.DeliveryCount() != 2:
				t.Fatalf("job %s delivered with count %d, want 2: the count before the failure was lost", v, r.DeliveryCount())
			default:
				at[v] = time.Now()
			}
			r.Ack(kgo.AckAccept)
		}
		if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
			return err
		}
		if len(at) < 3 {
			return fmt.Errorf("redelivered so far: %v", at)
		}
		return nil
	})
	produceSync(t, prod, &kgo.Record{Topic: topic, Key: []byte("marker")})
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, cl, time.Second) {
			r.Ack(kgo.AckAccept)
			if string(r.Key) == "marker" {
				return nil
			}
			t.Fatalf("unexpected delivery %q/%q (count %d)", r.Key, r.Value, r.DeliveryCount())
		}
		return errors.New("no marker yet")
	})
	return at
}

func TestShareStateSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	p := tc.StartProcess(t, dir,
		"--group.share.record.lock.duration.ms", "2000",
		"--group.share.retry.backoff.initial.ms", "3000",
		"--group.share.retry.backoff.max.ms", "3000")
	tc.CreateTopic(t, p.Addr(), "jobs", 1, nil)
	prod := tc.Client(t, p.Addr())
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	warmShare(t, prod, cl, "jobs")
	_, released := stateJobs(t, []string{p.Addr()}, cl, "jobs")

	p.Kill() // SIGKILL: nothing is flushed on the way out
	// The old client cannot reach the restarted broker (a new port); its
	// Close may wait on retries, so it is not waited for.
	go cl.Close()
	p.Restart()
	prod = tc.Client(t, p.Addr())
	// Before any consumer comes back, the restarted broker describes the
	// persisted state: jobs 3-5 are still to do.
	poll.Until(t, 30*time.Second, func() error {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Version = 1
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = "workers"
		g.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "jobs", Partitions: []int32{0}}}
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(ctxT(t, 10*time.Second), prod)
		if err != nil {
			return err
		}
		sp := resp.Groups[0].Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
			return err
		}
		if sp.StartOffset < 0 || sp.Lag != 3 {
			return fmt.Errorf("start offset %d, lag %d; want the state's start offset and lag 3", sp.StartOffset, sp.Lag)
		}
		return nil
	})
	cl2 := shareConsumer(t, p.Addr(), "workers", "jobs")
	at := expectRedelivered(t, prod, cl2, "jobs")
	// Job 3's 3 s backoff (±20%) was persisted with it.
	if d := at["3"].Sub(released); d < 2400*time.Millisecond {
		t.Errorf("released job redelivered %v after its release, before its backoff", d)
	}
}

func TestShareStateSurvivesLeaderFailover(t *testing.T) {
	c := tc.StartCluster(t, 3,
		"--group.share.record.lock.duration.ms", "2000",
		"--group.share.retry.backoff.initial.ms", "1000",
		"--group.share.retry.backoff.max.ms", "1000")
	seeds := c.Addrs()
	adm := tc.Admin(t, seeds[0])
	ctx := ctxT(t, 120*time.Second)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	prod := tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond))
	cl := shareConsumer(t, seeds[0], "workers", "jobs", kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond))
	warmShare(t, prod, cl, "jobs")
	stateJobs(t, seeds, cl, "jobs")

	var leader int32 = -1
	poll.Until(t, 10*time.Second, func() error {
		ps, err := adm.ListTopics(ctx, "jobs")
		if err != nil {
			return err
		}
		// Node ids start at 1: a missing partition reads as leader 0.
		leader = ps["jobs"].Partitions[0].Leader
		if leader <= 0 {
			return fmt.Errorf("no leader: %+v", ps["jobs"])
		}
		return nil
	})
	c.Kill(leader)
	// The consumer goes on with the new leader: jobs 3-5 come back with
	// their delivery counts, 0-2 never.
	expectRedelivered(t, prod, cl, "jobs")
}
