package group

// ShareGroupDescribe, versions 0-1 (KIP-932). AuthorizedOperations is
// left at its default (the handler fills it when asked and ACLs exist).

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Describe is the group as ShareGroupDescribe reports it: its state,
// epochs, the assignor, and each member (in member id order) with its
// subscription and the assignment it was last told (a member that has
// not heartbeated since the last epoch bump shows its old epoch and
// assignment, as in Kafka).
func (g *shareMembership) Describe() kmsg.ShareGroupDescribeResponseGroup {
	rg := kmsg.NewShareGroupDescribeResponseGroup()
	rg.GroupID = g.id
	if !g.Exists() {
		return shareDescribeNotFound(g.id, false)
	}
	rg.GroupState = g.State()
	rg.GroupEpoch = g.epoch
	rg.AssignmentEpoch = g.assignmentEpoch
	rg.Assignor = shareAssignorName
	rg.Members = []kmsg.ShareGroupDescribeResponseGroupMember{}
	for _, m := range g.ordered() {
		rm := kmsg.NewShareGroupDescribeResponseGroupMember()
		rm.MemberID, rm.RackID, rm.MemberEpoch = m.id, m.rackID, m.epoch
		rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
		rm.SubscribedTopicNames = slices.Clone(m.topics)
		if rm.SubscribedTopicNames == nil {
			rm.SubscribedTopicNames = []string{}
		}
		rm.Assignment.TopicPartitions = []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
		for _, id := range m.assigned.TopicIDs() {
			t := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			t.TopicID, t.Topic, t.Partitions = id, g.names[id], slices.Clone(m.assigned[id])
			rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, t)
		}
		rg.Members = append(rg.Members, rm)
	}
	return rg
}

// shareDescribeNotFound is ShareGroupDescribe's answer for a group that
// does not exist, or (otherType) is not a share group, as Kafka words it.
func shareDescribeNotFound(id string, otherType bool) kmsg.ShareGroupDescribeResponseGroup {
	rg := kmsg.NewShareGroupDescribeResponseGroup()
	rg.GroupID = id
	rg.ErrorCode = kerr.GroupIDNotFound.Code
	msg := "Group " + id + " not found."
	if otherType {
		msg = "Group " + id + " is not a share group."
	}
	rg.ErrorMessage = &msg
	return rg
}
