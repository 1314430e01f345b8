package cluster

import (
	"errors"
	"slices"
	"testing"

	"github.com/berthmq/berth/internal/metadata"
)

// TestSupervisorReassign moves a partition from brokers 1,2,3 to 2,3,4:
// the request adds 4 and marks 1 as leaving without touching the leader;
// the Supervisor waits until 4 is in sync, then completes it with the
// leader moved off 1. A cancel restores the original replicas.
func TestSupervisorReassign(t *testing.T) {
	e := newEnv(t, []int32{1, 2, 3, 4}, Config{}, nil)
	e.propose(createTopic("t", [][]int32{{1, 2, 3}, {1, 2, 3}}, nil))
	e.hear(1, 2, 3, 4)
	e.tick()

	res, err := e.sup.Reassign(ctx(t), []Reassignment{
		{TopicPartition{"t", 0}, []int32{2, 3, 4}},
		{TopicPartition{"t", 1}, []int32{4, 3, 2}},
		{TopicPartition{"t", 9}, []int32{1, 2, 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err != nil || !errors.Is(res[2].Err, ErrUnknownPartition) {
		t.Fatalf("results %+v", res)
	}
	p := e.part("t", 0)
	if !slices.Equal(p.Replicas, []int32{2, 3, 4, 1}) || !slices.Equal(p.AddingReplicas, []int32{4}) ||
		!slices.Equal(p.RemovingReplicas, []int32{1}) || p.Leader != 1 || !slices.Equal(p.ISR, []int32{1, 2, 3}) {
		t.Fatalf("started: %+v", p)
	}

	// Not in sync yet: nothing completes.
	e.tick()
	if p := e.part("t", 0); !p.Reassigning() {
		t.Fatalf("completed before the new replica was in sync: %+v", p)
	}
	// The leader adds 4 to the ISR (AlterPartition); the next round
	// completes, electing the first in-sync target replica.
	e.propose(setISR("t", 0, 1, 2, 3, 4))
	e.tick()
	p = e.part("t", 0)
	if p.Reassigning() || !slices.Equal(p.Replicas, []int32{2, 3, 4}) || p.Leader != 2 || !slices.Equal(p.ISR, []int32{2, 3, 4}) {
		t.Fatalf("completed: %+v", p)
	}

	// Partition 1 is cancelled: back to brokers 1, 2 and 3 (in the order
	// the reassignment left them, as in Kafka), leader and ISR unchanged.
	res, err = e.sup.Reassign(ctx(t), []Reassignment{{TopicPartition{"t", 1}, nil}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("cancel: %v %+v", err, res)
	}
	p = e.part("t", 1)
	if p.Reassigning() || !slices.Equal(slices.Sorted(slices.Values(p.Replicas)), []int32{1, 2, 3}) || p.Leader != 1 {
		t.Fatalf("cancelled: %+v", p)
	}
	res, _ = e.sup.Reassign(ctx(t), []Reassignment{{TopicPartition{"t", 1}, nil}})
	if !errors.Is(res[0].Err, ErrNoReassignmentInProgress) {
		t.Fatalf("second cancel: %+v", res)
	}
}

func TestPlanReassignmentValidates(t *testing.T) {
	im := emptyImage(t)
	im = applyRecs(t, im, register(1, ""), register(2, ""), register(3, ""),
		createTopic("t", [][]int32{{1, 2}}, nil))
	for _, target := range [][]int32{{}, {1, 1}, {1, 7}} {
		if _, err := PlanReassignment(im, Reassignment{TopicPartition{"t", 0}, target}); !errors.Is(err, ErrInvalidReplicaAssignment) {
			t.Errorf("target %v: %v, want ErrInvalidReplicaAssignment", target, err)
		}
	}
	// The same replicas: nothing to do. A subset: completes at once.
	if c, err := PlanReassignment(im, Reassignment{TopicPartition{"t", 0}, []int32{1, 2}}); c != nil || err != nil {
		t.Errorf("same replicas: %+v %v", c, err)
	}
	c, err := PlanReassignment(im, Reassignment{TopicPartition{"t", 0}, []int32{2}})
	if err != nil || !slices.Equal(c.Replicas, []int32{2}) || *c.Leader != 2 || len(c.AddingReplicas) != 0 {
		t.Errorf("shrink: %+v %v", c, err)
	}
	im = applyRecs(t, im, metadata.Record{PartitionChange: c})
	if p := im.Topic("t").Partition(0); p.Reassigning() || p.Leader != 2 {
		t.Errorf("applied shrink: %+v", p)
	}
}
