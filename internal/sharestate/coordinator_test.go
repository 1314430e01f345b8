package sharestate

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/share"
)

// memLog is an in-memory partition log the coordinator appends to.
type memLog struct {
	recs [][2][]byte
	fail error
}

func (l *memLog) Append(_ int32, recs []batch.KV) (func() error, error) {
	if l.fail != nil {
		return nil, l.fail
	}
	l.recs = append(l.recs, [2][]byte{recs[0].Key, recs[0].Value})
	return func() error { return nil }, nil
}

func owned(l *memLog) *Coordinator {
	c := New(l, nil)
	c.SetPartitions(1)
	c.BeginLoad(0)
	c.FinishLoad(0)
	return c
}

var key = share.Key{Group: "g", TopicID: [16]byte{1}, Partition: 3}

func TestWriteReadReplay(t *testing.T) {
	l := &memLog{}
	c := owned(l)
	if _, ok, err := c.Read(key, 1); ok || err != nil {
		t.Fatalf("read of nothing: ok %v err %v", ok, err)
	}
	if err := c.Write(key, share.Update{LeaderEpoch: 1, StartOffset: -1}); !errors.Is(err, ErrNoState) {
		t.Fatalf("first write without a start offset: %v", err)
	}
	steps := []share.Update{
		{LeaderEpoch: 1, StartOffset: 10},
		{LeaderEpoch: 1, StartOffset: -1, StateBatches: []share.StateBatch{{FirstOffset: 10, LastOffset: 14, DeliveryState: 0, DeliveryCount: 1, AvailableAtMs: 5000}}},
		{LeaderEpoch: 1, StartOffset: -1, StateBatches: []share.StateBatch{{FirstOffset: 10, LastOffset: 11, DeliveryState: 2, DeliveryCount: 1}}},
		{LeaderEpoch: 1, StartOffset: -1, StateBatches: []share.StateBatch{{FirstOffset: 12, LastOffset: 12, DeliveryState: 3, DeliveryCount: 1, Reason: share.ReasonRejected, ErrorText: "bad address"}}},
	}
	for _, u := range steps {
		if err := c.Write(key, u); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := c.Read(key, 1)
	if !ok || err != nil {
		t.Fatalf("read: ok %v err %v", ok, err)
	}
	if got.StartOffset != 12 || len(got.StateBatches) != 2 || got.StateBatches[0].ErrorText != "bad address" ||
		got.StateBatches[1].AvailableAtMs != 5000 || got.SnapshotEpoch != 4 {
		t.Fatalf("state after the writes: %+v", got)
	}
	if len(l.recs) != len(steps) {
		t.Fatalf("%d records for %d writes", len(l.recs), len(steps))
	}

	// A new coordinator replaying the log has the same state.
	c2 := New(l, nil)
	c2.SetPartitions(1)
	c2.BeginLoad(0)
	if _, _, err := c2.Read(key, 2); !errors.Is(err, kerr.CoordinatorLoadInProgress) {
		t.Fatalf("read while loading: %v", err)
	}
	for _, r := range l.recs {
		if err := c2.LoadRecord(0, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	c2.FinishLoad(0)
	again, ok, err := c2.Read(key, 2)
	if !ok || err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("replayed state %+v (ok %v, err %v), want %+v", again, ok, err, got)
	}
}

func TestFencing(t *testing.T) {
	c := owned(&memLog{})
	if err := c.Write(key, share.Update{LeaderEpoch: 3, StartOffset: 0}); err != nil {
		t.Fatal(err)
	}
	// A new leader (epoch 4) reads: the old one (3) can no longer write.
	if _, _, err := c.Read(key, 4); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(key, share.Update{LeaderEpoch: 3, StartOffset: -1}); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("write from a deposed leader: %v", err)
	}
	if _, _, err := c.Read(key, 3); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("read from a deposed leader: %v", err)
	}
	// A look (epoch -1) fences nobody.
	if _, ok, err := c.Read(key, -1); !ok || err != nil {
		t.Fatalf("look: ok %v err %v", ok, err)
	}
	if err := c.Write(key, share.Update{LeaderEpoch: 4, StartOffset: 5}); err != nil {
		t.Fatal(err)
	}
	// A reset (AlterShareGroupOffsets) bumps the state epoch: writes
	// against the old state are refused, the reloaded state is accepted.
	if err := c.Initialize(key, 100); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(key, share.Update{LeaderEpoch: 4, StartOffset: 6}); !errors.Is(err, kerr.FencedStateEpoch) {
		t.Fatalf("write against a reset state: %v", err)
	}
	s, _, _ := c.Read(key, 4)
	if s.StartOffset != 100 || s.StateEpoch != 1 {
		t.Fatalf("after the reset: %+v", s)
	}
	if err := c.Write(key, share.Update{LeaderEpoch: 4, StateEpoch: 1, StartOffset: 101}); err != nil {
		t.Fatal(err)
	}
	// Delete: nothing to read; a fresh start is accepted with the next
	// state epoch.
	if err := c.Delete(key); err != nil {
		t.Fatal(err)
	}
	if s, ok, _ := c.Read(key, 4); ok || s.StateEpoch != 2 {
		t.Fatalf("after the delete: ok %v state %+v", ok, s)
	}
	// Whoever loaded the deleted state is refused, even with a start
	// offset; a fresh start (state epoch 2) is accepted.
	if err := c.Write(key, share.Update{LeaderEpoch: 4, StateEpoch: 1, StartOffset: 15}); !errors.Is(err, kerr.FencedStateEpoch) {
		t.Fatalf("write of the deleted state: %v", err)
	}
	if err := c.Write(key, share.Update{LeaderEpoch: 4, StateEpoch: 2, StartOffset: -1}); !errors.Is(err, ErrNoState) {
		t.Fatalf("update with no state: %v", err)
	}
	if err := c.Write(key, share.Update{LeaderEpoch: 4, StateEpoch: 2, StartOffset: 20}); err != nil {
		t.Fatal(err)
	}
}

