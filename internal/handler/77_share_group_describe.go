package handler

// ShareGroupDescribe (key 77), versions 0-1 (KIP-932): a share group's
// state, epochs, assignor ("simple") and members with their
// subscriptions and assignments. A group of another type answers
// GROUP_ID_NOT_FOUND "Group g is not a share group.", as Kafka.
//
// Not honoured: IncludeAuthorizedOperations (no ACLs yet:
// AuthorizedOperations is always Kafka's "not provided").

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(77, 0, 1, (*Broker).shareGroupDescribe) }

func (b *Broker) shareGroupDescribe(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ShareGroupDescribeRequest)
	allowed, denied := b.splitGroups(req, opDescribe, r.GroupIDs)
	rest := *r
	rest.GroupIDs = allowed
	resp := b.Groups.ShareGroupDescribe(&rest)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		g.AuthorizedOperations = b.opsIf(r.IncludeAuthorizedOperations, req, rGroup, g.GroupID)
		var topics []string
		for _, m := range g.Members {
			for _, a := range m.Assignment.TopicPartitions {
				topics = append(topics, a.Topic)
			}
		}
		if msg := b.hiddenTopics(req, topics); msg != nil { // as Kafka
			id := g.GroupID
			*g = kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode, g.ErrorMessage = id, kerr.TopicAuthorizationFailed.Code, msg
		}
	}
	for _, g := range denied {
		dg := kmsg.NewShareGroupDescribeResponseGroup()
		dg.GroupID, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, dg)
	}
	return now(resp), nil
}
