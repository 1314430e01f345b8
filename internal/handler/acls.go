package handler

// What DescribeAcls, CreateAcls and DeleteAcls share: the filter of a
// request, the error of a refused binding.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/metadata"
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
