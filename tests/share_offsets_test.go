package tests

// AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932) through
// kadm, as kafka-share-groups.sh --reset-offsets and --delete-offsets
// use them: refused while the group has members, then moving where the
// group's consumers start.

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

func TestShareGroupOffsetsAlterAndDelete(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "jobs", 1, nil)
	prod := tc.Client(t, n.Addr())
	var old []*kgo.Record
	for i := range 10 {
		old = append(old, &kgo.Record{Topic: "jobs", Key: []byte("old"), Value: []byte(strconv.Itoa(i))})
	}
	produceSync(t, prod, old...) // offsets 0-9, before the group exists
	adm := tc.Admin(t, n.Addr())
	ctx := ctxT(t, 90*time.Second)

	cl := shareConsumer(t, n.Addr(), "g", "jobs")
	warmShare(t, prod, cl, "jobs") // the group starts at the end (latest): offset 10 on
	at := kadm.Offsets{}
	at.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 3})
	if _, err := adm.AlterShareGroupOffsets(ctx, "g", at); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("altering the offsets of a group with a member: %v, want NON_EMPTY_GROUP", err)
	}
	cl.Close()

	// Once the member has left, the group starts over at offset 3:
	// records 3-9 and the (accepted, now forgotten) warm-up record.
	poll.Until(t, 30*time.Second, func() error {
		rs, err := adm.AlterShareGroupOffsets(ctx, "g", at)
		if err != nil {
			return err
		}
		return rs.Error()
	})
	cl2 := shareConsumer(t, n.Addr(), "g", "jobs")
	got := map[int64]bool{}
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, cl2, time.Second) {
			if r.Offset < 3 {
				t.Fatalf("offset %d delivered after the start offset moved to 3", r.Offset)
			}
			got[r.Offset] = true
			r.Ack(kgo.AckAccept)
		}
		for o := int64(3); o <= 10; o++ {
			if !got[o] {
				return fmt.Errorf("offset %d not delivered yet (got %v)", o, got)
			}
		}
		return cl2.FlushAcks(ctxT(t, 10*time.Second))
	})
	cl2.Close()

	// Deleting the offsets forgets the state: the next consumer starts
	// at share.auto.offset.reset (latest), past everything so far.
	poll.Until(t, 30*time.Second, func() error {
		rs, err := adm.DeleteShareGroupOffsets(ctx, "g", "jobs")
		if err != nil {
			return err
		}
		return rs.Error()
	})
	if rs, err := adm.DeleteShareGroupOffsets(ctx, "g", "nope"); err != nil || !errors.Is(rs["nope"], kerr.UnknownTopicOrPartition) {
		t.Fatalf("deleting the offsets of an unknown topic: %v / %v, want UNKNOWN_TOPIC_OR_PARTITION", rs, err)
	}
	cl3 := shareConsumer(t, n.Addr(), "g", "jobs")
	poll.Until(t, 60*time.Second, func() error {
		produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("new")})
		for _, r := range pollFor(t, cl3, time.Second) {
			r.Ack(kgo.AckAccept)
			if string(r.Key) != "new" {
				t.Fatalf("offset %d (%s) delivered after the group's offsets were deleted", r.Offset, r.Key)
			}
			return nil
		}
		return errors.New("nothing delivered yet")
	})
}

// describeShareOffsets returns group's start offsets on topic by
// partition: kadm's request (no topic list) when parts is nil, else a
// request naming the partitions.
func describeShareOffsets(t *testing.T, cl *kgo.Client, group, topic string, parts ...int32) (map[int32]int64, error) {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	if parts != nil {
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, parts
		rg.Topics = append(rg.Topics, rt)
	}
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		return nil, err
	}
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("%d groups answered", len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, rt := range g.Topics {
		if rt.Topic != topic {
			return nil, fmt.Errorf("topic %s answered, want only %s", rt.Topic, topic)
		}
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("%s/%d: %w", topic, p.Partition, err)
			}
			out[p.Partition] = p.StartOffset
		}
	}
	return out, nil
}

