package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// shareStatsTags decodes Berth's tagged fields of a partition entry.
func shareStatsTags(t *testing.T, p kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition) map[uint32]int64 {
	t.Helper()
	out := map[uint32]int64{}
	p.UnknownTags.Each(func(tag uint32, b []byte) {
		r := kbin.Reader{Src: b}
		v := r.Varlong()
		if r.Complete() != nil {
			t.Errorf("tag %d: %x is not one varlong", tag, b)
		}
		out[tag] = v
	})
	return out
}

// describeShareOffsets sends DescribeShareGroupOffsets for one group to
// the broker behind send.
func describeShareOffsets(t *testing.T, send func(kmsg.Request) (kmsg.Response, error), version int16, group string, topics ...kmsg.DescribeShareGroupOffsetsRequestGroupTopic) kmsg.DescribeShareGroupOffsetsResponseGroup {
	t.Helper()
	r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	r.Version = version
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID, rg.Topics = group, topics
	r.Groups = append(r.Groups, rg)
	resp, err := send(r)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.(*kmsg.DescribeShareGroupOffsetsResponse)
	if len(got.Groups) != 1 {
		t.Fatalf("%d groups answered, want 1", len(got.Groups))
	}
	return got.Groups[0]
}

func shareTopic(name string, parts ...int32) kmsg.DescribeShareGroupOffsetsRequestGroupTopic {
	return kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name, Partitions: parts}
}

