package tests

// Share groups (KIP-932), membership: ShareGroupHeartbeat and
// ShareGroupDescribe sent as raw kmsg requests through kgo, then
// ListGroups and DeleteGroups (share_fetch_test.go consumes with kgo's
// ShareGroup consumer).

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// shareHeartbeat sends one ShareGroupHeartbeat (v1) and returns the
// answer, or an error for a transport failure or an error code.
func shareHeartbeat(ctx context.Context, cl *kgo.Client, group, member string, epoch int32, topics []string) (*kmsg.ShareGroupHeartbeatResponse, error) {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
	req.SubscribedTopicNames = topics
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return resp, fmt.Errorf("%w: %s", err, msg)
	}
	return resp, nil
}

func describeShare(ctx context.Context, cl *kgo.Client, group string) (kmsg.ShareGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.ShareGroupDescribeResponseGroup{}, err
	}
	if len(resp.Groups) != 1 {
		return kmsg.ShareGroupDescribeResponseGroup{}, fmt.Errorf("%d groups described", len(resp.Groups))
	}
	g := resp.Groups[0]
	return g, kerr.ErrorForCode(g.ErrorCode)
}

func TestShareGroupMembership(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "jobs", 1, nil)
	cl := tc.Client(t, n.Addr())
	ctx := ctxT(t, 60*time.Second)
	td, err := tc.Admin(t, n.Addr()).ListTopics(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	topicID := td["jobs"].ID

	// Both members join; the first join creates __consumer_offsets, so
	// the coordinator may still be loading.
	var a *kmsg.ShareGroupHeartbeatResponse
	poll.Until(t, 30*time.Second, func() error {
		var err error
		a, err = shareHeartbeat(ctx, cl, "workers", "member-a", 0, []string{"jobs"})
		return err
	})
	b, err := shareHeartbeat(ctx, cl, "workers", "member-b", 0, []string{"jobs"})
	if err != nil {
		t.Fatal(err)
	}
	assigned := func(r *kmsg.ShareGroupHeartbeatResponse) string {
		if r.Assignment == nil {
			return "none"
		}
		var s string
		for _, tp := range r.Assignment.TopicPartitions {
			if tp.TopicID != topicID {
				return fmt.Sprintf("unknown topic id %x", tp.TopicID)
			}
			s += fmt.Sprint(tp.Partitions)
		}
		return s
	}
	if got := assigned(a); got != "[0]" {
		t.Fatalf("member-a assigned %s, want [0]", got)
	}
	if got := assigned(b); got != "[0]" || b.MemberEpoch != 2 {
		t.Fatalf("member-b assigned %s at epoch %d, want [0] at 2", got, b.MemberEpoch)
	}
	if b.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("heartbeat interval %d ms, want group.share.heartbeat.interval.ms (5000)", b.HeartbeatIntervalMillis)
	}
	// member-a catches up with the new epoch, keeping the shared partition.
	if a, err = shareHeartbeat(ctx, cl, "workers", "member-a", a.MemberEpoch, nil); err != nil || a.MemberEpoch != 2 {
		t.Fatalf("member-a heartbeat: epoch %d, %v", a.MemberEpoch, err)
	}

	g, err := describeShare(ctx, cl, "workers")
	if err != nil {
		t.Fatal(err)
	}
	if g.GroupState != "Stable" || g.GroupEpoch != 2 || g.Assignor != "simple" || len(g.Members) != 2 {
		t.Fatalf("described %s epoch %d assignor %s with %d members", g.GroupState, g.GroupEpoch, g.Assignor, len(g.Members))
	}
	for _, m := range g.Members {
		if len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "jobs" ||
			!slices.Equal(m.Assignment.TopicPartitions[0].Partitions, []int32{0}) {
			t.Fatalf("member %s assigned %+v, want jobs [0]", m.MemberID, m.Assignment.TopicPartitions)
		}
	}

	// A consumer group API on a share group answers as Kafka does.
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = []string{"workers"}
	if resp, err := cgd.RequestWith(ctx, cl); err != nil || resp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe of a share group: %v %+v", err, resp)
	}

	// member-a leaves; member-b stays alone on the partition.
	if _, err := shareHeartbeat(ctx, cl, "workers", "member-a", -1, nil); err != nil {
		t.Fatal(err)
	}
	if g, err = describeShare(ctx, cl, "workers"); err != nil || len(g.Members) != 1 || g.Members[0].MemberID != "member-b" {
		t.Fatalf("after the leave: %+v, %v", g.Members, err)
	}

	// ListGroups shows the group with type share (and filters by type).
	list := func(types ...string) []kmsg.ListGroupsResponseGroup {
		req := kmsg.NewPtrListGroupsRequest()
		req.TypesFilter = types
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Groups
	}
	if gs := list("share"); len(gs) != 1 || gs[0].Group != "workers" || gs[0].GroupType != "share" || gs[0].GroupState != "Stable" {
		t.Fatalf("ListGroups type share: %+v", gs)
	}
	if gs := list("consumer"); len(gs) != 0 {
		t.Fatalf("ListGroups type consumer: %+v", gs)
	}

	// DeleteGroups: refused while a member is in, done once both left.
	adm := tc.Admin(t, n.Addr())
	del := func() error {
		res, err := adm.DeleteGroups(ctx, "workers")
		if err != nil {
			return err
		}
		return res["workers"].Err
	}
	if err := del(); err != kerr.NonEmptyGroup {
		t.Fatalf("delete with a member: %v, want NON_EMPTY_GROUP", err)
	}
	if _, err := shareHeartbeat(ctx, cl, "workers", "member-b", -1, nil); err != nil {
		t.Fatal(err)
	}
	if err := del(); err != nil {
		t.Fatal(err)
	}
	if gs := list(); len(gs) != 0 {
		t.Fatalf("ListGroups after delete: %+v", gs)
	}
	if _, err := describeShare(ctx, cl, "workers"); err != kerr.GroupIDNotFound {
		t.Fatalf("describe after delete: %v, want GROUP_ID_NOT_FOUND", err)
	}
}

