package metadata

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func topicACL(name string, pattern kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) ACL {
	return ACL{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: name, PatternType: pattern,
		Principal: principal, Host: "*", Operation: op, Permission: perm}
}

// TestACLsSurviveRestart: bindings written through the controller are in
// the image after a restart, from the snapshot Close takes and from the
// WAL alone.
func TestACLsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	c := open(t, testConfig(dir))
	var acls []ACL
	for i := range 5 {
		acls = append(acls, topicACL(fmt.Sprintf("t%d", i), kmsg.ACLResourcePatternTypePrefixed, "User:alice",
			kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow))
	}
	if err := c.Propose(ctx(t), Record{CreateACLs: &CreateACLs{ACLs: acls}}); err != nil {
		t.Fatal(err)
	}
	crash := copyDir(t, dir) // WAL only, no snapshot of the ACLs
	if err := c.Propose(ctx(t), Record{DeleteACLs: &DeleteACLs{ACLs: acls[:1]}}); err != nil {
		t.Fatal(err)
	}
	want := c.Image().ACLs.All()
	if c.Image().ACLs.Len() != 4 || c.Image().ACLs.Has(acls[0]) {
		t.Fatalf("after delete: %v", c.Image().ACLs.All())
	}
	mustClose(t, c)
	c2 := open(t, testConfig(dir))
	if got := c2.Image().ACLs.All(); !slices.Equal(got, want) {
		t.Fatalf("acls after restart %v, want %v", got, want)
	}
	mustClose(t, c2)
	c3 := open(t, testConfig(crash))
	if n := c3.Image().ACLs.Len(); n != 5 {
		t.Fatalf("replayed WAL has %d acls, want 5", n)
	}
	mustClose(t, c3)
}

// TestACLFilter: Kafka's AclBindingFilter semantics.
func TestACLFilter(t *testing.T) {
	s, err := changeACLs(nil, []ACL{
		topicACL("orders", kmsg.ACLResourcePatternTypeLiteral, "User:a", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		topicACL("ord", kmsg.ACLResourcePatternTypePrefixed, "User:b", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow),
		topicACL("*", kmsg.ACLResourcePatternTypeLiteral, "User:c", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeDeny),
		topicACL("other", kmsg.ACLResourcePatternTypeLiteral, "User:a", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	any := ACLFilter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	for _, tc := range []struct {
		name string
		f    func(f *ACLFilter)
		want int
	}{
		{"any", func(*ACLFilter) {}, 4},
		{"match orders", func(f *ACLFilter) { f.ResourceName = str("orders"); f.PatternType = kmsg.ACLResourcePatternTypeMatch }, 3},
		{"match null name", func(f *ACLFilter) { f.PatternType = kmsg.ACLResourcePatternTypeMatch }, 4},
		{"any orders", func(f *ACLFilter) { f.ResourceName = str("orders") }, 1},
		{"literal *", func(f *ACLFilter) { f.ResourceName = str("*"); f.PatternType = kmsg.ACLResourcePatternTypeLiteral }, 1},
		{"prefixed", func(f *ACLFilter) { f.PatternType = kmsg.ACLResourcePatternTypePrefixed }, 1},
		{"principal", func(f *ACLFilter) { f.Principal = str("User:a") }, 2},
		{"deny", func(f *ACLFilter) { f.Permission = kmsg.ACLPermissionTypeDeny }, 1},
		{"op", func(f *ACLFilter) { f.Operation = kmsg.ACLOperationWrite }, 1},
		{"group", func(f *ACLFilter) { f.ResourceType = kmsg.ACLResourceTypeGroup }, 0},
	} {
		f := any
		tc.f(&f)
		if err := f.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := s.Filter(f); len(got) != tc.want {
			t.Errorf("%s: %d bindings %v, want %d", tc.name, len(got), got, tc.want)
		}
	}
	if (ACLFilter{}).Validate() == nil {
		t.Fatal("a filter of UNKNOWNs validated")
	}
}
