package auth

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
)

const (
	topicT   = kmsg.ACLResourceTypeTopic
	groupT   = kmsg.ACLResourceTypeGroup
	clusterT = kmsg.ACLResourceTypeCluster
	txnT     = kmsg.ACLResourceTypeTransactionalId
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	allowP   = kmsg.ACLPermissionTypeAllow
	denyP    = kmsg.ACLPermissionTypeDeny
)

func bind(typ kmsg.ACLResourceType, name string, pat kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) metadata.ACL {
	return metadata.ACL{ResourceType: typ, ResourceName: name, PatternType: pat, Principal: principal,
		Host: host, Operation: op, Permission: perm}
}

// authorizerWith is an ACLAuthorizer over an image holding acls.
func authorizerWith(t testing.TB, acls ...metadata.ACL) *ACLAuthorizer {
	t.Helper()
	im, _, err := metadata.Apply(&metadata.Image{}, 1, []metadata.Record{{CreateACLs: &metadata.CreateACLs{ACLs: acls}}})
	if err != nil {
		t.Fatal(err)
	}
	return &ACLAuthorizer{Image: func() *metadata.Image { return im }, SuperUsers: map[Principal]bool{}}
}

type check struct {
	principal string
	host      string
	op        kmsg.ACLOperation
	typ       kmsg.ACLResourceType
	name      string
	want      bool
}

func runChecks(t *testing.T, z *ACLAuthorizer, checks []check) {
	t.Helper()
	for _, c := range checks {
		p, err := ParsePrincipal(c.principal)
		if err != nil {
			t.Fatal(err)
		}
		host := c.host
		if host == "" {
			host = "127.0.0.1"
		}
		if got := z.Authorize(Action{Principal: p, Host: host, Op: c.op, Type: c.typ, Name: c.name}); got != c.want {
			t.Errorf("%s from %s %s on %s %q: %v, want %v", c.principal, host, c.op, c.typ, c.name, got, c.want)
		}
	}
}

