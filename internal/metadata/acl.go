package metadata

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACL is one ACL binding, Kafka's AclBinding: a resource pattern (type,
// name, LITERAL or PREFIXED) and an entry (principal, host, operation,
// ALLOW or DENY). ACL values are comparable; two equal values are the
// same binding (creating it twice keeps one).
type ACL struct {
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType // LITERAL or PREFIXED
	Principal    string                      // Type:Name; User:* is every principal
	Host         string                      // an IP address, or * for every host
	Operation    kmsg.ACLOperation           // never ANY
	Permission   kmsg.ACLPermissionType      // ALLOW or DENY
}

// ErrInvalidACL: an ACL binding or filter Kafka would refuse
// (INVALID_REQUEST).
var ErrInvalidACL = errors.New("metadata: invalid acl")

// ClusterResourceName is the one name of the CLUSTER resource.
const ClusterResourceName = "kafka-cluster"

// WildcardResource is the literal resource name matching every name.
const WildcardResource = "*"

// String is the binding in kafka-acls.sh's words.
// ACLResourceTypeSubject is Berth's resource type of schema registry
// subjects (Kafka has none): READ (read its versions, look schemas up,
// check compatibility), WRITE (register), DELETE, DESCRIBE_CONFIGS and
// ALTER_CONFIGS (its compatibility level and mode). Its number is outside
// Kafka's range so that a later Kafka type never collides with it.
const ACLResourceTypeSubject kmsg.ACLResourceType = 100

// ResourceTypeName is a resource type's name: Kafka's, or SUBJECT.
func ResourceTypeName(t kmsg.ACLResourceType) string {
	if t == ACLResourceTypeSubject {
		return "SUBJECT"
	}
	return t.String()
}

// ParseResourceType parses a resource type's name (Kafka's, or SUBJECT),
// in any case.
func ParseResourceType(s string) (kmsg.ACLResourceType, error) {
	if strings.EqualFold(s, "SUBJECT") {
		return ACLResourceTypeSubject, nil
	}
	return kmsg.ParseACLResourceType(s)
}

// typeSlot is a resource type's index in ACLs.byType (-1: none).
func typeSlot(t kmsg.ACLResourceType) int {
	switch {
	case t == ACLResourceTypeSubject:
		return int(kmsg.ACLResourceTypeUser) + 1
	case t < 0 || t > kmsg.ACLResourceTypeUser:
		return -1
	}
	return int(t)
}

func (a ACL) String() string {
	return fmt.Sprintf("(%s %s %s) %s %s from %s on %s", ResourceTypeName(a.ResourceType), a.PatternType, a.ResourceName,
		a.Principal, a.Permission, a.Host, a.Operation)
}

