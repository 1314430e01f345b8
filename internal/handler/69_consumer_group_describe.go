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

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(69, 0, 1, (*Broker).consumerGroupDescribe) }

func (b *Broker) consumerGroupDescribe(_ context.Context, req *server.Request) (server.Reply, error) {
	return now(b.Groups.ConsumerGroupDescribe(req.Body.(*kmsg.ConsumerGroupDescribeRequest))), nil
}
