package handler

// DescribeGroups (key 15), versions 0-6, from the group coordinator
// (internal/group/admin.go): state, protocol type and protocol, members
// with their metadata and assignments (while the group is Stable, as in
// Kafka), for classic, consumer (KIP-848, described as Kafka does) and
// share groups.
//
// Not honoured: IncludeAuthorizedOperations (v3+; no ACLs yet:
// AuthorizedOperations is always Kafka's "not provided").

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(15, 0, 6, (*Broker).describeGroups) }

func (b *Broker) describeGroups(_ context.Context, req *server.Request) (server.Reply, error) {
	return now(b.Groups.DescribeGroups(req.Body.(*kmsg.DescribeGroupsRequest))), nil
}
