package cluster

// Partition reassignment (AlterPartitionReassignments), as KRaft does it:
//
//  1. The request sets the replicas to the target followed by the replicas
//     leaving, and records which are being added and removed. The ISR and
//     the leader do not change: the new replicas start copying the log as
//     followers and join the ISR through the leader once caught up.
//  2. Once every added replica is in the ISR, the Supervisor completes it:
//     the replicas become the target, the leaving ones drop out of the ISR,
//     and a leader that is leaving hands over to the first live in-sync
//     target replica (the leaving replicas then delete their copies).
//  3. Cancelling goes back to the original replicas (those not being
//     added), keeping the ISR among them.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/berthmq/berth/internal/metadata"
)

// ErrNoReassignmentInProgress: a cancel for a partition that is not being
// reassigned (NO_REASSIGNMENT_IN_PROGRESS).
var ErrNoReassignmentInProgress = errors.New("cluster: no reassignment in progress")

// Reassignment asks for a partition's replicas to become Target; a nil
// Target cancels the reassignment in progress.
type Reassignment struct {
	TopicPartition
	Target []int32
}

// ReassignResult is one partition's outcome.
type ReassignResult struct {
	TopicPartition
	Err error
}

// PlanReassignment returns the change that starts (or cancels) r, or nil
// when nothing needs to change. A new target replaces one in progress: it
// is computed from the original replicas.
func PlanReassignment(im *metadata.Image, r Reassignment) (*metadata.PartitionChange, error) {
	t := im.Topic(r.Topic)
	p := t.Partition(r.Partition)
	if p == nil {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, r.Topic, r.Partition)
	}
	orig := filter(p.Replicas, func(id int32) bool { return !slices.Contains(p.AddingReplicas, id) })
	if r.Target == nil {
		if !p.Reassigning() {
			return nil, fmt.Errorf("%w: %s-%d", ErrNoReassignmentInProgress, r.Topic, r.Partition)
		}
		return settle(r.Topic, p, orig)
	}
	if err := ValidateAssignment(im, [][]int32{r.Target}); err != nil {
		return nil, err
	}
	adding := filter(r.Target, func(id int32) bool { return !slices.Contains(orig, id) })
	removing := filter(orig, func(id int32) bool { return !slices.Contains(r.Target, id) })
	if len(adding) == 0 {
		// Nothing to copy: the target is (a reordering of) a subset of
		// the original replicas, so it completes at once.
		if !p.Reassigning() && slices.Equal(r.Target, p.Replicas) {
			return nil, nil
		}
		return settle(r.Topic, p, r.Target)
	}
	replicas := append(slices.Clone(r.Target), removing...)
	isr := filter(p.ISR, func(id int32) bool { return slices.Contains(replicas, id) })
	if len(isr) == 0 || !slices.Contains(isr, p.Leader) && p.Leader != metadata.NoLeader {
		return nil, fmt.Errorf("%w: %s-%d: no in-sync replica stays while the reassignment runs", ErrEligibleLeadersNotAvailable, r.Topic, r.Partition)
	}
	epoch := p.PartitionEpoch
	return &metadata.PartitionChange{
		Topic: r.Topic, Partition: r.Partition, Replicas: replicas, ISR: isr,
		AddingReplicas: adding, RemovingReplicas: nonNilEmpty(removing), ExpectPartitionEpoch: &epoch,
	}, nil
}

// settle takes p to exactly replicas, with the reassignment cleared: the
// ISR keeps its members among them, and a leader outside them hands over to
// the first in-sync one.
func settle(topic string, p *metadata.Partition, replicas []int32) (*metadata.PartitionChange, error) {
	isr := filter(p.ISR, func(id int32) bool { return slices.Contains(replicas, id) })
	leader := p.Leader
	if !slices.Contains(isr, leader) {
		i := firstIn(replicas, func(id int32) bool { return slices.Contains(isr, id) })
		if i < 0 {
			return nil, fmt.Errorf("%w: partition %d: none of %v is in the ISR %v", ErrEligibleLeadersNotAvailable, p.Index, replicas, p.ISR)
		}
		leader = replicas[i]
	}
	epoch := p.PartitionEpoch
	return &metadata.PartitionChange{
		Topic: topic, Partition: p.Index, Leader: &leader, Replicas: slices.Clone(replicas), ISR: isr,
		AddingReplicas: []int32{}, RemovingReplicas: []int32{}, ExpectPartitionEpoch: &epoch,
	}, nil
}

func nonNilEmpty(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

// completion returns the change that finishes p's reassignment once every
// added replica is in the ISR and a live in-sync target replica can lead;
// false while it must wait.
func completion(topic string, p *metadata.Partition, b Brokers) (*metadata.PartitionChange, bool) {
	if !p.Reassigning() {
		return nil, false
	}
	for _, id := range p.AddingReplicas {
		if !slices.Contains(p.ISR, id) {
			return nil, false
		}
	}
	target := p.TargetReplicas()
	live := func(id int32) bool { return b[id] == Live && slices.Contains(p.ISR, id) }
	if !slices.ContainsFunc(target, live) {
		return nil, false
	}
	c, err := settle(topic, p, target)
	if err != nil {
		return nil, false
	}
	if !live(*c.Leader) {
		i := firstIn(target, live)
		*c.Leader = target[i]
	}
	return c, true
}
