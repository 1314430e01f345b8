package handler

// AlterPartitionReassignments, versions 0-1 (KIP-455): move partitions to
// new replicas, or cancel (null replicas) a move in progress. Runs on the
// active controller (NOT_CONTROLLER elsewhere, so clients retry there):
// the request adds the new replicas as followers and returns; the
// controller completes each move once its new replicas are in sync
// (internal/cluster, reassign.go). v1's AllowReplicationFactorChange=false
// refuses a target of another size (INVALID_REPLICATION_FACTOR), as Kafka
// does. Followers catching up for a reassignment honour
// follower.replication.throttled.rate.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(45, 0, 1, (*Broker).alterPartitionReassignments) }

// Reassigner starts and cancels reassignments; cluster.Supervisor
// implements it on the active controller.
type Reassigner interface {
	Reassign(ctx context.Context, reqs []cluster.Reassignment) ([]cluster.ReassignResult, error)
}

func (b *Broker) alterPartitionReassignments(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = r.AllowReplicationFactorChange
	fail := func(err error) server.Reply {
		resp.ErrorCode = code(err)
		msg := errMsg(err)
		resp.ErrorMessage = msg
		return now(resp)
	}
	if !b.authorizedCluster(req, opAlter) {
		return fail(kerr.ClusterAuthorizationFailed), nil
	}
	if b.Reassigner == nil || !b.Controller.IsLeader() {
		return fail(fmt.Errorf("%w: reassignments run on the active controller", kerr.NotController)), nil
	}
	im := b.image()
	type slot struct{ topic, part int }
	var reqs []cluster.Reassignment
	var slots []slot
	resp.Topics = make([]kmsg.AlterPartitionAssignmentsResponseTopic, len(r.Topics))
	for i, rt := range r.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.AlterPartitionAssignmentsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			mp := im.Topic(rt.Topic).Partition(rp.Partition)
			var err error
			switch {
			case mp == nil:
				err = fmt.Errorf("%w: %s-%d", kerr.UnknownTopicOrPartition, rt.Topic, rp.Partition)
			case r.Version >= 1 && !r.AllowReplicationFactorChange && rp.Replicas != nil && len(rp.Replicas) != len(mp.TargetReplicas()):
				err = fmt.Errorf("%w: %s-%d has %d replicas, the target %d; set AllowReplicationFactorChange to change it",
					kerr.InvalidReplicationFactor, rt.Topic, rp.Partition, len(mp.TargetReplicas()), len(rp.Replicas))
			}
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage = code(err), errMsg(err)
				continue
			}
			target := rp.Replicas
			if target != nil && len(target) == 0 {
				err := fmt.Errorf("%w: %s-%d: an empty replica list; use null to cancel", kerr.InvalidReplicaAssignment, rt.Topic, rp.Partition)
				sp.ErrorCode, sp.ErrorMessage = code(err), errMsg(err)
				continue
			}
			reqs = append(reqs, cluster.Reassignment{TopicPartition: cluster.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}, Target: target})
			slots = append(slots, slot{i, j})
		}
	}
	if len(reqs) == 0 {
		return now(resp), nil
	}
	timeout := time.Duration(r.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	results, err := b.Reassigner.Reassign(ctx, reqs)
	if err != nil {
		if errors.Is(err, metadata.ErrNotLeader) {
			err = fmt.Errorf("%w: %v", kerr.NotController, err)
		}
		return fail(err), nil
	}
	for k, res := range results {
		sp := &resp.Topics[slots[k].topic].Partitions[slots[k].part]
		if res.Err != nil {
			sp.ErrorCode, sp.ErrorMessage = code(res.Err), errMsg(res.Err)
			continue
		}
		b.log.Info("partition reassignment requested", "topic", res.Topic, "partition", res.Partition,
			"target", reqs[k].Target, "client", req.ClientID)
	}
	return now(resp), nil
}
