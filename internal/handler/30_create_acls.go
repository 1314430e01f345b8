package handler

// CreateAcls (key 30), versions 0-3: each creation is validated as Kafka
// validates a new ACL (a concrete resource type, LITERAL or PREFIXED, a
// name, kafka-cluster for the CLUSTER resource, a Type:Name principal, an
// operation the resource type supports, ALLOW or DENY; INVALID_REQUEST
// otherwise) and the valid ones are written in one metadata record, so
// every node applies them. Needs ALTER on the cluster; SECURITY_DISABLED
// without an authorizer.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(30, 0, 3, (*Broker).createACLs) }

func (b *Broker) createACLs(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.CreateACLsRequest)
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	fail := func(c int16, msg *string) server.Reply {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = c, msg
		}
		return now(resp)
	}
	if b.aclsDisabled() {
		return fail(kerr.SecurityDisabled.Code, errMsg(errSecurityDisabled)), nil
	}
	if !b.authorizedCluster(req, opAlter) {
		return fail(kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("ALTER on the cluster is needed to create ACLs")), nil
	}
	var add []metadata.ACL
	var valid []int
	for i, c := range r.Creations {
		pattern := c.ResourcePatternType
		if r.Version == 0 {
			pattern = kmsg.ACLResourcePatternTypeLiteral
		}
		a := metadata.ACL{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: pattern,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
		if err := a.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclCode(err)
			continue
		}
		add = append(add, a)
		valid = append(valid, i)
	}
	if len(add) == 0 {
		return now(resp), nil
	}
	if err := b.propose(ctx, metadata.Record{CreateACLs: &metadata.CreateACLs{ACLs: add}}); err != nil {
		c, msg := aclCode(err)
		for _, i := range valid {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = c, msg
		}
		return now(resp), nil
	}
	b.auditACLChange(req, "created", add)
	return now(resp), nil
}
