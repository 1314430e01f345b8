package group

// ConsumerGroupDescribe, versions 0-1 (KIP-848), and the classic
// DescribeGroups view of a consumer group. AuthorizedOperations is never
// filled (no ACLs yet).

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memberTypeConsumer is ConsumerGroupDescribe v1's MemberType of a member
// speaking the consumer protocol (0 is classic).
const memberTypeConsumer = 1

// ConsumerGroupDescribe serves a ConsumerGroupDescribe request. A group
// that does not exist or is classic answers GROUP_ID_NOT_FOUND, as Kafka.
func (c *Coordinator) ConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group = id
		fail := func(e *kerr.Error, msg string) {
			rg.ErrorCode = e.Code
			if msg != "" {
				rg.ErrorMessage = &msg
			}
		}
		if id == "" {
			fail(kerr.InvalidGroupID, "")
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		g, code := c.acquire(id, false)
		switch {
		case code != 0:
			rg.ErrorCode = code
		case g == nil:
			fail(kerr.GroupIDNotFound, "Group "+id+" not found.")
		case !g.isConsumer() || g.state == stateDead:
			fail(kerr.GroupIDNotFound, "Group "+id+" is not a consumer group.")
			g.mu.Unlock()
		default:
			c.describeConsumer(g, &rg)
			g.mu.Unlock()
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (c *Coordinator) describeConsumer(g *group, rg *kmsg.ConsumerGroupDescribeResponseGroup) {
	cg := g.cg
	rg.State = cg.stateName()
	rg.Epoch = cg.epoch
	rg.AssignmentEpoch = cg.assignmentEpoch
	rg.AssignorName = cg.assignor
	if rg.AssignorName == "" {
		rg.AssignorName = c.preferredAssignor(cg)
	}
	for _, m := range cg.ordered() {
		rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		rm.MemberID, rm.InstanceID, rm.RackID = m.id, m.instanceID, m.rackID
		rm.MemberEpoch = m.epoch
		rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
		rm.SubscribedTopics = slices.Clone(m.topics)
		if rm.SubscribedTopics == nil {
			rm.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			re := m.regex
			rm.SubscribedTopicRegex = &re
		}
		rm.Assignment = c.describedAssignment(cg, m.assigned)
		rm.TargetAssignment = c.describedAssignment(cg, cg.target[m.id])
		rm.MemberType = memberTypeConsumer
		rg.Members = append(rg.Members, rm)
	}
}

func (c *Coordinator) describedAssignment(cg *consumerGroup, a assignment) kmsg.Assignment {
	out := kmsg.NewAssignment()
	out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, id := range a.topicIDs() {
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = id, c.topicName(cg, id), slices.Clone(a[id])
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}

// describeConsumerAsClassic fills a DescribeGroups answer for a consumer
// group (Kafka's ConsumerGroup.asDescribedGroup).
func (c *Coordinator) describeConsumerAsClassic(g *group, rg *kmsg.DescribeGroupsResponseGroup) {
	cg := g.cg
	rg.State = cg.stateName()
	rg.ProtocolType = consumerProtocolType
	rg.Protocol = cg.assignor
	if rg.Protocol == "" {
		rg.Protocol = c.preferredAssignor(cg)
	}
	for _, m := range cg.ordered() {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID, rm.InstanceID = m.id, m.instanceID
		rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
		sub := kmsg.NewConsumerMemberMetadata()
		sub.Version = 3
		sub.Topics = slices.Clone(m.topics)
		if m.rackID != nil {
			rack := *m.rackID
			sub.Rack = &rack
		}
		rm.ProtocolMetadata = sub.AppendTo(nil)
		asg := kmsg.NewConsumerMemberAssignment()
		asg.Version = 3
		for _, id := range m.assigned.topicIDs() {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic, t.Partitions = c.topicName(cg, id), slices.Clone(m.assigned[id])
			asg.Topics = append(asg.Topics, t)
		}
		slices.SortFunc(asg.Topics, func(a, b kmsg.ConsumerMemberAssignmentTopic) int { return cmp.Compare(a.Topic, b.Topic) })
		rm.MemberAssignment = asg.AppendTo(nil)
		rg.Members = append(rg.Members, rm)
	}
}
