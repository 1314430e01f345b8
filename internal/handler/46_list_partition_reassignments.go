package handler

// ListPartitionReassignments, version 0 (KIP-455): the partitions being
// reassigned, with their full replica set and the replicas being added and
// removed, from this node's metadata image (every node has the same; Kafka
// sends it to the controller). Null topics: every partition in progress.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(46, 0, 0, (*Broker).listPartitionReassignments) }

func (b *Broker) listPartitionReassignments(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !b.authorizedCluster(req, opDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("DESCRIBE on the cluster is needed to list partition reassignments")
		return now(resp), nil
	}
	im := b.image()
	add := func(t *metadata.Topic, parts []int32) {
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = t.Name
		each := func(p *metadata.Partition) {
			if p == nil || !p.Reassigning() {
				return
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition, sp.Replicas = p.Index, p.Replicas
			sp.AddingReplicas, sp.RemovingReplicas = nonNilInt32s(p.AddingReplicas), nonNilInt32s(p.RemovingReplicas)
			st.Partitions = append(st.Partitions, sp)
		}
		if parts == nil {
			for i := range t.Partitions {
				each(&t.Partitions[i])
			}
		} else {
			for _, p := range parts {
				each(t.Partition(p))
			}
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	if r.Topics == nil {
		for _, name := range im.TopicNames() {
			add(im.Topics[name], nil)
		}
	} else {
		for _, rt := range r.Topics {
			if t := im.Topic(rt.Topic); t != nil {
				add(t, rt.Partitions)
			}
		}
	}
	return now(resp), nil
}

func nonNilInt32s(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
