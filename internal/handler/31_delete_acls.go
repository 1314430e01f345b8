package handler

// DeleteAcls (key 31), versions 0-3: each filter (as DescribeAcls's) is
// resolved against the current image into the exact bindings it matches;
// all of them are removed in one metadata record and each filter's result
// lists its bindings. Needs ALTER on the cluster; SECURITY_DISABLED
// without an authorizer; INVALID_REQUEST for a filter with UNKNOWN
// values. Two concurrent deletes may both list a binding only one of
// them removed.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(31, 0, 3, (*Broker).deleteACLs) }

func (b *Broker) deleteACLs(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DeleteACLsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
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
		return fail(kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("ALTER on the cluster is needed to delete ACLs")), nil
	}
	acls := b.image().ACLs
	var del []metadata.ACL
	seen := map[metadata.ACL]bool{}
	var ok []int
	for i, fr := range r.Filters {
		f := aclFilter(r.Version, fr.ResourceType, fr.ResourceName, fr.ResourcePatternType, fr.Principal, fr.Host, fr.Operation, fr.PermissionType)
		if err := f.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclCode(err)
			continue
		}
		ok = append(ok, i)
		for _, a := range acls.Filter(f) {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			if !seen[a] {
				seen[a] = true
				del = append(del, a)
			}
		}
	}
	if len(del) == 0 {
		return now(resp), nil
	}
	if err := b.propose(ctx, metadata.Record{DeleteACLs: &metadata.DeleteACLs{ACLs: del}}); err != nil {
		c, msg := aclCode(err)
		for _, i := range ok {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = c, msg
			resp.Results[i].MatchingACLs = nil
		}
		return now(resp), nil
	}
	b.auditACLChange(req, "deleted", del)
	return now(resp), nil
}
