package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

func produceN(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl := tc.Client(t, addr, kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	produceSync(t, cl, recs...)
}

// groupConsumer consumes in a group and reports each record it processes.
type groupConsumer struct {
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}
}

func startGroupConsumer(t *testing.T, addr, group, topic string, seen func(member int, r *kgo.Record), member int, opts ...kgo.Opt) *groupConsumer {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.DisableAutoCommit(),
		// No rebalance between a poll and its commit: records are processed
		// once per group, not at least once.
		kgo.BlockRebalanceOnPoll(),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gc := &groupConsumer{cl: cl, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(gc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { seen(member, r) })
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				t.Logf("member %d commit: %v", member, err)
			}
			cl.AllowRebalance()
		}
	}()
	return gc
}

func (g *groupConsumer) Close() {
	g.stop()
	<-g.done
	g.cl.Close()
}

// Members of one group share the partitions, each record is processed once
// per group, and a second group gets every record too.
func TestGroupsShareWithinAndFanOutAcross(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "orders", 6, nil)
	produceN(t, n.Addr(), "orders", 600)

	var mu sync.Mutex
	perGroup := map[string]map[string]int{"email": {}, "fraud": {}}
	members := map[int]bool{}
	var gcs []*groupConsumer
	for i := 0; i < 3; i++ {
		i := i
		gcs = append(gcs, startGroupConsumer(t, n.Addr(), "email", "orders", func(m int, r *kgo.Record) {
			mu.Lock()
			perGroup["email"][string(r.Value)]++
			members[m] = true
			mu.Unlock()
		}, i))
	}
	// The second group uses an eager assignor (range), the first kgo's
	// default cooperative-sticky one: both must work.
	for i := 0; i < 2; i++ {
		gcs = append(gcs, startGroupConsumer(t, n.Addr(), "fraud", "orders", func(m int, r *kgo.Record) {
			mu.Lock()
			perGroup["fraud"][string(r.Value)]++
			mu.Unlock()
		}, 10+i, kgo.Balancers(kgo.RangeBalancer())))
	}
	defer func() {
		for _, g := range gcs {
			g.Close()
		}
	}()
	poll.Until(t, 60*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(perGroup["email"]) < 600 || len(perGroup["fraud"]) < 600 {
			return fmt.Errorf("email saw %d, fraud saw %d distinct records", len(perGroup["email"]), len(perGroup["fraud"]))
		}
		return nil
	})
	mu.Lock()
	for g, m := range perGroup {
		for v, c := range m {
			if c != 1 {
				t.Fatalf("group %s processed record %s %d times", g, v, c)
			}
		}
	}
	mu.Unlock()
	_ = members
	// The three members share the six partitions: each owns some, none twice.
	adm := tc.Admin(t, n.Addr())
	poll.Until(t, 30*time.Second, func() error {
		dg, err := adm.DescribeGroups(ctxT(t, 10*time.Second), "email")
		if err != nil {
			return err
		}
		g := dg["email"]
		if g.State != "Stable" || len(g.Members) != 3 {
			return fmt.Errorf("group %s with %d members", g.State, len(g.Members))
		}
		owner := map[int32]string{}
		for _, m := range g.Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok {
				return fmt.Errorf("member %s: no consumer assignment", m.MemberID)
			}
			n := 0
			for _, tp := range ca.Topics {
				for _, p := range tp.Partitions {
					if o, dup := owner[p]; dup {
						return fmt.Errorf("partition %d owned by %s and %s", p, o, m.MemberID)
					}
					owner[p] = m.MemberID
					n++
				}
			}
			if n == 0 {
				return fmt.Errorf("member %s owns no partition", m.MemberID)
			}
		}
		if len(owner) != 6 {
			return fmt.Errorf("%d of 6 partitions assigned", len(owner))
		}
		return nil
	})
}