// AlterShareGroupOffsets on a group id no group has creates the empty
// share group with its share-partition state (Kafka 4.2), so an operator
// sets a new group's start offset before any consumer joins:
// DescribeShareGroupOffsets reports it with and without a topic list,
// before and after a restart, a consumer that joins afterwards starts
// there, and DeleteGroups removes the group. A group id in use by a
// consumer group answers GROUP_ID_NOT_FOUND, as Kafka does.
func TestShareGroupOffsetsAlterCreatesGroup(t *testing.T) {
	dir := t.TempDir()
	n := tc.StartIn(t, dir)
	tc.CreateTopic(t, n.Addr(), "jobs", 2, nil)
	prod := tc.Client(t, n.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		produceSync(t, prod, &kgo.Record{Topic: "jobs", Partition: 0, Value: []byte("p0-" + strconv.Itoa(i))})
	}
	produceSync(t, prod, &kgo.Record{Topic: "jobs", Partition: 1, Value: []byte("p1-old")})
	adm := tc.Admin(t, n.Addr())
	ctx := ctxT(t, 90*time.Second)

	// A consumer group's id is not a share group's.
	commits := kadm.Offsets{}
	commits.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "billing", commits); err != nil {
		t.Fatal(err)
	}
	at := kadm.Offsets{}
	at.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 4})
	if _, err := adm.AlterShareGroupOffsets(ctx, "billing", at); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("altering the share offsets of a consumer group: %v, want GROUP_ID_NOT_FOUND", err)
	}

	rs, err := adm.AlterShareGroupOffsets(ctx, "fresh", at)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		t.Fatalf("altering the offsets of a share group that does not exist yet: %v", err)
	}
	described, err := adm.DescribeShareGroups(ctx, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["fresh"]; d.Err != nil || d.GroupState != "Empty" || len(d.Members) != 0 {
		t.Fatalf("the new share group: %+v, want it Empty", d)
	}
	check := func(cl *kgo.Client) {
		t.Helper()
		poll.Until(t, 30*time.Second, func() error { // after a restart the coordinators load
			ds, err := kadm.NewClient(cl).DescribeShareGroupOffsets(ctxT(t, 10*time.Second), "fresh")
			if err != nil {
				return err
			}
			if d := ds["fresh"]; d.Err != nil || len(d.Offsets) != 1 || len(d.Offsets["jobs"]) != 1 || d.Offsets["jobs"][0].StartOffset != 4 {
				return fmt.Errorf("kadm describe (no topic list): %+v, want jobs/0 at 4 only", d)
			}
			got, err := describeShareOffsets(t, cl, "fresh", "jobs", 0, 1)
			if err != nil {
				return err
			}
			if got[0] != 4 || got[1] != -1 {
				return fmt.Errorf("describe jobs/0,1: %v, want 0:4 1:-1 (no state)", got)
			}
			return nil
		})
	}
	check(prod)

	// The group and its start offset are durable.
	n.Close()
	n = tc.StartIn(t, dir)
	prod = tc.Client(t, n.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm = tc.Admin(t, n.Addr())
	check(prod)

	// A consumer that joins now starts at offset 4 of partition 0
	// (partition 1, with no state, at share.auto.offset.reset=latest).
	cl := shareConsumer(t, n.Addr(), "fresh", "jobs")
	got := map[string]bool{}
	poll.Until(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, cl, time.Second) {
			if r.Partition == 0 && r.Offset < 4 || r.Partition == 1 {
				t.Fatalf("%s/%d@%d (%s) delivered; the group starts at jobs/0@4", r.Topic, r.Partition, r.Offset, r.Value)
			}
			got[string(r.Value)] = true
			r.Ack(kgo.AckAccept)
		}
		for i := 4; i < 10; i++ {
			if !got["p0-"+strconv.Itoa(i)] {
				return fmt.Errorf("p0-%d not delivered yet (got %v)", i, got)
			}
		}
		return cl.FlushAcks(ctxT(t, 10*time.Second))
	})
	cl.Close()

	// Empty again, the group can be deleted.
	poll.Until(t, 30*time.Second, func() error {
		rs, err := adm.DeleteGroups(ctxT(t, 10*time.Second), "fresh")
		if err != nil {
			return err
		}
		return rs.Error()
	})
	described, err = adm.DescribeShareGroups(ctx, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["fresh"]; !errors.Is(d.Err, kerr.GroupIDNotFound) {
		t.Fatalf("after DeleteGroups: %+v, want GROUP_ID_NOT_FOUND", d)
	}
}

// On three brokers, a DescribeShareGroupOffsets without a topic list
// sent to each broker lists the partitions that broker leads on which the
// group has state, set by AlterShareGroupOffsets and never loaded: the
// broker reads it from the share coordinators, its own and the others
// (one request per coordinator).
func TestShareGroupOffsetsDescribeAllThreeNodes(t *testing.T) {
	c := tc.StartCluster(t, 3)
	seeds := c.Addrs()
	adm := tc.Admin(t, seeds[0])
	ctx := ctxT(t, 120*time.Second)
	const parts = 6
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	at := kadm.Offsets{}
	for p := range int32(parts) {
		at.Add(kadm.Offset{Topic: "jobs", Partition: p, At: int64(p)})
	}
	poll.Until(t, 60*time.Second, func() error {
		rs, err := adm.AlterShareGroupOffsets(ctx, "fresh", at)
		if err != nil {
			return err
		}
		return rs.Error()
	})
	leaders := map[int32][]int32{}
	poll.Until(t, 10*time.Second, func() error {
		td, err := adm.ListTopics(ctx, "jobs")
		if err != nil {
			return err
		}
		clear(leaders)
		for _, p := range td["jobs"].Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("jobs/%d has no leader", p.Partition)
			}
			leaders[p.Leader] = append(leaders[p.Leader], p.Partition)
		}
		return nil
	})
	for _, id := range c.IDs() {
		cl := c.Direct(t, id)
		poll.Until(t, 30*time.Second, func() error {
			req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
			rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
			rg.GroupID = "fresh"
			req.Groups = append(req.Groups, rg)
			raw, err := tc.DirectRequest(ctxT(t, 10*time.Second), cl, req)
			if err != nil {
				return err
			}
			got := map[int32]int64{}
			for _, rt := range raw.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0].Topics {
				for _, p := range rt.Partitions {
					if p.ErrorCode != 0 {
						return fmt.Errorf("node %d: %s/%d: %v", id, rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
					}
					got[p.Partition] = p.StartOffset
				}
			}
			want := map[int32]int64{}
			for _, p := range leaders[id] {
				want[p] = int64(p)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("node %d lists %v, want the partitions it leads %v", id, got, want)
			}
			return nil
		})
	}
}
