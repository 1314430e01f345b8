package handler

// CreatePartitions, versions 0-3, with validate-only and manual
// assignment. Partitions can only be added (INVALID_PARTITIONS otherwise).

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(37, 0, 3, (*Broker).createPartitions) }

func (b *Broker) createPartitions(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.CreatePartitionsRequest)
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		err := error(nil)
		if !b.authorized(req, opAlter, rTopic, rt.Topic) {
			err = kerr.TopicAuthorizationFailed
		} else {
			err = b.addPartitions(ctx, rt, r.ValidateOnly)
		}
		if err != nil {
			st.ErrorCode = code(err)
			st.ErrorMessage = errMsg(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp), nil
}

func (b *Broker) addPartitions(ctx context.Context, rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	im := b.image()
	t := im.Topic(rt.Topic)
	if t == nil {
		return fmt.Errorf("%w: no topic %q", kerr.UnknownTopicOrPartition, rt.Topic)
	}
	cur := int32(len(t.Partitions))
	if rt.Count <= cur {
		return fmt.Errorf("%w: topic %q has %d partitions; the new count must be larger (partitions cannot be removed)", kerr.InvalidPartitions, rt.Topic, cur)
	}
	if rt.Count > 100000 {
		// The bound CreateTopics applies; it also keeps the count from
		// sizing an allocation (assignReplicas) a client can make huge.
		return fmt.Errorf("%w: %d partitions is more than the 100000 a topic may have", kerr.InvalidPartitions, rt.Count)
	}
	add := rt.Count - cur
	var replicas [][]int32
	if len(rt.Assignment) > 0 {
		if int32(len(rt.Assignment)) != add {
			return fmt.Errorf("%w: %d assignments for %d new partitions", kerr.InvalidReplicaAssignment, len(rt.Assignment), add)
		}
		for _, a := range rt.Assignment {
			replicas = append(replicas, a.Replicas)
		}
		if err := cluster.ValidateAssignment(im, replicas); err != nil {
			return err
		}
		if rf := len(t.Partitions[0].Replicas); len(replicas[0]) != rf {
			return fmt.Errorf("%w: new partitions need %d replicas like the existing ones, got %d", kerr.InvalidReplicaAssignment, rf, len(replicas[0]))
		}
	} else {
		var err error
		if replicas, err = cluster.AssignPartitions(im, rt.Topic, add, rand.Int64()); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	if err := b.propose(ctx, metadata.Record{CreatePartitions: &metadata.CreatePartitions{Name: rt.Topic, Replicas: replicas}}); err != nil {
		return err
	}
	b.log.Info("partitions added", "topic", rt.Topic, "from", cur, "to", rt.Count)
	return nil
}
