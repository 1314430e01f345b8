package handler

// CreateTopics, versions 0-7: validate-only (v1+), manual replica
// assignment, configs, and the v5+ effective configs and topic id (v7+) in
// the response. Topics of one request are created one by one; each has its
// own result.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(19, 0, 7, (*Broker).createTopics) }

func (b *Broker) createTopics(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(err error) {
			st.ErrorCode = code(err)
			st.ErrorMessage = errMsg(err)
			resp.Topics = append(resp.Topics, st)
		}
		if seen[rt.Topic] > 1 {
			fail(errors.New("INVALID_REQUEST: topic named more than once in one request"))
			resp.Topics[len(resp.Topics)-1].ErrorCode = kerr.InvalidRequest.Code
			continue
		}
		if !b.mayQuietly(req, opCreate, rCluster, clusterName) && !b.authorized(req, opCreate, rTopic, rt.Topic) {
			fail(kerr.TopicAuthorizationFailed)
			continue
		}
		spec := topicSpec{name: rt.Topic, partitions: rt.NumPartitions, rf: int32(rt.ReplicationFactor), configs: map[string]string{}}
		for _, c := range rt.Configs {
			if c.Value != nil {
				spec.configs[c.Name] = *c.Value
			}
		}
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(rt.ReplicaAssignment) {
				// Partitions are numbered 0..n-1: this one leaves a gap
				// (and must not size the slice below).
				spec.assignment = [][]int32{nil}
				break
			}
			for int(a.Partition) >= len(spec.assignment) {
				spec.assignment = append(spec.assignment, nil)
			}
			spec.assignment[a.Partition] = a.Replicas
		}
		for _, a := range spec.assignment {
			if len(a) == 0 {
				spec.assignment = nil
				fail(kerr.InvalidReplicaAssignment)
				break
			}
		}
		if len(rt.ReplicaAssignment) > 0 && spec.assignment == nil {
			continue
		}
		im := b.image()
		rec, err := b.prepareTopic(im, spec)
		if err != nil {
			fail(err)
			continue
		}
		ct := rec.CreateTopic
		if !r.ValidateOnly {
			if err := b.propose(ctx, rec); err != nil {
				fail(err)
				continue
			}
			b.log.Info("topic created", "topic", ct.Name, "partitions", ct.Partitions, "configs", ct.Configs)
			st.TopicID = ct.ID
		}
		st.NumPartitions = ct.Partitions
		st.ReplicationFactor = int16(len(ct.Replicas[0]))
		if !b.mayQuietly(req, opDescribeConfigs, rTopic, ct.Name) { // Kafka: the configs only with DESCRIBE_CONFIGS
			st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		for _, e := range b.topicConfigEntries(b.image(), ct.Configs, int(st.ReplicationFactor)) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			v := e.value
			c.Name, c.Value, c.ReadOnly, c.Source = e.name, &v, e.readOnly, int8(e.source)
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp), nil
}
