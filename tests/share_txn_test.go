package tests

// Share groups and transactions (KIP-932's share.isolation.level): a
// read_committed group gets the committed and the non-transactional
// records and never one of an aborted transaction, waits at the last
// stable offset while a transaction is open, and archives aborted records
// and markers so that its start offset moves past them; a
// read_uncommitted group (the default) gets every record; a group
// switched to read_committed applies it at its next fetch.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// shareCollector accepts every record its share consumer gets and counts
// the values.
type shareCollector struct {
	cl  *kgo.Client
	got map[string]int
}

func newShareCollector(t *testing.T, addr, group, topic string) *shareCollector {
	return &shareCollector{cl: shareConsumer(t, addr, group, topic), got: map[string]int{}}
}

// poll polls once for at most d, accepts what came and returns the values.
func (c *shareCollector) poll(t *testing.T, d time.Duration) []string {
	t.Helper()
	var vals []string
	for _, r := range pollFor(t, c.cl, d) {
		vals = append(vals, string(r.Value))
		c.got[string(r.Value)]++
		r.Ack(kgo.AckAccept)
	}
	if len(vals) > 0 {
		flushAcks(t, c.cl)
	}
	return vals
}

// waitFor polls until every value in want has been received.
func (c *shareCollector) waitFor(t *testing.T, want ...string) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		c.poll(t, 500*time.Millisecond)
		for _, v := range want {
			if c.got[v] == 0 {
				return fmt.Errorf("%s not received yet (got %v)", v, c.got)
			}
		}
		return nil
	})
}

// check fails the test unless the values received are exactly want, each
// once.
func (c *shareCollector) check(t *testing.T, name string, want ...string) {
	t.Helper()
	var got []string
	for v, n := range c.got {
		if n != 1 {
			t.Errorf("%s: %s received %d times", name, v, n)
		}
		got = append(got, v)
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s received %v, want %v", name, got, want)
	}
}

// shareStart is group's start offset on partition 0 of topic.
func shareStart(t *testing.T, adm *kadm.Client, group, topic string) (int64, error) {
	t.Helper()
	ds, err := adm.DescribeShareGroupOffsets(ctxT(t, 10*time.Second), group)
	if err != nil {
		return 0, err
	}
	d, ok := ds[group]
	if !ok || d.Err != nil {
		return 0, fmt.Errorf("describing %s: %v", group, d.Err)
	}
	o, ok := d.Offsets[topic][0]
	if !ok || o.Err != nil {
		return 0, fmt.Errorf("%s has no start offset on %s-0 (%v)", group, topic, o.Err)
	}
	return o.StartOffset, nil
}

// waitStart waits until group's start offset on topic-0 is at.
func waitStart(t *testing.T, adm *kadm.Client, group, topic string, at func() int64) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		start, err := shareStart(t, adm, group, topic)
		if err != nil {
			return err
		}
		if want := at(); start != want {
			return fmt.Errorf("%s: start offset %d, want %d", group, start, want)
		}
		return nil
	})
}

