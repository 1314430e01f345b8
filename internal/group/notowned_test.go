package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
)

// A request for a group whose __consumer_offsets partition the coordinator
// has not been told to load answers by what the metadata says of that
// partition, as Kafka does: COORDINATOR_LOAD_IN_PROGRESS while this node
// leads it (the window between a leadership, or a new topic, becoming
// visible and the load beginning), COORDINATOR_NOT_AVAILABLE while the
// topic does not exist or the partition has no leader, NOT_COORDINATOR
// only when another node leads it. Berth used to answer NOT_COORDINATOR
// in all three cases, and kafka-go readers joining a new group on a fresh
// broker backed off for 5 s.
func TestNotOwnedPartitionAnswersByLeadership(t *testing.T) {
	for _, tc := range []struct {
		lead metadata.Leadership
		want *kerr.Error
	}{
		{metadata.LeaderSelf, kerr.CoordinatorLoadInProgress},
		{metadata.LeaderNone, kerr.CoordinatorNotAvailable},
		{metadata.LeaderOther, kerr.NotCoordinator},
	} {
		t.Run(tc.want.Message, func(t *testing.T) {
			var asked []int32
			c := New(Config{Logger: quietLogger(), Leader: func(p int32) metadata.Leadership {
				asked = append(asked, p)
				return tc.lead
			}}, newFakeStore(), fakeTopics{"t": 4})
			p := metadata.PartitionForKey("g", c.cfg.OffsetsTopicPartitions)

			join := call(t, func(r func(*kmsg.JoinGroupResponse)) { c.JoinGroup(joinReq("g", "", 10*time.Second), "c", "h", r) })
			if got := kerr.ErrorForCode(join.ErrorCode); got != tc.want {
				t.Errorf("JoinGroup: %v, want %v", got, tc.want)
			}
			hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "m", 0, 1000
			hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			cg := call(t, func(r func(*kmsg.ConsumerGroupHeartbeatResponse)) { c.ConsumerGroupHeartbeat(hb, "c", "h", r) })
			if got := kerr.ErrorForCode(cg.ErrorCode); got != tc.want {
				t.Errorf("ConsumerGroupHeartbeat: %v, want %v", got, tc.want)
			}
			sh := kmsg.NewPtrShareGroupHeartbeatRequest()
			sh.GroupID, sh.MemberID, sh.MemberEpoch, sh.SubscribedTopicNames = "g", "m", 0, []string{"t"}
			sr := call(t, func(r func(*kmsg.ShareGroupHeartbeatResponse)) { c.ShareGroupHeartbeat(sh, "c", "h", r) })
			if got := kerr.ErrorForCode(sr.ErrorCode); got != tc.want {
				t.Errorf("ShareGroupHeartbeat: %v, want %v", got, tc.want)
			}
			f := kmsg.NewPtrOffsetFetchRequest()
			f.Version, f.Group = 7, "g"
			if got := kerr.ErrorForCode(c.OffsetFetch(f).ErrorCode); got != tc.want {
				t.Errorf("OffsetFetch: %v, want %v", got, tc.want)
			}
			for _, q := range asked {
				if q != p {
					t.Errorf("Leader asked about partition %d, want %d", q, p)
				}
			}

			// Once the load begins: COORDINATOR_LOAD_IN_PROGRESS; once it
			// ends the group is served.
			c.BeginLoad(p)
			join = call(t, func(r func(*kmsg.JoinGroupResponse)) { c.JoinGroup(joinReq("g", "", 10*time.Second), "c", "h", r) })
			if got := kerr.ErrorForCode(join.ErrorCode); got != kerr.CoordinatorLoadInProgress {
				t.Errorf("JoinGroup while loading: %v", got)
			}
			c.FinishLoad(p)
			join = call(t, func(r func(*kmsg.JoinGroupResponse)) { c.JoinGroup(joinReq("g", "", 10*time.Second), "c", "h", r) })
			if got := kerr.ErrorForCode(join.ErrorCode); got != kerr.MemberIDRequired {
				t.Errorf("JoinGroup once loaded: %v, want MEMBER_ID_REQUIRED", got)
			}
		})
	}
}

// Without a Leader hook every partition not owned answers NOT_COORDINATOR.
func TestNotOwnedPartitionWithoutLeaderHook(t *testing.T) {
	c := New(Config{Logger: quietLogger()}, newFakeStore(), fakeTopics{"t": 4})
	join := call(t, func(r func(*kmsg.JoinGroupResponse)) { c.JoinGroup(joinReq("g", "", 10*time.Second), "c", "h", r) })
	if got := kerr.ErrorForCode(join.ErrorCode); got != kerr.NotCoordinator {
		t.Errorf("JoinGroup: %v, want NOT_COORDINATOR", got)
	}
}
