package group

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
)

// DeleteGroups of a share group deletes the group's share-partition state
// (Config.OnShareGroupDelete) before it writes the group's tombstones, and
// refuses joins meanwhile; when the state cannot be deleted the group is
// kept, Empty, and the answer is COORDINATOR_NOT_AVAILABLE. Berth used to
// write only the tombstones, and a group made again under the same id
// resumed from the old state.
func TestDeleteShareGroupDeletesStateFirst(t *testing.T) {
	for _, fail := range []bool{true, false} {
		store := newFakeStore()
		var (
			c       *Coordinator
			pending func(error)
			calls   int
		)
		c = New(Config{Logger: quietLogger(), OnShareGroupDelete: func(group string, done func(error)) {
			calls++
			if group != "sg" {
				t.Errorf("state deleted for group %q", group)
			}
			pending = done
		}}, store, fakeTopics{"t": 3})
		ownAll(c)
		p := metadata.PartitionForKey("sg", c.cfg.OffsetsTopicPartitions)

		// A member joins and leaves: an empty share group with records.
		hb := func(epoch int32) *kmsg.ShareGroupHeartbeatResponse {
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.Version, req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = 1, "sg", "m", epoch, []string{"t"}
			return call(t, func(r func(*kmsg.ShareGroupHeartbeatResponse)) { c.ShareGroupHeartbeat(req, "m", "h", r) })
		}
		if r := hb(0); r.ErrorCode != 0 {
			t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		if r := hb(-1); r.ErrorCode != 0 {
			t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		written := len(store.log[p])

		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"sg"}
		answer := make(chan *kmsg.DeleteGroupsResponse, 1)
		c.DeleteGroups(req, func(r *kmsg.DeleteGroupsResponse) { answer <- r })
		if calls != 1 || pending == nil {
			t.Fatalf("OnShareGroupDelete called %d times", calls)
		}
		select {
		case r := <-answer:
			t.Fatalf("answered before the state was deleted: %+v", r)
		default:
		}
		if len(store.log[p]) != written {
			t.Fatalf("tombstones written before the state was deleted: %d records, had %d", len(store.log[p]), written)
		}
		if r := hb(0); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("join while the group is being deleted: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(r.ErrorCode))
		}

		var err error
		if fail {
			err = errors.New("share coordinator unavailable")
		}
		pending(err)
		r := <-answer
		switch {
		case fail && r.Groups[0].ErrorCode != kerr.CoordinatorNotAvailable.Code:
			t.Fatalf("state not deleted: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(r.Groups[0].ErrorCode))
		case fail && len(store.log[p]) != written:
			t.Fatalf("tombstones written although the state was not deleted")
		case fail:
			if gs := c.Groups(); len(gs) != 1 || gs[0].State != "Empty" {
				t.Fatalf("the group after a failed deletion: %+v, want it kept, Empty", gs)
			}
		case r.Groups[0].ErrorCode != 0:
			t.Fatalf("deletion: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
		default:
			last := store.log[p][len(store.log[p])-1]
			if !isShareRecordKey(last.Key) || last.Value != nil {
				t.Fatalf("the last record is not a share group tombstone: %+v", last)
			}
			if gs := c.Groups(); len(gs) != 0 {
				t.Fatalf("groups after the deletion: %+v", gs)
			}
		}
	}
}
