package group

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// ownAll makes c own and serve every partition, with nothing to replay.
func ownAll(c *Coordinator) {
	for p := int32(0); p < c.cfg.OffsetsTopicPartitions; p++ {
		c.BeginLoad(p)
		c.FinishLoad(p)
	}
}

// call sends a request through a respond callback and waits for it,
// failing on a second answer.
func call[R any](t *testing.T, send func(func(R))) R {
	t.Helper()
	ch := make(chan R, 1)
	var n atomic.Int32
	send(func(r R) {
		if n.Add(1) > 1 {
			t.Errorf("answered twice: %+v", r)
			return
		}
		ch <- r
	})
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no answer")
		panic("unreachable")
	}
}

func joinReq(group, member string, session time.Duration) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group, req.MemberID = group, member
	req.SessionTimeoutMillis = int32(session.Milliseconds())
	req.RebalanceTimeoutMillis = int32((2 * time.Second).Milliseconds())
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: subscription([]string{"t"})}}
	return req
}

func TestStartCloseNoLeaks(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := New(Config{InitialRebalanceDelay: time.Hour, Logger: quietLogger()}, newFakeStore(), fakeTopics{"t": 1})
	ownAll(c)
	c.Start(context.Background())
	c.Start(context.Background()) // twice does nothing

	// A join waiting for the (hour-long) initial delay is answered by Close.
	first := call(t, func(r func(*kmsg.JoinGroupResponse)) { c.JoinGroup(joinReq("g", "", 10*time.Second), "a", "h", r) })
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %v", kerr.ErrorForCode(first.ErrorCode))
	}
	waiting := make(chan *kmsg.JoinGroupResponse, 1)
	c.JoinGroup(joinReq("g", first.MemberID, 10*time.Second), "a", "h", func(r *kmsg.JoinGroupResponse) { waiting <- r })
	select {
	case r := <-waiting:
		t.Fatalf("answered before Close: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	c.Close()
	select {
	case r := <-waiting:
		if r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("pending join after Close: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close left a join waiting")
	}
	after := call(t, func(r func(*kmsg.JoinGroupResponse)) { c.JoinGroup(joinReq("g", "", 10*time.Second), "a", "h", r) })
	if after.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join after Close: %v", kerr.ErrorForCode(after.ErrorCode))
	}
	c.Close() // twice is fine
	c.Start(context.Background())
}

func TestStartStopsOnContextCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := New(Config{Logger: quietLogger()}, newFakeStore(), fakeTopics{})
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	cancel()
	c.Close()
}

// Start's ticker drives the timers with the real clock: the initial delay
// ends and the join is answered without anyone calling Tick.
func TestStartDrivesTimers(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := New(Config{InitialRebalanceDelay: 50 * time.Millisecond, Logger: quietLogger()}, newFakeStore(), fakeTopics{"t": 1})
	ownAll(c)
	c.Start(context.Background())
	defer c.Close()
	r := call(t, func(r func(*kmsg.JoinGroupResponse)) { c.JoinGroup(joinReq("g", "", 10*time.Second), "a", "h", r) })
	r = call(t, func(f func(*kmsg.JoinGroupResponse)) {
		c.JoinGroup(joinReq("g", r.MemberID, 10*time.Second), "a", "h", f)
	})
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != r.MemberID {
		t.Fatalf("join: %+v", r)
	}
}

// asyncStore makes writes durable on its own goroutine, in order, like a
// replicated log would; done is never called inline.
type asyncStore struct {
	ch   chan pendingWrite
	wg   sync.WaitGroup
	mu   sync.Mutex
	recs map[int32][]Record
}

func newAsyncStore() *asyncStore {
	s := &asyncStore{ch: make(chan pendingWrite, 1024), recs: make(map[int32][]Record)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for w := range s.ch {
			s.mu.Lock()
			s.recs[w.p] = append(s.recs[w.p], w.recs...)
			s.mu.Unlock()
			w.done(nil)
		}
	}()
	return s
}

func (s *asyncStore) Write(p int32, recs []Record, done func(error)) {
	s.ch <- pendingWrite{p, recs, done}
}
func (s *asyncStore) close() { close(s.ch); s.wg.Wait() }

// Consumers join, sync, heartbeat, commit and leave concurrently with the
// ticker, an asynchronous store and readers of the snapshots: under -race
// this checks the locking, and that every request is answered.
func TestConcurrentConsumers(t *testing.T) {
	defer goleak.VerifyNone(t)
	store := newAsyncStore()
	c := New(Config{
		MinSessionTimeout:     time.Millisecond,
		InitialRebalanceDelay: 20 * time.Millisecond,
		Logger:                quietLogger(),
	}, store, fakeTopics{"t": 8})
	ownAll(c)
	c.Start(context.Background())

	const consumers, rounds = 4, 3
	var commits atomic.Int64
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c.Groups()
			c.Committed()
			c.ListGroups(kmsg.NewPtrListGroupsRequest())
			d := kmsg.NewPtrDescribeGroupsRequest()
			d.Groups = []string{"g"}
			c.DescribeGroups(d)
			f := kmsg.NewPtrOffsetFetchRequest()
			f.Version, f.Group = 7, "g"
			c.OffsetFetch(f)
			time.Sleep(time.Millisecond)
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	for i := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runConsumer(t, c, fmt.Sprintf("c%d", i), rounds, &commits); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c.Close()
	store.close()
	if commits.Load() == 0 {
		t.Error("no commit succeeded")
	}
	gs := c.Groups()
	if len(gs) != 1 || gs[0].State != "Empty" || gs[0].Members != 0 {
		t.Fatalf("after everyone left: %+v", gs)
	}
}

