package auth

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
)

// ACLAuthorizer is Berth's authorizer, with Kafka's StandardAuthorizer
// semantics over the ACL bindings of the current metadata image:
//
//   - a super user (super.users) may do everything;
//   - else a matching DENY binding denies, whatever else matches;
//   - else a matching ALLOW binding allows; ALLOW of READ, WRITE, DELETE
//     or ALTER also allows DESCRIBE, ALLOW of ALTER_CONFIGS also allows
//     DESCRIBE_CONFIGS, and ALL matches every operation;
//   - else, when no binding at all names the resource, the answer is
//     allow.everyone.if.no.acl.found (AllowIfNoACL); otherwise deny.
//
// A binding matches an action when its resource pattern matches (the
// literal name, the literal wildcard * or a PREFIXED prefix of the name),
// its principal is the action's or User:*, and its host is the client's
// address or *.
type ACLAuthorizer struct {
	// Image returns the current metadata image (its ACLs).
	Image func() *metadata.Image
	// SuperUsers are principals (Type:Name) allowed everything.
	SuperUsers map[Principal]bool
	// AllowIfNoACL: allow.everyone.if.no.acl.found.
	AllowIfNoACL bool
}

// ParseSuperUsers parses super.users: principals separated by semicolons.
func ParseSuperUsers(s string) (map[Principal]bool, error) {
	out := map[Principal]bool{}
	for _, f := range strings.Split(s, ";") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		p, err := ParsePrincipal(f)
		if err != nil {
			return nil, err
		}
		out[p] = true
	}
	return out, nil
}

// principalMatches reports whether a binding's principal (Type:Name) is p
// or the wildcard User:*, without building p's string.
func principalMatches(acl string, p Principal) bool {
	if acl == "User:*" {
		return true
	}
	return len(acl) == len(p.Type)+1+len(p.Name) && acl[len(p.Type)] == ':' &&
		acl[:len(p.Type)] == p.Type && acl[len(p.Type)+1:] == p.Name
}

// opAllows reports whether an ALLOW binding of operation bound allows op.
func opAllows(bound, op kmsg.ACLOperation) bool {
	if bound == op || bound == kmsg.ACLOperationAll {
		return true
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch bound {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return bound == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// Authorize implements Authorizer.
func (z *ACLAuthorizer) Authorize(a Action) bool {
	if z.SuperUsers[a.Principal] {
		return true
	}
	found, allow, deny := false, false, false
	z.Image().ACLs.ForResource(a.Type, a.Name, func(list []metadata.ACL) bool {
		found = true
		for i := range list {
			b := &list[i]
			if !principalMatches(b.Principal, a.Principal) || (b.Host != "*" && b.Host != a.Host) {
				continue
			}
			if b.Permission == kmsg.ACLPermissionTypeDeny {
				if b.Operation == a.Op || b.Operation == kmsg.ACLOperationAll {
					deny = true
					return false
				}
			} else if !allow && opAllows(b.Operation, a.Op) {
				allow = true
			}
		}
		return true
	})
	switch {
	case deny:
		return false
	case allow:
		return true
	}
	return !found && z.AllowIfNoACL
}

// AuthorizeByResourceType implements TypeAuthorizer with Kafka's
// Authorizer.authorizeByResourceType: whether the principal may do op on
// some resource of type typ. A super user, or an action on an unnamed
// resource that Authorize allows, may; else an ALLOW binding (exact op or
// ALL) must exist that no DENY binding dominates: a literal * DENY
// dominates everything, a literal DENY its own name, a PREFIXED DENY the
// names and prefixes it is a prefix of.
func (z *ACLAuthorizer) AuthorizeByResourceType(p Principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType) bool {
	if z.Authorize(Action{Principal: p, Host: host, Op: op, Type: typ, Name: "hardcode"}) {
		return true
	}
	var denyLiteral, denyPrefix, allowLiteral, allowPrefix []string
	for _, b := range z.Image().ACLs.All() {
		if b.ResourceType != typ || (b.Host != "*" && b.Host != host) || !principalMatches(b.Principal, p) ||
			(b.Operation != op && b.Operation != kmsg.ACLOperationAll) {
			continue
		}
		literal := b.PatternType == kmsg.ACLResourcePatternTypeLiteral
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && literal && b.ResourceName == metadata.WildcardResource:
			return false
		case b.Permission == kmsg.ACLPermissionTypeDeny && literal:
			denyLiteral = append(denyLiteral, b.ResourceName)
		case b.Permission == kmsg.ACLPermissionTypeDeny:
			denyPrefix = append(denyPrefix, b.ResourceName)
		case literal && b.ResourceName == metadata.WildcardResource:
			return true
		case literal:
			allowLiteral = append(allowLiteral, b.ResourceName)
		default:
			allowPrefix = append(allowPrefix, b.ResourceName)
		}
	}
	dominated := func(name string) bool {
		for _, d := range denyPrefix {
			if strings.HasPrefix(name, d) {
				return true
			}
		}
		return false
	}
	for _, n := range allowLiteral {
		if !contains(denyLiteral, n) && !dominated(n) {
			return true
		}
	}
	for _, n := range allowPrefix {
		if !dominated(n) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TypeAuthorizer is an Authorizer that also answers Kafka's
// authorizeByResourceType (InitProducerId without a transactional id:
// IDEMPOTENT_WRITE on the cluster or WRITE on some topic). An Authorizer
// that is not one allows such checks whenever it allows everything.
type TypeAuthorizer interface {
	Authorizer
	AuthorizeByResourceType(p Principal, host string, op kmsg.ACLOperation, typ kmsg.ACLResourceType) bool
}

// Enabled reports whether z checks anything: false for AllowAll (no
// authorizer configured; the ACL APIs answer SECURITY_DISABLED).
func Enabled(z Authorizer) bool {
	_, none := z.(AllowAll)
	return z != nil && !none
}
