package handler

// What DescribeAcls, CreateAcls and DeleteAcls share: the filter of a
// request, the error of a refused binding.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

// aclFilter is a request's filter; version 0 has no pattern type and
// means LITERAL, as in Kafka.
func aclFilter(version int16, typ kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType,
	principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) metadata.ACLFilter {
	if version == 0 {
		pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	return metadata.ACLFilter{ResourceType: typ, ResourceName: name, PatternType: pattern,
		Principal: principal, Host: host, Operation: op, Permission: perm}
}

// aclCode is the Kafka error of an ACL request's failure: INVALID_REQUEST
// for a binding or filter Kafka refuses.
func aclCode(err error) (int16, *string) {
	if errors.Is(err, metadata.ErrInvalidACL) {
		return kerr.InvalidRequest.Code, errMsg(err)
	}
	return code(err), errMsg(err)
}

// aclsDisabled: no authorizer is configured, so the ACL APIs answer
// SECURITY_DISABLED, as Kafka's.
func (b *Broker) aclsDisabled() bool { return !auth.Enabled(b.Authorizer) }

var errSecurityDisabled = errors.New("no authorizer is configured (authorizer.class.name): ACLs are not enabled on this cluster")

// auditACLChange records each created or deleted binding in the audit
// trail (Kind "management") and the broker log.
func (b *Broker) auditACLChange(req *server.Request, what string, acls []metadata.ACL) {
	method := kmsg.NameForKey(req.Key)
	var listener string
	if req.Conn != nil {
		listener = req.Conn.Listener
	}
	for _, a := range acls {
		b.log.Info("acl "+what, "acl", a.String(), "principal", req.Conn.Principal().String())
		b.Auditor.Audit(auth.Event{Time: time.Now(), Principal: req.Conn.Principal(), Host: req.Conn.Host(),
			Listener: listener, Kind: "management", Method: method, Operation: a.Operation.String(),
			ResourceType: a.ResourceType.String(), ResourceName: a.ResourceName, Allowed: true,
			Detail: map[string]string{"change": what, "acl": a.String(), "acl_principal": a.Principal,
				"acl_host": a.Host, "acl_permission": a.Permission.String(), "acl_pattern": a.PatternType.String()}})
	}
}