func runConsumer(t *testing.T, c *Coordinator, client string, rounds int, commits *atomic.Int64) error {
	const session = 5 * time.Second
	memberID := ""
	for round := 0; round < rounds; {
		j := call(t, func(r func(*kmsg.JoinGroupResponse)) { c.JoinGroup(joinReq("g", memberID, session), client, "h", r) })
		switch j.ErrorCode {
		case kerr.MemberIDRequired.Code:
			memberID = j.MemberID
			continue
		case kerr.UnknownMemberID.Code:
			memberID = ""
			continue
		case kerr.RebalanceInProgress.Code:
			continue
		case 0:
		default:
			return fmt.Errorf("%s join: %v", client, kerr.ErrorForCode(j.ErrorCode))
		}
		memberID = j.MemberID
		sreq := kmsg.NewPtrSyncGroupRequest()
		sreq.Version, sreq.Group, sreq.MemberID, sreq.Generation = 5, "g", memberID, j.Generation
		for _, m := range j.Members {
			sreq.GroupAssignment = append(sreq.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: []byte("t")})
		}
		s := call(t, func(r func(*kmsg.SyncGroupResponse)) { c.SyncGroup(sreq, r) })
		switch s.ErrorCode {
		case 0:
		case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code, kerr.UnknownMemberID.Code:
			continue
		default:
			return fmt.Errorf("%s sync: %v", client, kerr.ErrorForCode(s.ErrorCode))
		}
		for k := 0; k < 20; k++ {
			h := kmsg.NewPtrHeartbeatRequest()
			h.Group, h.MemberID, h.Generation = "g", memberID, j.Generation
			if code := c.Heartbeat(h).ErrorCode; code != 0 {
				break // rebalance: rejoin
			}
			creq := kmsg.NewPtrOffsetCommitRequest()
			creq.Version, creq.Group, creq.MemberID, creq.Generation = 8, "g", memberID, j.Generation
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset = int32(len(client)+k)%8, int64(k)
			creq.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
			cr := call(t, func(r func(*kmsg.OffsetCommitResponse)) { c.OffsetCommit(creq, r) })
			if cr.Topics[0].Partitions[0].ErrorCode == 0 {
				commits.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
		round++
	}
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Version, lreq.Group = 5, "g"
	lreq.Members = []kmsg.LeaveGroupRequestMember{{MemberID: memberID}}
	l := call(t, func(r func(*kmsg.LeaveGroupResponse)) { c.LeaveGroup(lreq, r) })
	if l.ErrorCode != 0 || l.Members[0].ErrorCode != 0 {
		return fmt.Errorf("%s leave: %v %v", client, kerr.ErrorForCode(l.ErrorCode), kerr.ErrorForCode(l.Members[0].ErrorCode))
	}
	return nil
}

// heldStore keeps writes until the test completes them, in any order.
type heldStore struct {
	mu     sync.Mutex
	writes []pendingWrite
}

func (s *heldStore) Write(p int32, recs []Record, done func(error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, pendingWrite{p, recs, done})
}

func (s *heldStore) complete(i int) {
	s.mu.Lock()
	w := s.writes[i]
	s.mu.Unlock()
	w.done(nil)
}

func commitReq(offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group = 8, "g"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Offset = offset
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
	return req
}

func fetched(c *Coordinator) int64 {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 7, "g"
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	return c.OffsetFetch(req).Topics[0].Partitions[0].Offset
}

// A Store may report writes durable out of order (each waits for its own
// high watermark): an older commit finishing last must not win, nor bring
// back an offset deleted after it.
func TestCommitsCompletingOutOfOrder(t *testing.T) {
	s := &heldStore{}
	c := New(Config{Logger: quietLogger()}, s, fakeTopics{"t": 1})
	ownAll(c)
	answered := 0
	count := func(*kmsg.OffsetCommitResponse) { answered++ }
	c.OffsetCommit(commitReq(1), count) // write 0
	c.OffsetCommit(commitReq(2), count) // write 1
	s.complete(1)
	s.complete(0)
	if got := fetched(c); got != 2 {
		t.Fatalf("after out-of-order completion: offset %d, want 2", got)
	}

	c.OffsetCommit(commitReq(3), count) // write 2
	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "g"
	del.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	var delCode int16 = -2
	c.OffsetDelete(del, func(r *kmsg.OffsetDeleteResponse) { delCode = r.Topics[0].Partitions[0].ErrorCode })
	s.complete(3) // the tombstones
	s.complete(2) // the commit written before them
	if delCode != 0 || answered != 3 {
		t.Fatalf("delete %d, commits answered %d", delCode, answered)
	}
	if got := fetched(c); got != -1 {
		t.Fatalf("deleted offset came back: %d", got)
	}
	c.OffsetCommit(commitReq(4), count)
	s.complete(4)
	if got := fetched(c); got != 4 {
		t.Fatalf("commit after delete: %d", got)
	}
}
