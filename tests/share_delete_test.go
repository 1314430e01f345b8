package tests

// DeleteGroups of a share group (kadm, as kafka-share-groups.sh --delete
// and berth group delete send it) deletes the group's share-partition
// state at the share coordinators and the copies its leaders hold in
// memory, so that a group made again under the same id (by
// AlterShareGroupOffsets or by a consumer joining) starts fresh, at
// share.auto.offset.reset, also after a restart. Berth used to delete
// only the group's records: the state stayed in __share_group_state and
// in the leaders' memory, and the new group resumed where the old one had
// stopped.

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// consumeShareAll reads and accepts records of topic as group until every
// one of want (partition -> offsets) was delivered, failing on a record
// not in want.
func consumeShareAll(t *testing.T, cl *kgo.Client, want map[int32][]int64) {
	t.Helper()
	left := map[[2]int64]bool{}
	for p, offs := range want {
		for _, o := range offs {
			left[[2]int64{int64(p), o}] = true
		}
	}
	poll.Until(t, 60*time.Second, func() error {
		for _, r := range pollFor(t, cl, time.Second) {
			k := [2]int64{int64(r.Partition), r.Offset}
			if _, ok := left[k]; !ok {
				t.Fatalf("%s/%d@%d delivered, not expected (want %v)", r.Topic, r.Partition, r.Offset, want)
			}
			delete(left, k)
			r.Ack(kgo.AckAccept)
		}
		if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("%d records not delivered yet", len(left))
		}
		return nil
	})
}

func offsets(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// deleteGroup deletes group, retrying while its last member leaves.
func deleteGroup(t *testing.T, adm *kadm.Client, group string) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		rs, err := adm.DeleteGroups(ctxT(t, 10*time.Second), group)
		if err != nil {
			return err
		}
		return rs.Error()
	})
}

// alterShareStart sets group's start offset of one partition of topic.
func alterShareStart(t *testing.T, adm *kadm.Client, group, topic string, p int32, at int64) {
	t.Helper()
	to := kadm.Offsets{}
	to.Add(kadm.Offset{Topic: topic, Partition: p, At: at})
	poll.Until(t, 30*time.Second, func() error {
		rs, err := adm.AlterShareGroupOffsets(ctxT(t, 10*time.Second), group, to)
		if err != nil {
			return err
		}
		return rs.Error()
	})
}

func TestShareGroupDeleteForgetsState(t *testing.T) {
	dir := t.TempDir()
	n := tc.StartIn(t, dir)
	tc.CreateTopic(t, n.Addr(), "jobs", 2, nil)
	prod := tc.Client(t, n.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		produceSync(t, prod,
			&kgo.Record{Topic: "jobs", Partition: 0, Value: fmt.Appendf(nil, "p0-%d", i)},
			&kgo.Record{Topic: "jobs", Partition: 1, Value: fmt.Appendf(nil, "p1-%d", i)})
	}
	adm := tc.Admin(t, n.Addr())
	earliest := func() { setGroupConfigs(t, prod, "g", "share.auto.offset.reset", "earliest") }
	all := map[int32][]int64{0: offsets(0, 10), 1: offsets(0, 10)}

	// The group works through every record, then is deleted.
	earliest()
	cl := shareConsumer(t, n.Addr(), "g", "jobs")
	consumeShareAll(t, cl, all)
	cl.Close()
	deleteGroup(t, adm, "g")
	if d, err := adm.DescribeShareGroups(ctxT(t, 10*time.Second), "g"); err != nil || !errors.Is(d["g"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("after DeleteGroups: %+v / %v, want GROUP_ID_NOT_FOUND", d["g"], err)
	}

	// Made again by AlterShareGroupOffsets on partition 0: partition 1
	// has no state (the old group's, start offset 10, is gone), before
	// and after a restart.
	alterShareStart(t, adm, "g", "jobs", 0, 4)
	check := func(cl *kgo.Client) {
		t.Helper()
		poll.Until(t, 30*time.Second, func() error {
			got, err := describeShareOffsets(t, cl, "g", "jobs", 0, 1)
			if err != nil {
				return err
			}
			if got[0] != 4 || got[1] != -1 {
				return fmt.Errorf("start offsets %v, want 0:4 1:-1 (no state)", got)
			}
			return nil
		})
	}
	check(prod)
	n.Close()
	n = tc.StartIn(t, dir)
	prod = tc.Client(t, n.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm = tc.Admin(t, n.Addr())
	check(prod)

	// A consumer of the new group starts at 4 on partition 0 and, with
	// share.auto.offset.reset=earliest (deleted with the old group, set
	// again), at 0 on partition 1.
	earliest()
	cl = shareConsumer(t, n.Addr(), "g", "jobs")
	consumeShareAll(t, cl, map[int32][]int64{0: offsets(4, 10), 1: offsets(0, 10)})
	cl.Close()

	// Deleted again and made again by a consumer joining: everything
	// from the start, on both partitions.
	deleteGroup(t, adm, "g")
	earliest()
	cl = shareConsumer(t, n.Addr(), "g", "jobs")
	consumeShareAll(t, cl, all)
	cl.Close()

	// Deleting the topic drops the broker's share-partitions of it (the
	// registry used to keep them for good).
	if len(shareSeries(t, n.HTTPAddr(), "g")) != 2 {
		t.Fatalf("share-partitions held: %v, want jobs/0 and jobs/1", shareSeries(t, n.HTTPAddr(), "g"))
	}
	if _, err := adm.DeleteTopics(ctxT(t, 10*time.Second), "jobs"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if s := shareSeries(t, n.HTTPAddr(), "g"); len(s) > 0 {
			return fmt.Errorf("share-partitions of the deleted topic still held: %v", s)
		}
		return nil
	})
}

// shareSeries lists the berth_share_* series of group on a node's
// /metrics: one per share-partition the node holds in memory.
func shareSeries(t *testing.T, httpAddr, group string) []string {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "berth_share_inflight_records{") && strings.Contains(l, `group="`+group+`"`) {
			out = append(out, l)
		}
	}
	return out
}