// A share group survives a broker restart: the coordinator loads its
// records from __consumer_offsets, and members go on heartbeating with the
// epochs they had, without being fenced or rejoining.
func TestShareGroupSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	n := tc.StartIn(t, dir)
	tc.CreateTopic(t, n.Addr(), "jobs", 2, nil)
	cl := tc.Client(t, n.Addr())
	ctx := ctxT(t, 60*time.Second)
	poll.Until(t, 30*time.Second, func() error {
		_, err := shareHeartbeat(ctx, cl, "workers", "member-a", 0, []string{"jobs"})
		return err
	})
	b, err := shareHeartbeat(ctx, cl, "workers", "member-b", 0, []string{"jobs"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := shareHeartbeat(ctx, cl, "workers", "member-a", 1, nil)
	if err != nil || a.MemberEpoch != b.MemberEpoch {
		t.Fatalf("member-a at epoch %d (%v), want %d", a.MemberEpoch, err, b.MemberEpoch)
	}
	before, err := describeShare(ctx, cl, "workers")
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	n.Close()

	n = tc.StartIn(t, dir)
	cl = tc.Client(t, n.Addr())
	poll.Until(t, 30*time.Second, func() error {
		r, err := shareHeartbeat(ctx, cl, "workers", "member-a", a.MemberEpoch, nil)
		if err == nil && r.MemberEpoch != a.MemberEpoch {
			err = fmt.Errorf("member-a moved to epoch %d", r.MemberEpoch)
		}
		return err
	})
	if _, err := shareHeartbeat(ctx, cl, "workers", "member-b", b.MemberEpoch, nil); err != nil {
		t.Fatalf("member-b after the restart: %v", err)
	}
	after, err := describeShare(ctx, cl, "workers")
	if err != nil {
		t.Fatal(err)
	}
	if after.GroupEpoch != before.GroupEpoch || len(after.Members) != 2 {
		t.Fatalf("after the restart: epoch %d with %d members, before epoch %d", after.GroupEpoch, len(after.Members), before.GroupEpoch)
	}
	for i, m := range after.Members {
		bm := before.Members[i]
		if m.MemberID != bm.MemberID || m.MemberEpoch != bm.MemberEpoch || fmt.Sprint(m.Assignment) != fmt.Sprint(bm.Assignment) {
			t.Fatalf("member after the restart %+v, before %+v", m, bm)
		}
	}
}