// aclJSON is ACL in the metadata log: Kafka's enum names as strings.
type aclJSON struct {
	ResourceType string `json:"resourceType"`
	ResourceName string `json:"resourceName"`
	PatternType  string `json:"patternType"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// MarshalJSON encodes the enums by name (TOPIC, LITERAL, READ, ALLOW).
func (a ACL) MarshalJSON() ([]byte, error) {
	return json.Marshal(aclJSON{ResourceTypeName(a.ResourceType), a.ResourceName, a.PatternType.String(),
		a.Principal, a.Host, a.Operation.String(), a.Permission.String()})
}

// UnmarshalJSON decodes MarshalJSON's output; an unknown name is an error.
func (a *ACL) UnmarshalJSON(b []byte) error {
	var j aclJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var err [4]error
	a.ResourceType, err[0] = ParseResourceType(j.ResourceType)
	a.PatternType, err[1] = kmsg.ParseACLResourcePatternType(j.PatternType)
	a.Operation, err[2] = kmsg.ParseACLOperation(j.Operation)
	a.Permission, err[3] = kmsg.ParseACLPermissionType(j.Permission)
	a.ResourceName, a.Principal, a.Host = j.ResourceName, j.Principal, j.Host
	for _, e := range err {
		if e != nil {
			return fmt.Errorf("%w: acl: %v", ErrInvalidRecord, e)
		}
	}
	return nil
}

// ACLOperations lists, per resource type, the operations an ACL on it may
// name besides ALL (Kafka's AclEntry.supportedOperations), in Kafka's
// order; they are also the operations authorized_operations reports.
var ACLOperations = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	kmsg.ACLResourceTypeTopic: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
		kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	kmsg.ACLResourceTypeGroup: {kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	kmsg.ACLResourceTypeCluster: {kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite,
		kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe},
	kmsg.ACLResourceTypeTransactionalId: {kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite},
	kmsg.ACLResourceTypeDelegationToken: {kmsg.ACLOperationDescribe},
	kmsg.ACLResourceTypeUser:            {kmsg.ACLOperationCreateTokens, kmsg.ACLOperationDescribeTokens},
	ACLResourceTypeSubject: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete,
		kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
}

// Validate checks a binding as Kafka checks a new ACL (CreateAcls): a
// concrete resource type, LITERAL or PREFIXED, a non-empty name (the
// CLUSTER resource's is kafka-cluster), a Type:Name principal, a host, an
// operation the resource type supports (or ALL), ALLOW or DENY. The
// error is ErrInvalidACL.
func (a ACL) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidACL, fmt.Sprintf(format, args...))
	}
	ops, ok := ACLOperations[a.ResourceType]
	switch {
	case !ok:
		return bad("invalid resource type %s", ResourceTypeName(a.ResourceType))
	case a.PatternType != kmsg.ACLResourcePatternTypeLiteral && a.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return bad("invalid pattern type %s", a.PatternType)
	case a.ResourceName == "":
		return bad("resource name should not be empty")
	case a.ResourceType == kmsg.ACLResourceTypeCluster && (a.ResourceName != ClusterResourceName || a.PatternType != kmsg.ACLResourcePatternTypeLiteral):
		return bad("the only valid name for the CLUSTER resource is LITERAL %s", ClusterResourceName)
	case !strings.Contains(a.Principal, ":") || strings.HasPrefix(a.Principal, ":"):
		return bad("could not parse principal %q (want Type:Name, e.g. User:alice)", a.Principal)
	case a.Host == "":
		return bad("host should not be empty (* is every host)")
	case a.Permission != kmsg.ACLPermissionTypeAllow && a.Permission != kmsg.ACLPermissionTypeDeny:
		return bad("invalid permission type %s", a.Permission)
	case a.Operation == kmsg.ACLOperationAll:
		return nil
	case !slices.Contains(ops, a.Operation):
		return bad("operation %s is not supported by resource type %s", a.Operation, ResourceTypeName(a.ResourceType))
	}
	return nil
}

// CreateACLs adds bindings; one already present is left as it is. Every
// binding must be valid (ACL.Validate) or the record fails.
type CreateACLs struct {
	ACLs []ACL `json:"acls"`
}

// DeleteACLs removes exact bindings; one not present is skipped. The
// proposer resolves a DeleteAcls filter into the bindings it matches, so
// the answer can name them.
type DeleteACLs struct {
	ACLs []ACL `json:"acls"`
}

// ACLs is the image's ACL bindings with an index for the authorizer: per
// resource type, the bindings by literal name and by prefix. Immutable
// like the image; the nil *ACLs has no bindings.
type ACLs struct {
	all    []ACL                                       // sorted (compareACL)
	byType [kmsg.ACLResourceTypeUser + 2]*aclTypeIndex // by typeSlot
}

type aclTypeIndex struct {
	literal  map[string][]ACL // by name, including WildcardResource
	prefixed map[string][]ACL // by prefix
	lens     []int            // the distinct prefix lengths, ascending
}

func compareACL(a, b ACL) int {
	return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType), cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host), cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
}

// newACLs indexes bindings (sorted, without duplicates).
func newACLs(all []ACL) *ACLs {
	s := &ACLs{all: all}
	for _, a := range all {
		slot := typeSlot(a.ResourceType)
		if slot < 0 {
			continue // Validate refuses it
		}
		ix := s.byType[slot]
		if ix == nil {
			ix = &aclTypeIndex{literal: map[string][]ACL{}, prefixed: map[string][]ACL{}}
			s.byType[slot] = ix
		}
		if a.PatternType == kmsg.ACLResourcePatternTypePrefixed {
			if _, seen := ix.prefixed[a.ResourceName]; !seen && !slices.Contains(ix.lens, len(a.ResourceName)) {
				ix.lens = append(ix.lens, len(a.ResourceName))
			}
			ix.prefixed[a.ResourceName] = append(ix.prefixed[a.ResourceName], a)
		} else {
			ix.literal[a.ResourceName] = append(ix.literal[a.ResourceName], a)
		}
	}
	for _, ix := range s.byType {
		if ix != nil {
			slices.Sort(ix.lens)
		}
	}
	return s
}

// Len is the number of bindings.
func (s *ACLs) Len() int {
	if s == nil {
		return 0
	}
	return len(s.all)
}

// All returns every binding, sorted by resource type, name, pattern type,
// principal, host, operation and permission. The slice must not be
// modified.
func (s *ACLs) All() []ACL {
	if s == nil {
		return nil
	}
	return s.all
}

// Has reports whether the exact binding exists.
func (s *ACLs) Has(a ACL) bool {
	if s == nil {
		return false
	}
	_, ok := slices.BinarySearchFunc(s.all, a, compareACL)
	return ok
}

// ForResource calls visit with each list of bindings whose pattern
// matches the resource typ/name: the literal name, the wildcard name *
// and every prefix of name; visit returns false to stop. The lists must
// not be modified.
func (s *ACLs) ForResource(typ kmsg.ACLResourceType, name string, visit func([]ACL) bool) {
	slot := typeSlot(typ)
	if s == nil || slot < 0 {
		return
	}
	ix := s.byType[slot]
	if ix == nil {
		return
	}
	if l, ok := ix.literal[name]; ok && !visit(l) {
		return
	}
	if name != WildcardResource {
		if l, ok := ix.literal[WildcardResource]; ok && !visit(l) {
			return
		}
	}
	for _, n := range ix.lens {
		if n > len(name) {
			return
		}
		if l, ok := ix.prefixed[name[:n]]; ok && !visit(l) {
			return
		}
	}
}

// ACLFilter is Kafka's AclBindingFilter (DescribeAcls, DeleteAcls): ANY
// matches every resource type, pattern type, operation or permission; a
// nil name, principal or host matches every one; pattern type MATCH
// matches the bindings that would apply to the named resource (the
// literal name, the wildcard * and the prefixes of the name).
type ACLFilter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Validate refuses what Kafka refuses in a filter: UNKNOWN values (an
// enum value Kafka does not name is UNKNOWN too).
func (f ACLFilter) Validate() error {
	switch {
	case (f.ResourceType <= kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeUser) && f.ResourceType != ACLResourceTypeSubject:
		return fmt.Errorf("%w: filter: unknown resource type %d", ErrInvalidACL, f.ResourceType)
	case f.PatternType <= kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: filter: unknown pattern type %d", ErrInvalidACL, f.PatternType)
	case f.Operation <= kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("%w: filter: unknown operation %d", ErrInvalidACL, f.Operation)
	case f.Permission <= kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("%w: filter: unknown permission type %d", ErrInvalidACL, f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects the binding.
func (f ACLFilter) Matches(a ACL) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != a.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch:
	default:
		if f.PatternType != a.PatternType {
			return false
		}
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		if f.PatternType != kmsg.ACLResourcePatternTypeMatch {
			if name != a.ResourceName {
				return false
			}
		} else if a.PatternType == kmsg.ACLResourcePatternTypePrefixed {
			if !strings.HasPrefix(name, a.ResourceName) {
				return false
			}
		} else if name != a.ResourceName && a.ResourceName != WildcardResource {
			return false
		}
	}
	return (f.Principal == nil || *f.Principal == a.Principal) &&
		(f.Host == nil || *f.Host == a.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == a.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == a.Permission)
}

// Filter returns the bindings f matches, in All's order.
func (s *ACLs) Filter(f ACLFilter) []ACL {
	var out []ACL
	for _, a := range s.All() {
		if f.Matches(a) {
			out = append(out, a)
		}
	}
	return out
}

// changeACLs returns s with add added and del removed (copy-on-write).
func changeACLs(s *ACLs, add, del []ACL) (*ACLs, error) {
	for _, a := range add {
		if err := a.Validate(); err != nil {
			return nil, err
		}
	}
	all := append(slices.Clone(s.All()), add...)
	slices.SortFunc(all, compareACL)
	all = slices.CompactFunc(all, func(a, b ACL) bool { return a == b })
	for _, a := range del {
		if i, ok := slices.BinarySearchFunc(all, a, compareACL); ok {
			all = slices.Delete(all, i, i+1)
		}
	}
	return newACLs(all), nil
}

// applyACLs is the apply of CreateACLs and DeleteACLs.
func (b *builder) applyACLs(add, del []ACL) error {
	next, err := changeACLs(b.im.ACLs, add, del)
	if err != nil {
		return err
	}
	b.im.ACLs = next
	return nil
}