// Committed offsets survive a broker restart and consumption resumes there;
// reset to earliest replays.
func TestCommittedOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	n := tc.StartIn(t, dir)
	tc.CreateTopic(t, n.Addr(), "resume", 1, nil)
	produceN(t, n.Addr(), "resume", 100)
	adm := tc.Admin(t, n.Addr())
	ctx := ctxT(t, 30*time.Second)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "resume", Partition: 0, At: 40, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "g1", offs)
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	n.Close()
	n = tc.StartIn(t, dir)
	adm = tc.Admin(t, n.Addr())
	var fetched kadm.OffsetResponses
	poll.Until(t, 20*time.Second, func() error {
		var err error
		fetched, err = adm.FetchOffsets(ctx, "g1")
		if err == nil {
			err = fetched.Error()
		}
		return err
	})
	if o, _ := fetched.Lookup("resume", 0); o.At != 40 {
		t.Fatalf("committed offset after restart = %d, want 40", o.At)
	}
	var got []int64
	var mu sync.Mutex
	gc := startGroupConsumer(t, n.Addr(), "g1", "resume", func(_ int, r *kgo.Record) {
		mu.Lock()
		got = append(got, r.Offset)
		mu.Unlock()
	}, 0)
	poll.Until(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) < 60 {
			return fmt.Errorf("%d records", len(got))
		}
		return nil
	})
	gc.Close()
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if got[0] != 40 {
		t.Fatalf("resumed at %d, want 40", got[0])
	}
}

// A commit from a stale generation (a zombie) is refused and does not move
// the group's offsets.
func TestZombieCommitRejected(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "z", 1, nil)
	produceN(t, n.Addr(), "z", 10)
	var mu sync.Mutex
	count := 0
	gc := startGroupConsumer(t, n.Addr(), "zg", "z", func(int, *kgo.Record) { mu.Lock(); count++; mu.Unlock() }, 0)
	defer gc.Close()
	poll.Until(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if count < 10 {
			return fmt.Errorf("%d records", count)
		}
		return nil
	})
	ctx := ctxT(t, 10*time.Second)
	cl := tc.Client(t, n.Addr())
	desc, err := kadm.NewClient(cl).DescribeGroups(ctx, "zg")
	if err != nil || desc["zg"].Err != nil || len(desc["zg"].Members) != 1 {
		t.Fatalf("describe: %v %+v", err, desc["zg"])
	}
	member := desc["zg"].Members[0].MemberID
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = "zg", -5, member
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "z"
	td, _ := kadm.NewClient(cl).ListTopics(ctx, "z")
	rt.TopicID = td["z"].ID // OffsetCommit v10 names topics by id
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if ec := resp.Topics[0].Partitions[0].ErrorCode; !errors.Is(kerr.ErrorForCode(ec), kerr.IllegalGeneration) {
		t.Fatalf("stale-generation commit: %v, want ILLEGAL_GENERATION", kerr.ErrorForCode(ec))
	}
	req.Generation, req.MemberID = 1, "not-a-member"
	resp, _ = req.RequestWith(ctx, cl)
	if ec := resp.Topics[0].Partitions[0].ErrorCode; !errors.Is(kerr.ErrorForCode(ec), kerr.UnknownMemberID) && !errors.Is(kerr.ErrorForCode(ec), kerr.IllegalGeneration) {
		t.Fatalf("unknown-member commit: %v", kerr.ErrorForCode(ec))
	}
	offs, _ := kadm.NewClient(cl).FetchOffsets(ctx, "zg")
	if o, ok := offs.Lookup("z", 0); ok && o.At == 3 {
		t.Fatal("the zombie's commit moved the group's offset")
	}
}