// The cases below follow Kafka's StandardAuthorizerTest and
// AclAuthorizerTest: each names the rule it checks.
func TestAuthorizeSemantics(t *testing.T) {
	const (
		read     = kmsg.ACLOperationRead
		write    = kmsg.ACLOperationWrite
		describe = kmsg.ACLOperationDescribe
		alter    = kmsg.ACLOperationAlter
		del      = kmsg.ACLOperationDelete
		create   = kmsg.ACLOperationCreate
		dconf    = kmsg.ACLOperationDescribeConfigs
		aconf    = kmsg.ACLOperationAlterConfigs
		all      = kmsg.ACLOperationAll
	)
	t.Run("allow, deny wins, hosts", func(t *testing.T) {
		z := authorizerWith(t,
			bind(topicT, "foo", literal, "User:alice", "*", read, allowP),
			bind(topicT, "foo", literal, "User:alice", "192.168.0.1", read, denyP),
			bind(topicT, "foo", literal, "User:bob", "10.0.0.2", write, allowP),
		)
		runChecks(t, z, []check{
			{"User:alice", "", read, topicT, "foo", true},
			{"User:alice", "192.168.0.1", read, topicT, "foo", false}, // DENY from that host wins
			{"User:alice", "", write, topicT, "foo", false},
			{"User:bob", "10.0.0.2", write, topicT, "foo", true},
			{"User:bob", "10.0.0.3", write, topicT, "foo", false}, // host not allowed
			{"User:carol", "", read, topicT, "foo", false},
			{"User:alice", "", read, topicT, "bar", false},  // no ACL, allow.everyone off
			{"Group:alice", "", read, topicT, "foo", false}, // principal type differs
		})
	})
	t.Run("implied describe, not for deny", func(t *testing.T) {
		z := authorizerWith(t,
			bind(topicT, "r", literal, "User:a", "*", read, allowP),
			bind(topicT, "w", literal, "User:a", "*", write, allowP),
			bind(topicT, "d", literal, "User:a", "*", del, allowP),
			bind(topicT, "al", literal, "User:a", "*", alter, allowP),
			bind(topicT, "cr", literal, "User:a", "*", create, allowP),
			bind(topicT, "ac", literal, "User:a", "*", aconf, allowP),
			bind(topicT, "dr", literal, "User:a", "*", read, denyP),
			bind(topicT, "dr", literal, "User:a", "*", describe, allowP),
		)
		runChecks(t, z, []check{
			{"User:a", "", describe, topicT, "r", true},
			{"User:a", "", describe, topicT, "w", true},
			{"User:a", "", describe, topicT, "d", true},
			{"User:a", "", describe, topicT, "al", true},
			{"User:a", "", describe, topicT, "cr", false}, // CREATE implies nothing
			{"User:a", "", dconf, topicT, "ac", true},
			{"User:a", "", describe, topicT, "ac", false},
			{"User:a", "", aconf, topicT, "r", false},
			{"User:a", "", describe, topicT, "dr", true}, // DENY READ does not deny DESCRIBE
			{"User:a", "", read, topicT, "dr", false},
		})
	})
	t.Run("ALL", func(t *testing.T) {
		z := authorizerWith(t,
			bind(topicT, "x", literal, "User:a", "*", all, allowP),
			bind(topicT, "x", literal, "User:b", "*", all, denyP),
			bind(topicT, "x", literal, "User:*", "*", read, allowP),
		)
		runChecks(t, z, []check{
			{"User:a", "", read, topicT, "x", true},
			{"User:a", "", aconf, topicT, "x", true},
			{"User:b", "", read, topicT, "x", false}, // DENY ALL beats User:* READ
			{"User:c", "", read, topicT, "x", true},  // wildcard principal
			{"User:c", "", write, topicT, "x", false},
		})
	})
	t.Run("wildcard resource and prefixes", func(t *testing.T) {
		z := authorizerWith(t,
			bind(topicT, "*", literal, "User:a", "*", read, allowP),
			bind(topicT, "secret", prefixed, "User:a", "*", read, denyP),
			bind(topicT, "pay", prefixed, "User:b", "*", write, allowP),
			bind(topicT, "payroll", prefixed, "User:b", "*", write, denyP),
			bind(groupT, "app-", prefixed, "User:b", "*", read, allowP),
		)
		runChecks(t, z, []check{
			{"User:a", "", read, topicT, "anything", true},
			{"User:a", "", read, topicT, "secret-1", false},
			{"User:a", "", read, topicT, "secre", true},
			{"User:b", "", write, topicT, "payments", true},
			{"User:b", "", write, topicT, "pay", true},
			{"User:b", "", write, topicT, "payroll.q1", false},
			{"User:b", "", write, topicT, "pa", false},
			{"User:b", "", read, groupT, "app-1", true},
			{"User:b", "", read, topicT, "app-1", false}, // other resource type
			{"User:b", "", read, groupT, "ap", false},
		})
	})
	t.Run("super users bypass deny", func(t *testing.T) {
		z := authorizerWith(t, bind(topicT, "*", literal, "User:*", "*", all, denyP))
		z.SuperUsers, _ = ParseSuperUsers("User:admin; User:ops")
		runChecks(t, z, []check{
			{"User:admin", "", write, topicT, "t", true},
			{"User:ops", "", kmsg.ACLOperationClusterAction, clusterT, "kafka-cluster", true},
			{"User:x", "", write, topicT, "t", false},
		})
	})
	t.Run("allow.everyone.if.no.acl.found", func(t *testing.T) {
		z := authorizerWith(t, bind(topicT, "guarded", literal, "User:a", "*", read, allowP),
			bind(topicT, "g2", prefixed, "User:a", "10.1.1.1", read, allowP))
		z.AllowIfNoACL = true
		runChecks(t, z, []check{
			{"User:x", "", read, topicT, "open", true},     // no ACL names it
			{"User:x", "", read, topicT, "guarded", false}, // an ACL names it, none allows x
			{"User:a", "", read, topicT, "guarded", true},
			{"User:x", "", read, topicT, "g2x", false}, // a prefixed ACL names it too
		})
	})
}

