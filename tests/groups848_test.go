package tests

// KIP-848 consumer groups: kgo clients with kgo.ServerSideBalancer() join
// through ConsumerGroupHeartbeat and the coordinator assigns. The
// heartbeat interval is the broker's (group.consumer.heartbeat.interval.ms,
// 5 s by default); these brokers use 500 ms so reassignments are quick.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// start848 starts a broker whose consumer group members heartbeat every
// 500 ms.
func start848(t *testing.T) *tc.Node {
	return tc.Start(t, tc.With("group.consumer.heartbeat.interval.ms", "500"))
}

// produceValues produces n records with values prefix-0 ... prefix-(n-1).
func produceValues(t *testing.T, addr, topic, prefix string, n int) {
	t.Helper()
	cl := tc.Client(t, addr, kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%d", prefix, i)
		recs = append(recs, &kgo.Record{Key: []byte(v), Value: []byte(v)})
	}
	produceSync(t, cl, recs...)
}

// describe848 describes one consumer group, failing on errors the caller
// does not poll through.
func describe848(ctx context.Context, adm *kadm.Client, group string) (kadm.DescribedConsumerGroup, error) {
	dg, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return kadm.DescribedConsumerGroup{}, err
	}
	g, ok := dg[group]
	if !ok {
		return g, fmt.Errorf("group %s not described", group)
	}
	return g, g.Err
}

// stableWith checks that g is Stable with one member per entry of want,
// each assigned that many partitions of topic, none twice.
func stableWith(g kadm.DescribedConsumerGroup, topic string, want ...int) error {
	if g.State != "Stable" || len(g.Members) != len(want) {
		return fmt.Errorf("group %s with %d members, want Stable with %d", g.State, len(g.Members), len(want))
	}
	owner := map[int32]string{}
	var got []int
	for _, m := range g.Members {
		ps := m.Assignment[topic]
		for p := range ps {
			if o, dup := owner[p]; dup {
				return fmt.Errorf("partition %d assigned to %s and %s", p, o, m.MemberID)
			}
			owner[p] = m.MemberID
		}
		if !maps.Equal(m.Assignment[topic], m.TargetAssignment[topic]) {
			return fmt.Errorf("member %s at %v, target %v", m.MemberID, m.Assignment, m.TargetAssignment)
		}
		got = append(got, len(ps))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("members own %v partitions, want %v", got, want)
	}
	return nil
}

// committedToEnd waits until the group's committed offsets reach the end
// of every partition of topic.
func committedToEnd(t *testing.T, adm *kadm.Client, group, topic string) {
	t.Helper()
	poll.Until(t, 60*time.Second, func() error {
		ctx := ctxT(t, 10*time.Second)
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			return err
		}
		var behind error
		ends.Each(func(o kadm.ListedOffset) {
			if c, _ := offs.Lookup(o.Topic, o.Partition); c.At != o.Offset {
				behind = fmt.Errorf("partition %d committed at %d, end %d", o.Partition, c.At, o.Offset)
			}
		})
		return behind
	})
}

// Two server-side-balanced consumers share a 4-partition topic two
// partitions each and process every record once; when one leaves, the
// other gets all four and goes on from the committed offsets.
func TestConsumerGroup848SharesAndTakesOver(t *testing.T) {
	n := start848(t)
	const topic, group = "events848", "g848"
	tc.CreateTopic(t, n.Addr(), topic, 4, nil)
	produceValues(t, n.Addr(), topic, "first", 400)

	var mu sync.Mutex
	seen := map[string]int{}
	count := func(_ int, r *kgo.Record) {
		mu.Lock()
		seen[string(r.Value)]++
		mu.Unlock()
	}
	waitSeen := func(prefix string, n int) {
		t.Helper()
		poll.Until(t, 60*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			for i := 0; i < n; i++ {
				if seen[fmt.Sprintf("%s-%d", prefix, i)] == 0 {
					return fmt.Errorf("record %s-%d not processed yet (%d distinct so far)", prefix, i, len(seen))
				}
			}
			return nil
		})
	}
	a := startGroupConsumer(t, n.Addr(), group, topic, count, 0, kgo.ServerSideBalancer())
	defer a.Close()
	b := startGroupConsumer(t, n.Addr(), group, topic, count, 1, kgo.ServerSideBalancer())
	bClosed := false
	defer func() {
		if !bClosed {
			b.Close()
		}
	}()

	adm := tc.Admin(t, n.Addr())
	poll.Until(t, 60*time.Second, func() error {
		g, err := describe848(ctxT(t, 10*time.Second), adm, group)
		if err != nil {
			return err
		}
		return stableWith(g, topic, 2, 2)
	})
	waitSeen("first", 400)

	// The group is listed, and described by DescribeGroups, as a
	// consumer group.
	ctx := ctxT(t, 30*time.Second)
	listed, err := adm.ListGroupsByType(ctx, []string{"consumer"})
	if err != nil {
		t.Fatal(err)
	}
	if lg, ok := listed[group]; !ok || lg.GroupType != "consumer" || lg.ProtocolType != "consumer" {
		t.Fatalf("ListGroups(consumer) = %+v, want %s as a consumer group", listed, group)
	}
	if classic, err := adm.ListGroupsByType(ctx, []string{"classic"}); err != nil || len(classic) != 0 {
		t.Fatalf("ListGroups(classic) = %+v, %v; want none", classic, err)
	}
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil || dg[group].Err != nil || dg[group].ProtocolType != "consumer" || len(dg[group].Members) != 2 {
		t.Fatalf("DescribeGroups = %+v, %v", dg[group], err)
	}

	// b leaves once everything it processed is committed; a takes over.
	committedToEnd(t, adm, group, topic)
	b.Close()
	bClosed = true
	poll.Until(t, 60*time.Second, func() error {
		g, err := describe848(ctxT(t, 10*time.Second), adm, group)
		if err != nil {
			return err
		}
		return stableWith(g, topic, 4)
	})
	produceValues(t, n.Addr(), topic, "second", 400)
	waitSeen("second", 400)

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 800 {
		t.Fatalf("processed %d distinct records, want 800", len(seen))
	}
	for v, c := range seen {
		if c != 1 {
			t.Fatalf("record %s processed %d times", v, c)
		}
	}
}