// A deletion survives a coordinator failover with its state epoch.
func TestDeleteReplays(t *testing.T) {
	l := &memLog{}
	c := owned(l)
	if err := c.Write(key, share.Update{LeaderEpoch: 1, StartOffset: 10}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(key); err != nil {
		t.Fatal(err)
	}
	c2 := New(l, nil)
	c2.SetPartitions(1)
	c2.BeginLoad(0)
	for _, r := range l.recs {
		if err := c2.LoadRecord(0, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	c2.FinishLoad(0)
	if s, ok, err := c2.Read(key, 1); ok || err != nil || s.StateEpoch != 1 {
		t.Fatalf("after replay: %+v ok %v err %v; want no state at state epoch 1", s, ok, err)
	}
	if err := c2.Write(key, share.Update{LeaderEpoch: 1, StartOffset: 15}); !errors.Is(err, kerr.FencedStateEpoch) {
		t.Fatalf("stale write after replay: %v", err)
	}
	// A look leaves nothing behind.
	if _, ok, err := c2.Read(share.Key{Group: "nobody", Partition: 0}, -1); ok || err != nil {
		t.Fatalf("look at nothing: ok %v err %v", ok, err)
	}
}

func TestNotCoordinatorAndFailedAppend(t *testing.T) {
	l := &memLog{}
	c := New(l, nil)
	c.SetPartitions(4)
	if _, _, err := c.Read(key, 1); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("read at a node that owns nothing: %v", err)
	}
	c.BeginLoad(PartitionFor(key, 4))
	c.FinishLoad(PartitionFor(key, 4))
	if err := c.Write(key, share.Update{LeaderEpoch: 1, StartOffset: 7}); err != nil {
		t.Fatal(err)
	}
	l.fail = errors.New("disk full")
	if err := c.Write(key, share.Update{LeaderEpoch: 1, StartOffset: 9}); err == nil {
		t.Fatal("a failed append was acknowledged")
	}
	if s, _, _ := c.Read(key, 1); s.StartOffset != 7 {
		t.Fatalf("a failed write changed the state: start %d", s.StartOffset)
	}
	c.Unload(PartitionFor(key, 4))
	if _, _, err := c.Read(key, 1); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("read after unload: %v", err)
	}
}

// The coordinator key and placement are Kafka's: "group:topicId:partition"
// with the topic id in URL-safe base64, hashed like a group id.
func TestCoordinatorKey(t *testing.T) {
	if got := CoordinatorKey(share.Key{Group: "g", TopicID: [16]byte{0xfb, 0xff}, Partition: 2}); got != "g:-_8AAAAAAAAAAAAAAAAAAA:2" {
		t.Fatalf("coordinator key %q", got)
	}
}

func TestIsRetriable(t *testing.T) {
	for err, want := range map[error]bool{
		ErrNotCoordinator: true, ErrLoading: true, errors.New("connection reset"): true,
		kerr.CoordinatorNotAvailable: true,
		ErrFenced:                    false, kerr.FencedLeaderEpoch: false, ErrFencedState: false, ErrNoState: false,
	} {
		if got := IsRetriable(err); got != want {
			t.Errorf("IsRetriable(%v) = %v, want %v", err, got, want)
		}
	}
}

// A key whose __share_group_state partition this coordinator does not own
// answers by what the metadata says of it: COORDINATOR_LOAD_IN_PROGRESS
// while this node leads it but has not begun to load it (also before the
// loader has learnt the topic's partition count),
// COORDINATOR_NOT_AVAILABLE while it has no leader, NOT_COORDINATOR only
// when another node leads it.
func TestNotOwnedAnswersByLeadership(t *testing.T) {
	for lead, want := range map[metadata.Leadership]*kerr.Error{
		metadata.LeaderSelf:  kerr.CoordinatorLoadInProgress,
		metadata.LeaderNone:  kerr.CoordinatorNotAvailable,
		metadata.LeaderOther: kerr.NotCoordinator,
	} {
		for _, counted := range []bool{false, true} {
			c := New(&memLog{}, nil)
			c.Leader = func(k share.Key) metadata.Leadership {
				if k != key {
					t.Errorf("Leader asked about %v", k)
				}
				return lead
			}
			if counted {
				c.SetPartitions(4)
			}
			_, _, err := c.Read(key, 1)
			if !errors.Is(err, want) {
				t.Errorf("%v (partition count known: %v): read: %v, want %v", lead, counted, err, want)
			}
			if err := c.Write(key, share.Update{LeaderEpoch: 1, StartOffset: 0}); !errors.Is(err, want) {
				t.Errorf("%v: write: %v, want %v", lead, err, want)
			}
			if !IsRetriable(err) {
				t.Errorf("%v: %v not retriable", lead, err)
			}
		}
	}
}