func TestParseSuperUsers(t *testing.T) {
	m, err := ParseSuperUsers("User:a;User:b ;;")
	if err != nil || len(m) != 2 || !m[User("a")] || !m[User("b")] {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := ParseSuperUsers("alice"); err == nil {
		t.Fatal("a principal without a type was accepted")
	}
}

func TestAuthorizeByResourceType(t *testing.T) {
	const write = kmsg.ACLOperationWrite
	for _, tc := range []struct {
		name string
		acls []metadata.ACL
		want bool
	}{
		{"none", nil, false},
		{"literal allow", []metadata.ACL{bind(topicT, "t", literal, "User:a", "*", write, allowP)}, true},
		{"allow ALL", []metadata.ACL{bind(topicT, "t", literal, "User:a", "*", kmsg.ACLOperationAll, allowP)}, true},
		{"read only", []metadata.ACL{bind(topicT, "t", literal, "User:a", "*", kmsg.ACLOperationRead, allowP)}, false},
		{"literal denied", []metadata.ACL{bind(topicT, "t", literal, "User:a", "*", write, allowP),
			bind(topicT, "t", literal, "User:a", "*", write, denyP)}, false},
		{"prefix dominates", []metadata.ACL{bind(topicT, "tab", prefixed, "User:a", "*", write, allowP),
			bind(topicT, "ta", prefixed, "User:a", "*", write, denyP)}, false},
		{"prefix does not dominate", []metadata.ACL{bind(topicT, "ta", prefixed, "User:a", "*", write, allowP),
			bind(topicT, "tab", prefixed, "User:a", "*", write, denyP)}, true},
		{"wildcard deny", []metadata.ACL{bind(topicT, "t", literal, "User:a", "*", write, allowP),
			bind(topicT, "*", literal, "User:*", "*", write, denyP)}, false},
		{"wildcard allow", []metadata.ACL{bind(topicT, "*", literal, "User:*", "*", write, allowP)}, true},
		{"other host", []metadata.ACL{bind(topicT, "t", literal, "User:a", "10.9.9.9", write, allowP)}, false},
		{"other type", []metadata.ACL{bind(txnT, "t", literal, "User:a", "*", write, allowP)}, false},
	} {
		z := authorizerWith(t, tc.acls...)
		if got := z.AuthorizeByResourceType(User("a"), "127.0.0.1", write, topicT); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// BenchmarkAuthorize: one check against 10,000 bindings, half literal and
// half prefixed, over 100 principals (docs/benchmarks.md).
func BenchmarkAuthorize(b *testing.B) {
	var acls []metadata.ACL
	for i := range 5000 {
		acls = append(acls,
			bind(topicT, fmt.Sprintf("tenant-%d.orders", i), literal, fmt.Sprintf("User:u%d", i%100), "*", kmsg.ACLOperationWrite, allowP),
			bind(topicT, fmt.Sprintf("tenant-%d.", i), prefixed, fmt.Sprintf("User:u%d", i%100), "*", kmsg.ACLOperationRead, allowP))
	}
	z := authorizerWith(b, acls...)
	actions := []Action{
		{Principal: User("u42"), Host: "10.0.0.1", Op: kmsg.ACLOperationRead, Type: topicT, Name: "tenant-4242.events.v1"},
		{Principal: User("u42"), Host: "10.0.0.1", Op: kmsg.ACLOperationWrite, Type: topicT, Name: "tenant-4242.orders"},
		{Principal: User("u43"), Host: "10.0.0.1", Op: kmsg.ACLOperationWrite, Type: topicT, Name: "tenant-4242.orders"},
		{Principal: User("u42"), Host: "10.0.0.1", Op: kmsg.ACLOperationDescribe, Type: topicT, Name: "unrelated-topic-name"},
	}
	want := []bool{true, true, false, false}
	for i, a := range actions {
		if z.Authorize(a) != want[i] {
			b.Fatalf("action %d: want %v", i, want[i])
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		z.Authorize(actions[i%len(actions)])
	}
}
