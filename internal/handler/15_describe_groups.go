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

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(15, 0, 6, (*Broker).describeGroups) }

func (b *Broker) describeGroups(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeGroupsRequest)
	allowed, denied := b.splitGroups(req, opDescribe, r.Groups)
	rest := *r
	rest.Groups = allowed
	resp := b.Groups.DescribeGroups(&rest)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		g.AuthorizedOperations = b.opsIf(r.Version >= 3 && r.IncludeAuthorizedOperations, req, rGroup, g.Group)
	}
	for _, g := range denied {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, dg)
	}
	return now(resp), nil
}
