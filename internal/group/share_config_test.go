package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A share group's own share.session.timeout.ms and
// share.heartbeat.interval.ms (Config.ShareGroupTimeouts) replace the
// broker's for that group only: members learn the interval at their next
// heartbeat, and a changed timeout applies to sessions already open.
func TestShareGroupOwnTimeouts(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	own := map[string][2]time.Duration{"fast": {6 * time.Second, 2 * time.Second}}
	c := New(Config{Logger: quietLogger(), Now: func() time.Time { return now },
		ShareSessionTimeout: 45 * time.Second, ShareHeartbeatInterval: 5 * time.Second,
		ShareGroupTimeouts: func(g string) (time.Duration, time.Duration) {
			v := own[g]
			return v[0], v[1]
		}}, newFakeStore(), fakeTopics{"t": 2})
	ownAll(c)
	hb := func(group, member string) *kmsg.ShareGroupHeartbeatResponse {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version, req.GroupID, req.MemberID, req.SubscribedTopicNames = 1, group, member, []string{"t"}
		r := call(t, func(r func(*kmsg.ShareGroupHeartbeatResponse)) { c.ShareGroupHeartbeat(req, member, "h", r) })
		if r.ErrorCode != 0 {
			t.Fatalf("%s joining %s: %v", member, group, kerr.ErrorForCode(r.ErrorCode))
		}
		return r
	}
	members := func(group string) int {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		return len(c.ShareGroupDescribe(req).Groups[0].Members)
	}
	if r := hb("fast", "m1"); r.HeartbeatIntervalMillis != 2000 {
		t.Fatalf("fast group's heartbeat interval %d ms, want its own 2000", r.HeartbeatIntervalMillis)
	}
	if r := hb("plain", "m2"); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("plain group's heartbeat interval %d ms, want the broker's 5000", r.HeartbeatIntervalMillis)
	}

	now = now.Add(6*time.Second - time.Millisecond)
	c.Tick(now)
	if members("fast") != 1 {
		t.Fatal("fast group's member expired before its 6 s session timeout")
	}
	now = now.Add(time.Millisecond)
	c.Tick(now)
	if members("fast") != 0 || members("plain") != 1 {
		t.Fatalf("after 6 s: fast group has %d members (want 0), plain %d (want 1: the broker's 45 s)", members("fast"), members("plain"))
	}

	// Lengthened while a member is in: its session runs with the new
	// timeout from its last heartbeat.
	hb("fast", "m3")
	own["fast"] = [2]time.Duration{20 * time.Second, 2 * time.Second}
	now = now.Add(10 * time.Second)
	c.Tick(now)
	if members("fast") != 1 {
		t.Fatal("a member expired after the group's session timeout was raised to 20 s")
	}
	// An unusable pair (heartbeat not below the timeout) leaves the
	// broker's settings.
	own["fast"] = [2]time.Duration{3 * time.Second, 3 * time.Second}
	if r := hb("fast", "m3"); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("heartbeat interval %d ms with an unusable group pair, want the broker's 5000", r.HeartbeatIntervalMillis)
	}
}
