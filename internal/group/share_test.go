package group

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

// Share group members join, heartbeat and leave concurrently with the
// ticker, an asynchronous store and readers: under -race this checks the
// locking; every request is answered, every leave is reported to
// OnShareMembersRemoved, and a coordinator loading the records written
// finds the group as the live one left it.
func TestConcurrentShareMembers(t *testing.T) {
	defer goleak.VerifyNone(t)
	store := newAsyncStore()
	var removed atomic.Int64
	cfg := Config{
		ShareSessionTimeout:    time.Second,
		ShareHeartbeatInterval: 50 * time.Millisecond,
		Logger:                 quietLogger(),
		OnShareMembersRemoved: func(g string, rs []ShareRemoval) {
			if g != "sg" {
				t.Errorf("removal reported for group %s", g)
			}
			removed.Add(int64(len(rs)))
		},
	}
	c := New(cfg, store, fakeTopics{"t": 3})
	ownAll(c)
	c.Start(context.Background())

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
			c.ListGroups(kmsg.NewPtrListGroupsRequest())
			d := kmsg.NewPtrShareGroupDescribeRequest()
			d.GroupIDs = []string{"sg"}
			c.ShareGroupDescribe(d)
			time.Sleep(time.Millisecond)
		}
	}()

	const members, rounds = 4, 3
	var wg sync.WaitGroup
	errs := make(chan error, members)
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runShareMember(t, c, fmt.Sprintf("m%d", i), rounds); err != nil {
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
	if got := removed.Load(); got != members*rounds {
		t.Errorf("%d removals reported, want %d (one per leave)", got, members*rounds)
	}
	live := c.Groups()
	if len(live) != 1 || live[0].Type != "share" || live[0].State != "Empty" || live[0].Members != 0 {
		t.Fatalf("after everyone left: %+v", live)
	}

	// Another coordinator loads what was written.
	c2 := New(cfg, newFakeStore(), fakeTopics{"t": 3})
	for p := range c2.cfg.OffsetsTopicPartitions {
		c2.BeginLoad(p)
		for _, r := range store.recs[p] {
			c2.LoadRecord(p, r.Key, r.Value)
		}
		c2.FinishLoad(p)
	}
	loaded := c2.Groups()
	if len(loaded) != 1 || loaded[0].Generation != live[0].Generation || loaded[0].State != "Empty" {
		t.Fatalf("loaded %+v, live %+v", loaded, live)
	}
}

func runShareMember(t *testing.T, c *Coordinator, id string, rounds int) error {
	hb := func(epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version, req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = 1, "sg", id, epoch, topics
		return call(t, func(r func(*kmsg.ShareGroupHeartbeatResponse)) { c.ShareGroupHeartbeat(req, id, "h", r) })
	}
	for range rounds {
		r := hb(0, []string{"t"})
		if r.ErrorCode != 0 {
			return fmt.Errorf("%s join: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
		epoch := r.MemberEpoch
		for range 20 {
			r = hb(epoch, nil)
			switch r.ErrorCode {
			case 0:
				epoch = r.MemberEpoch
			case kerr.FencedMemberEpoch.Code:
				if r = hb(0, []string{"t"}); r.ErrorCode != 0 {
					return fmt.Errorf("%s rejoin: %v", id, kerr.ErrorForCode(r.ErrorCode))
				}
				epoch = r.MemberEpoch
			default:
				return fmt.Errorf("%s heartbeat: %v", id, kerr.ErrorForCode(r.ErrorCode))
			}
		}
		if r = hb(-1, nil); r.ErrorCode != 0 {
			return fmt.Errorf("%s leave: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	return nil
}