// On three brokers the group's coordinator is one node and its
// share-partitions are led by all three: the deletion reaches every
// share coordinator and every leader, whose in-memory copies go (their
// metrics too), and survives a restart of the whole cluster.
func TestShareGroupDeleteForgetsStateThreeNodes(t *testing.T) {
	c := tc.StartCluster(t, 3)
	seeds := c.Addrs()
	adm := tc.Admin(t, seeds[0])
	ctx := ctxT(t, 180*time.Second)
	const parts = 6
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	prod := tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(50*time.Millisecond))
	all := map[int32][]int64{}
	for p := range int32(parts) {
		for i := range 3 {
			produceSync(t, prod, &kgo.Record{Topic: "jobs", Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
		all[p] = offsets(0, 3)
	}
	leaders := map[int32]int32{}
	poll.Until(t, 10*time.Second, func() error {
		td, err := adm.ListTopics(ctx, "jobs")
		if err != nil {
			return err
		}
		for _, p := range td["jobs"].Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("jobs/%d has no leader", p.Partition)
			}
			leaders[p.Partition] = p.Leader
		}
		return nil
	})
	setGroupConfigs(t, prod, "g", "share.auto.offset.reset", "earliest")
	cl := shareConsumer(t, seeds[0], "g", "jobs", kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond))
	consumeShareAll(t, cl, all)
	cl.Close()
	for _, id := range c.IDs() {
		if len(shareSeries(t, c.Node(id).HTTPAddr(), "g")) == 0 && slicesContainsValue(leaders, id) {
			t.Fatalf("node %d leads share-partitions of g but has no metrics for them", id)
		}
	}

	deleteGroup(t, adm, "g")
	for _, id := range c.IDs() {
		if s := shareSeries(t, c.Node(id).HTTPAddr(), "g"); len(s) > 0 {
			t.Errorf("node %d still holds share-partitions of the deleted group: %v", id, s)
		}
	}

	// Made again by AlterShareGroupOffsets on partition 0 only: each
	// leader reports no state for the others, also after a restart.
	alterShareStart(t, adm, "g", "jobs", 0, 1)
	check := func() {
		t.Helper()
		for p, leader := range leaders {
			cl := c.Direct(t, leader)
			want := int64(-1)
			if p == 0 {
				want = 1
			}
			poll.Until(t, 30*time.Second, func() error {
				req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
				rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
				rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
				rt.Topic, rt.Partitions = "jobs", []int32{p}
				rg.GroupID, rg.Topics = "g", append(rg.Topics, rt)
				req.Groups = append(req.Groups, rg)
				raw, err := tc.DirectRequest(ctxT(t, 10*time.Second), cl, req)
				if err != nil {
					return err
				}
				g := raw.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0]
				if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
					return err
				}
				rp := g.Topics[0].Partitions[0]
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return fmt.Errorf("jobs/%d at its leader %d: %w", p, leader, err)
				}
				if rp.StartOffset != want {
					return fmt.Errorf("jobs/%d at its leader %d: start offset %d, want %d", p, leader, rp.StartOffset, want)
				}
				return nil
			})
		}
	}
	check()
	c.StopAll()
	c.Start(c.IDs()...)
	check()

	setGroupConfigs(t, prod, "g", "share.auto.offset.reset", "earliest")
	want := map[int32][]int64{}
	for p := range all {
		want[p] = all[p]
	}
	want[0] = offsets(1, 3)
	cl = shareConsumer(t, seeds[0], "g", "jobs", kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond))
	consumeShareAll(t, cl, want)
}

func slicesContainsValue(m map[int32]int32, v int32) bool {
	for _, x := range m {
		if x == v {
			return true
		}
	}
	return false
}
