package handler

// ConsumerGroupDescribe (key 69), versions 0-1: the KIP-848 consumer
// groups that ConsumerGroupHeartbeat (68_consumer_group_heartbeat.go)
// runs, from the group coordinator (internal/group): members, epochs,
// subscriptions, current and target assignments; v1 adds MemberType.
//
// Not honoured: IncludeAuthorizedOperations (no ACLs yet:
// AuthorizedOperations is always Kafka's "not provided").

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(69, 0, 1, (*Broker).consumerGroupDescribe) }

func (b *Broker) consumerGroupDescribe(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ConsumerGroupDescribeRequest)
	allowed, denied := b.splitGroups(req, opDescribe, r.Groups)
	rest := *r
	rest.Groups = allowed
	resp := b.Groups.ConsumerGroupDescribe(&rest)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		g.AuthorizedOperations = b.opsIf(r.IncludeAuthorizedOperations, req, rGroup, g.Group)
		var topics []string
		for _, m := range g.Members {
			for _, a := range append(m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions...) {
				topics = append(topics, a.Topic)
			}
		}
		if msg := b.hiddenTopics(req, topics); msg != nil { // as Kafka: not a member list naming topics it may not see
			id := g.Group
			*g = kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode, g.ErrorMessage = id, kerr.TopicAuthorizationFailed.Code, msg
		}
	}
	for _, g := range denied {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, dg)
	}
	return now(resp), nil
}