// scrape returns the value of one metric line from /metrics.
func scrape(t *testing.T, n *tc.Node, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, series+" ") {
			v, err := strconv.ParseFloat(strings.TrimPrefix(line, series+" "), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// Lag and the oldest unconsumed record's age are computed broker-side and
// move as a group falls behind and catches up.
func TestLagAndOldestAgeMetrics(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "lagged", 1, nil)
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("lagged"))
	old := time.Now().Add(-90 * time.Second)
	for i := 0; i < 100; i++ {
		produceSync(t, cl, &kgo.Record{Value: []byte(fmt.Sprint(i)), Timestamp: old.Add(time.Duration(i) * time.Millisecond)})
	}
	adm := tc.Admin(t, n.Addr())
	commit := func(at int64) {
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "lagged", Partition: 0, At: at, LeaderEpoch: -1})
		if r, err := adm.CommitOffsets(ctxT(t, 10*time.Second), "slow", offs); err != nil || r.Error() != nil {
			t.Fatalf("commit %d: %v %v", at, err, r.Error())
		}
	}
	lagSeries := `berth_group_lag_records{group="slow",partition="0",topic="lagged"}`
	ageSeries := `berth_group_oldest_unconsumed_age_seconds{group="slow",partition="0",topic="lagged"}`
	commit(10)
	if lag, ok := scrape(t, n, lagSeries); !ok || lag != 90 {
		t.Fatalf("lag after committing 10 of 100: %v (found %v)", lag, ok)
	}
	if age, _ := scrape(t, n, ageSeries); age < 85 || age > 600 {
		t.Fatalf("oldest unconsumed age %v s, want about 90", age)
	}
	commit(100)
	if lag, _ := scrape(t, n, lagSeries); lag != 0 {
		t.Fatalf("lag after catching up: %v", lag)
	}
	if age, _ := scrape(t, n, ageSeries); age != 0 {
		t.Fatalf("age after catching up: %v", age)
	}
}

// Static members (group.instance.id) restart without a rebalance: the
// generation stays the same.
func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "static", 2, nil)
	produceN(t, n.Addr(), "static", 20)
	adm := tc.Admin(t, n.Addr())
	// rebalances waits for a stable group of two, each member with one of
	// the two partitions, and returns how many generations it has been
	// through (DescribeGroups has no generation). The group is also
	// Stable between the two rebalances of kgo's cooperative protocol
	// (the first takes a partition from a, the second gives it to b), so
	// the assignment, not the state, tells that the rebalancing is over.
	rebalances := func() float64 {
		poll.Until(t, 30*time.Second, func() error {
			dg, err := adm.DescribeGroups(ctxT(t, 10*time.Second), "statics")
			if err != nil {
				return err
			}
			g := dg["statics"]
			if g.State != "Stable" || len(g.Members) != 2 {
				return fmt.Errorf("state %s, %d members", g.State, len(g.Members))
			}
			for _, m := range g.Members {
				ca, ok := m.Assigned.AsConsumer()
				if !ok || len(ca.Topics) != 1 || len(ca.Topics[0].Partitions) != 1 {
					return fmt.Errorf("member %s assigned %+v, want one partition", m.MemberID, m.Assigned)
				}
			}
			return nil
		})
		v, ok := scrape(t, n, `berth_group_rebalances_total{group="statics"}`)
		if !ok || v < 1 {
			t.Fatalf("no rebalance counted for the group (%v)", v)
		}
		return v
	}
	seen := func(int, *kgo.Record) {}
	a := startGroupConsumer(t, n.Addr(), "statics", "static", seen, 0, kgo.InstanceID("a"), kgo.SessionTimeout(10*time.Second))
	b := startGroupConsumer(t, n.Addr(), "statics", "static", seen, 1, kgo.InstanceID("b"), kgo.SessionTimeout(10*time.Second))
	defer b.Close()
	before := rebalances()
	a.Close() // a static member leaves no LeaveGroup behind
	a = startGroupConsumer(t, n.Addr(), "statics", "static", seen, 0, kgo.InstanceID("a"), kgo.SessionTimeout(10*time.Second))
	defer a.Close()
	after := rebalances()
	if after != before {
		t.Fatalf("rebalances went from %v to %v when a static member restarted", before, after)
	}
}
