package handler

// DescribeAcls (key 29), versions 0-3: the bindings matching one filter
// (Kafka's AclBindingFilter: ANY, MATCH, a null name, principal or host
// matching all), grouped by resource pattern. Needs DESCRIBE on the
// cluster; SECURITY_DISABLED without an authorizer; INVALID_REQUEST for
// a filter with UNKNOWN values.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(29, 0, 3, (*Broker).describeACLs) }

func (b *Broker) describeACLs(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeACLsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	if b.aclsDisabled() {
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, errMsg(errSecurityDisabled)
		return now(resp), nil
	}
	if !b.authorizedCluster(req, opDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("DESCRIBE on the cluster is needed to describe ACLs")
		return now(resp), nil
	}
	f := aclFilter(r.Version, r.ResourceType, r.ResourceName, r.ResourcePatternType, r.Principal, r.Host, r.Operation, r.PermissionType)
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = aclCode(err)
		return now(resp), nil
	}
	var last *kmsg.DescribeACLsResponseResource
	for _, a := range b.image().ACLs.Filter(f) { // sorted: one resource's bindings are adjacent
		if last == nil || last.ResourceType != a.ResourceType || last.ResourceName != a.ResourceName || last.ResourcePatternType != a.PatternType {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
			resp.Resources = append(resp.Resources, res)
			last = &resp.Resources[len(resp.Resources)-1]
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
		last.ACLs = append(last.ACLs, e)
	}
	return now(resp), nil
}