func TestShareReadCommitted(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "orders", 1, nil)
	adm := tc.Admin(t, n.Addr())
	plain := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("orders"))
	txA := tc.Client(t, n.Addr(), kgo.TransactionalID("orders-a"), kgo.DefaultProduceTopic("orders"))
	txB := tc.Client(t, n.Addr(), kgo.TransactionalID("orders-b"), kgo.DefaultProduceTopic("orders"))
	setGroupConfigs(t, plain, "committed", "share.isolation.level", "read_committed", "share.auto.offset.reset", "earliest")
	setGroupConfigs(t, plain, "uncommitted", "share.auto.offset.reset", "earliest")
	produce := func(cl *kgo.Client, vals ...string) {
		t.Helper()
		for _, v := range vals {
			produceSync(t, cl, &kgo.Record{Value: []byte(v)})
		}
	}
	end := func(cl *kgo.Client, how kgo.TransactionEndTry) {
		t.Helper()
		must(t, "EndTransaction", cl.EndTransaction(ctxT(t, 30*time.Second), how))
	}
	offsets := func(list func(context.Context, ...string) (kadm.ListedOffsets, error)) int64 {
		t.Helper()
		l, err := list(ctxT(t, 10*time.Second), "orders")
		must(t, "ListOffsets", err)
		o, _ := l.Lookup("orders", 0)
		return o.Offset
	}
	hw := func() int64 { return offsets(adm.ListEndOffsets) }
	lso := func() int64 { return offsets(adm.ListCommittedOffsets) }

	// Two producers' transactions overlap, aborted and committed ones
	// interleaved with each other and with a non-transactional producer.
	must(t, "BeginTransaction", txA.BeginTransaction())
	must(t, "BeginTransaction", txB.BeginTransaction())
	produce(txA, "a1")
	produce(txB, "b1")
	produce(plain, "p1")
	produce(txA, "a2")
	produce(txB, "b2")
	end(txB, kgo.TryAbort)
	produce(plain, "p2")
	end(txA, kgo.TryCommit)
	must(t, "BeginTransaction", txA.BeginTransaction())
	produce(txA, "a3")
	produce(plain, "p3")
	end(txA, kgo.TryAbort)
	must(t, "BeginTransaction", txB.BeginTransaction())
	produce(txB, "b3")
	end(txB, kgo.TryCommit)
	produce(plain, "p4")

	committed := newShareCollector(t, n.Addr(), "committed", "orders")
	uncommitted := newShareCollector(t, n.Addr(), "uncommitted", "orders")
	committed.waitFor(t, "a1", "a2", "b3", "p1", "p2", "p3", "p4")
	uncommitted.waitFor(t, "a1", "a2", "a3", "b1", "b2", "b3", "p1", "p2", "p3", "p4")
	// The aborted records and the markers are archived: both groups'
	// start offsets reach the end of the log.
	waitStart(t, adm, "committed", "orders", hw)
	waitStart(t, adm, "uncommitted", "orders", hw)
	committed.check(t, "read_committed", "a1", "a2", "b3", "p1", "p2", "p3", "p4")
	uncommitted.check(t, "read_uncommitted", "a1", "a2", "a3", "b1", "b2", "b3", "p1", "p2", "p3", "p4")

	// An open transaction holds a read_committed group at the last
	// stable offset, even for the plain record after it, until it
	// commits; the read_uncommitted group gets both at once.
	must(t, "BeginTransaction", txA.BeginTransaction())
	produce(txA, "a5")
	produce(plain, "p5")
	uncommitted.waitFor(t, "a5", "p5")
	if l := lso(); l >= hw() {
		t.Fatalf("last stable offset %d with a transaction open (high watermark %d)", l, hw())
	}
	waitStart(t, adm, "committed", "orders", lso)
	if got := committed.poll(t, time.Second); len(got) > 0 { // a negative check: nothing may come
		t.Fatalf("read_committed got %v past the last stable offset", got)
	}
	end(txA, kgo.TryCommit)
	committed.waitFor(t, "a5", "p5")
	waitStart(t, adm, "committed", "orders", hw)

	// Switched to read_committed, the other group applies it at its next
	// fetch: an aborted record is no longer delivered.
	setGroupConfigs(t, plain, "uncommitted", "share.isolation.level", "read_committed")
	must(t, "BeginTransaction", txB.BeginTransaction())
	produce(txB, "b6")
	produce(plain, "p6")
	end(txB, kgo.TryAbort)
	produce(plain, "p7")
	uncommitted.waitFor(t, "p6", "p7")
	committed.waitFor(t, "p6", "p7")
	waitStart(t, adm, "uncommitted", "orders", hw)
	waitStart(t, adm, "committed", "orders", hw)
	for name, c := range map[string]*shareCollector{"committed": committed, "uncommitted": uncommitted} {
		for v := range c.got {
			if strings.HasPrefix(v, "b6") {
				t.Errorf("%s: got %s of an aborted transaction after switching to read_committed", name, v)
			}
		}
	}
	committed.check(t, "read_committed", "a1", "a2", "b3", "p1", "p2", "p3", "p4", "a5", "p5", "p6", "p7")
}