// The range assignor gives members with the same subscription the same
// partitions of co-partitioned topics.
func TestConsumerGroup848RangeCopartitions(t *testing.T) {
	n := start848(t)
	const group = "range848"
	tc.CreateTopic(t, n.Addr(), "left848", 2, nil)
	tc.CreateTopic(t, n.Addr(), "right848", 2, nil)
	var consumers []*kgo.Client
	for i := 0; i < 2; i++ {
		consumers = append(consumers, tc.Client(t, n.Addr(),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics("left848", "right848"),
			kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer()))
	}
	// kgo joins on its first poll.
	pollCtx, stopPolling := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, cl := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				cl.PollFetches(pollCtx)
			}
		}()
	}
	defer func() {
		stopPolling()
		wg.Wait()
	}()

	adm := tc.Admin(t, n.Addr())
	poll.Until(t, 60*time.Second, func() error {
		g, err := describe848(ctxT(t, 10*time.Second), adm, group)
		if err != nil {
			return err
		}
		if g.AssignorName != "range" {
			return fmt.Errorf("assignor %q, want range", g.AssignorName)
		}
		if err := stableWith(g, "left848", 1, 1); err != nil {
			return err
		}
		for _, m := range g.Members {
			if !maps.Equal(m.Assignment["left848"], m.Assignment["right848"]) {
				return fmt.Errorf("member %s: left %v, right %v", m.MemberID, m.Assignment["left848"], m.Assignment["right848"])
			}
			if m.MemberType != 1 || m.MemberEpoch != g.Epoch {
				return fmt.Errorf("member %s: type %d epoch %d (group epoch %d)", m.MemberID, m.MemberType, m.MemberEpoch, g.Epoch)
			}
		}
		return nil
	})
}

// A static member (group.instance.id) that closes leaves temporarily: its
// partitions wait for it, and a new client with the same instance id gets
// them back without the group moving to a new epoch.
func TestConsumerGroup848StaticMemberRejoins(t *testing.T) {
	n := start848(t)
	const topic, group = "static848", "s848"
	tc.CreateTopic(t, n.Addr(), topic, 4, nil)
	newStatic := func(instance string) *kgo.Client {
		return tc.Client(t, n.Addr(), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.InstanceID(instance), kgo.ServerSideBalancer())
	}
	pollCtx, stopPolling := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	pollOnce := func(cl *kgo.Client) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil && !cl.PollFetches(pollCtx).IsClientClosed() {
			}
		}()
	}
	defer func() {
		stopPolling()
		wg.Wait()
	}()
	c0, c1 := newStatic("i0"), newStatic("i1")
	pollOnce(c0)
	pollOnce(c1)

	adm := tc.Admin(t, n.Addr())
	var before kadm.DescribedConsumerGroup
	poll.Until(t, 60*time.Second, func() error {
		var err error
		if before, err = describe848(ctxT(t, 10*time.Second), adm, group); err != nil {
			return err
		}
		return stableWith(before, topic, 2, 2)
	})
	c1.Close()
	poll.Until(t, 30*time.Second, func() error {
		g, err := describe848(ctxT(t, 10*time.Second), adm, group)
		if err != nil {
			return err
		}
		if len(g.Members) != 2 || g.Members[1].MemberEpoch != -2 {
			return fmt.Errorf("members %+v, want i1 at epoch -2", g.Members)
		}
		if g.Epoch != before.Epoch || len(g.Members[0].Assignment[topic]) != 2 {
			return fmt.Errorf("epoch %d (was %d), i0 owns %v", g.Epoch, before.Epoch, g.Members[0].Assignment)
		}
		return nil
	})
	pollOnce(newStatic("i1"))
	poll.Until(t, 30*time.Second, func() error {
		g, err := describe848(ctxT(t, 10*time.Second), adm, group)
		if err != nil {
			return err
		}
		if err := stableWith(g, topic, 2, 2); err != nil {
			return err
		}
		switch m := g.Members[1]; {
		case g.Epoch != before.Epoch:
			return fmt.Errorf("epoch %d, was %d", g.Epoch, before.Epoch)
		case m.MemberID == before.Members[1].MemberID:
			return fmt.Errorf("i1 kept member id %s", m.MemberID)
		case !maps.Equal(m.Assignment[topic], before.Members[1].Assignment[topic]):
			return fmt.Errorf("i1 owns %v, owned %v", m.Assignment, before.Members[1].Assignment)
		}
		return nil
	})
}