// DescribeShareGroupOffsets on one broker: group errors, partition
// errors, an uninitialized share-partition (-1), and the start offset and
// lag moving as records are acquired and accepted.
func TestDescribeShareGroupOffsets(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "q", 1, nil)
	tc.CreateTopic(t, n.Addr(), "other", 1, nil)
	cl := tc.Client(t, n.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	send := func(r kmsg.Request) (kmsg.Response, error) {
		// Straight to the node: kgo would route key 90 to the coordinator.
		return tc.DirectRequest(ctx, cl, r)
	}
	want := func(what string, got int16, w *kerr.Error) {
		t.Helper()
		wc := int16(0)
		if w != nil {
			wc = w.Code
		}
		if got != wc {
			t.Errorf("%s: code %v, want %v", what, kerr.ErrorForCode(got), w)
		}
	}

	want("empty group id", describeShareOffsets(t, send, 1, "", shareTopic("q", 0)).ErrorCode, kerr.InvalidGroupID)

	// m1 joins the share group g (the first join creates __consumer_offsets).
	joinShare(t, ctx, cl, "g", "m1", "q")
	want("unknown group", describeShareOffsets(t, send, 1, "nobody", shareTopic("q", 0)).ErrorCode, kerr.GroupIDNotFound)

	// No state yet: StartOffset -1, no lag. Unknown topics and partitions
	// are answered per partition.
	g := describeShareOffsets(t, send, 1, "g", shareTopic("q", 0, 5), shareTopic("missing", 0))
	want("group", g.ErrorCode, nil)
	if len(g.Topics) != 2 || len(g.Topics[0].Partitions) != 2 || len(g.Topics[1].Partitions) != 1 {
		t.Fatalf("answered %+v", g.Topics)
	}
	p0 := g.Topics[0].Partitions[0]
	want("uninitialized partition", p0.ErrorCode, nil)
	if p0.StartOffset != -1 || p0.Lag != -1 || p0.LeaderEpoch < 0 {
		t.Errorf("uninitialized partition: start %d lag %d epoch %d, want -1, -1, >= 0", p0.StartOffset, p0.Lag, p0.LeaderEpoch)
	}
	want("partition 5", g.Topics[0].Partitions[1].ErrorCode, kerr.UnknownTopicOrPartition)
	want("unknown topic", g.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	if g.Topics[0].TopicID == ([16]byte{}) {
		t.Errorf("no topic id for q")
	}
	topicID := g.Topics[0].TopicID

	fetch := func(epoch int32, wait int32) *kmsg.ShareFetchResponse {
		t.Helper()
		r := kmsg.NewPtrShareFetchRequest()
		r.Version, r.GroupID, r.MemberID, r.ShareSessionEpoch = 1, strp("g"), strp("m1"), epoch
		r.MaxWaitMillis, r.MinBytes, r.MaxRecords, r.BatchSize = wait, 1, 100, 100
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = topicID
		rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
		r.Topics = append(r.Topics, rt)
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		want("share fetch", resp.ErrorCode, nil)
		return resp
	}
	offsets := func(what string, version int16, start, lag int64) map[uint32]int64 {
		t.Helper()
		g := describeShareOffsets(t, send, version, "g", shareTopic("q", 0))
		p := g.Topics[0].Partitions[0]
		want(what, p.ErrorCode, nil)
		if p.StartOffset != start || p.Lag != lag {
			t.Errorf("%s: start %d lag %d, want %d and %d", what, p.StartOffset, p.Lag, start, lag)
		}
		return shareStatsTags(t, p)
	}
	// stats checks Berth's tagged fields: available, acquired, delayed,
	// oldest available age.
	stats := func(what string, tags map[uint32]int64, avail, acquired, delayed, age int64) {
		t.Helper()
		got := []int64{tags[berthmsg.ShareStatsTagAvailable], tags[berthmsg.ShareStatsTagAcquired], tags[berthmsg.ShareStatsTagDelayed], tags[berthmsg.ShareStatsTagOldestAvailableAgeMs]}
		if len(tags) != 10 || got[0] != avail || got[1] != acquired || got[2] != delayed || got[3] != age {
			t.Errorf("%s: tags %v: available, acquired, delayed, age %v, want [%d %d %d %d]", what, tags, got, avail, acquired, delayed, age)
		}
	}
	if p := describeShareOffsets(t, send, 1, "g", shareTopic("q", 0)).Topics[0].Partitions[0]; p.UnknownTags.Len() != 0 {
		t.Errorf("uninitialized partition has tags %v", shareStatsTags(t, p))
	}

	fetch(0, 0) // the share-partition starts at the high watermark, 0
	stats("opened", offsets("opened", 1, 0, 0), 0, 0, 0, -1)
	var recs []*kgo.Record
	for range 3 {
		recs = append(recs, &kgo.Record{Topic: "q", Value: []byte("job")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stats("three produced", offsets("three produced", 1, 0, 3), 3, 0, 0, -1)
	if got := fetch(1, 10000); len(got.Topics) != 1 || len(got.Topics[0].Partitions[0].AcquiredRecords) == 0 {
		t.Fatalf("nothing acquired: %+v", got.Topics)
	}
	stats("acquired", offsets("acquired", 1, 0, 3), 0, 3, 0, -1)
	resp, err := shareAck("g", "m1", 2, topicID, 0, 1, ackBatch(0, 0, 1)).RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ack: %v %+v", err, resp)
	}
	stats("first accepted", offsets("first accepted", 1, 1, 2), 0, 2, 0, -1)
	resp, err = shareAck("g", "m1", 3, topicID, 0, 1, ackBatch(1, 2, 1)).RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ack: %v %+v", err, resp)
	}
	stats("all accepted", offsets("all accepted", 1, 3, 0), 0, 0, 0, -1)

	// A null topic list: the share-partitions this broker holds for g.
	all := describeShareOffsets(t, send, 1, "g")
	if len(all.Topics) != 1 || all.Topics[0].Topic != "q" || len(all.Topics[0].Partitions) != 1 || all.Topics[0].Partitions[0].StartOffset != 3 {
		t.Errorf("null topics: %+v", all.Topics)
	}
}

// A partition led by another broker answers NOT_LEADER_OR_FOLLOWER: the
// share-partition's state is on its leader.
func TestDescribeShareGroupOffsetsNotLeader(t *testing.T) {
	c := tc.StartCluster(t, 3)
	tc.CreateTopic(t, c.Addrs()[0], "q", 3, nil)
	cl := tc.Client(t, c.Addrs()[0])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var leaders map[int32]int32
	poll.Until(t, 30*time.Second, func() error {
		md := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = strp("q")
		md.Topics = append(md.Topics, mt)
		resp, err := md.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		leaders = map[int32]int32{}
		for _, p := range resp.Topics[0].Partitions {
			if p.Leader < 0 {
				return kerr.LeaderNotAvailable
			}
			leaders[p.Partition] = p.Leader
		}
		if len(leaders) != 3 {
			return kerr.LeaderNotAvailable
		}
		return nil
	})
	joinShare(t, ctx, cl, "g", "m1", "q")
	node := leaders[0]
	direct := c.Direct(t, node)
	send := func(r kmsg.Request) (kmsg.Response, error) { return tc.DirectRequest(ctx, direct, r) }
	g := describeShareOffsets(t, send, 1, "g", shareTopic("q", 0, 1, 2))
	if len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 3 {
		t.Fatalf("answered %+v", g)
	}
	for _, p := range g.Topics[0].Partitions {
		var w int16
		if leaders[p.Partition] != node {
			w = kerr.NotLeaderForPartition.Code
		}
		if p.ErrorCode != w {
			t.Errorf("partition %d (leader %d) asked at %d: %v, want %v", p.Partition, leaders[p.Partition], node, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(w))
		}
	}
}

// joinShare makes member join the share group, subscribed to topic.
func joinShare(t *testing.T, ctx context.Context, cl *kgo.Client, group, member, topic string) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch = 1, group, member, 0
		hb.SubscribedTopicNames = []string{topic}
		hr, err := hb.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(hr.ErrorCode)
	})
}
