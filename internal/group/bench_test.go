package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// nopStore is durable at once and keeps nothing.
type nopStore struct{}

func (nopStore) Write(_ int32, _ []Record, done func(error)) { done(nil) }

func BenchmarkOffsetCommit(b *testing.B) {
	c := New(Config{Logger: quietLogger()}, nopStore{}, fakeTopics{"t": 1})
	ownAll(c)
	req := commitReq(1)
	respond := func(*kmsg.OffsetCommitResponse) {}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req.Topics[0].Partitions[0].Offset = int64(i)
		c.OffsetCommit(req, respond)
	}
}

func BenchmarkHeartbeat(b *testing.B) {
	now := epoch
	c := New(Config{Logger: quietLogger(), InitialRebalanceDelay: -1, Now: func() time.Time { return now }}, nopStore{}, fakeTopics{"t": 1})
	ownAll(c)
	var j *kmsg.JoinGroupResponse
	req := joinReq("g", "", 10*time.Second)
	req.Version = 3
	c.JoinGroup(req, "a", "h", func(r *kmsg.JoinGroupResponse) { j = r })
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation = "g", j.MemberID, j.Generation
	c.SyncGroup(s, func(*kmsg.SyncGroupResponse) {})
	h := kmsg.NewPtrHeartbeatRequest()
	h.Group, h.MemberID, h.Generation = "g", j.MemberID, j.Generation
	b.ReportAllocs()
	for b.Loop() {
		if r := c.Heartbeat(h); r.ErrorCode != 0 {
			b.Fatal(r.ErrorCode)
		}
	}
}

// BenchmarkConsumerGroupHeartbeat is the steady state of a KIP-848 member:
// keepalives of a reconciled member, which write nothing.
func BenchmarkConsumerGroupHeartbeat(b *testing.B) {
	now := epoch
	c := New(Config{Logger: quietLogger(), Now: func() time.Time { return now }}, nopStore{}, fakeTopics{"t": 8})
	ownAll(c)
	join := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	join.Version, join.Group, join.MemberID = 1, "g", "m"
	join.RebalanceTimeoutMillis, join.SubscribedTopicNames = 30000, []string{"t"}
	join.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	var epoch int32
	c.ConsumerGroupHeartbeat(join, "c", "h", func(r *kmsg.ConsumerGroupHeartbeatResponse) { epoch = r.MemberEpoch })
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, "g", "m", epoch
	b.ReportAllocs()
	for b.Loop() {
		c.ConsumerGroupHeartbeat(hb, "c", "h", func(r *kmsg.ConsumerGroupHeartbeatResponse) {
			if r.ErrorCode != 0 {
				b.Fatal(r.ErrorCode)
			}
		})
	}
}
