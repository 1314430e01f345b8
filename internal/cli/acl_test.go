package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/auth"
	tc "github.com/berthmq/berth/internal/testcluster"
)

func aclJSON(t *testing.T, out string) []aclEntry {
	t.Helper()
	var es []aclEntry
	if err := json.Unmarshal([]byte(out), &es); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return es
}

// berth acl create, list and delete with kafka-acls.sh's flags, the
// --producer/--consumer conveniences, table and JSON output, against a
// node with the authorizer on (the CLI connects as a super user).
func TestACLCommands(t *testing.T) {
	n := tc.Start(t, tc.With("authorizer.class.name", "berth"), tc.With("super.users", "User:admin"))
	n.TestPrincipals(func(string) (auth.Principal, bool) { return auth.User("admin"), true })
	addr := n.Addr()
	cli := func(args ...string) string {
		t.Helper()
		out, stderr, err := runCLI(t, "", append(args, "-b", addr)...)
		if err != nil {
			t.Fatalf("berth %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		return out
	}
	if es := aclJSON(t, cli("acl", "create", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", "orders", "--json")); len(es) != 2 {
		t.Fatalf("create: %+v", es)
	}
	es := aclJSON(t, cli("acl", "create", "--allow-principal", "User:app", "--producer", "--idempotent", "--topic", "orders",
		"--transactional-id", "app-", "--resource-pattern-type", "prefixed", "--json"))
	if len(es) != 6 {
		t.Fatalf("--producer --idempotent made %d ACLs, want 6 (topic WRITE DESCRIBE CREATE, id WRITE DESCRIBE, cluster IDEMPOTENT_WRITE): %+v", len(es), es)
	}
	if es := aclJSON(t, cli("acl", "create", "--allow-principal", "User:billing", "--consumer", "--topic", "orders", "--group", "billing", "--json")); len(es) != 3 {
		t.Fatalf("--consumer: %+v", es)
	}
	if es := aclJSON(t, cli("acl", "list", "--json")); len(es) != 11 {
		t.Fatalf("list: %d ACLs, want 11: %+v", len(es), es)
	}
	if es := aclJSON(t, cli("acl", "list", "--principal", "User:alice", "--json")); len(es) != 2 {
		t.Fatalf("list --principal: %+v", es)
	}
	// MATCH: the ACLs that apply to topic orders: literal ones and the
	// prefixed producer ACLs on orders*.
	if es := aclJSON(t, cli("acl", "list", "--topic", "orders", "--resource-pattern-type", "match", "--json")); len(es) != 7 {
		t.Fatalf("list --topic orders (match): %d, want 7: %+v", len(es), es)
	}
	if out := cli("acl", "list", "--group", "billing"); !strings.Contains(out, "User:billing") || !strings.Contains(out, "PRINCIPAL") {
		t.Fatalf("list table:\n%s", out)
	}
	if es := aclJSON(t, cli("acl", "delete", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders", "--json")); len(es) != 1 || es[0].Operation != "READ" {
		t.Fatalf("delete alice's READ: %+v", es)
	}
	if _, _, err := runCLI(t, "", "acl", "delete", "--topic", "orders", "-b", addr); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("delete of every ACL of a topic without --yes: %v", err)
	}
	if es := aclJSON(t, cli("acl", "delete", "--allow-principal", "User:app", "--producer", "--idempotent", "--topic", "orders",
		"--transactional-id", "app-", "--resource-pattern-type", "prefixed", "--json")); len(es) != 6 {
		t.Fatalf("delete --producer: %+v", es)
	}
	if es := aclJSON(t, cli("acl", "delete", "--topic", "orders", "--yes", "--json")); len(es) != 3 {
		t.Fatalf("delete --topic orders --yes: %+v", es)
	}
	if es := aclJSON(t, cli("acl", "list", "--json")); len(es) != 1 || es[0].ResourceType != "GROUP" {
		t.Fatalf("left: %+v", es)
	}
	// Schema registry subjects: Berth's SUBJECT resource.
	if es := aclJSON(t, cli("acl", "create", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
		"--subject", "orders-", "--resource-pattern-type", "prefixed", "--json")); len(es) != 2 || es[0].ResourceType != "SUBJECT" {
		t.Fatalf("subject ACLs: %+v", es)
	}
	if es := aclJSON(t, cli("acl", "list", "--subject", "orders-value", "--resource-pattern-type", "match", "--json")); len(es) != 2 || es[0].ResourceName != "orders-" {
		t.Fatalf("subject ACLs matching orders-value: %+v", es)
	}
	if es := aclJSON(t, cli("acl", "delete", "--subject", "orders-", "--resource-pattern-type", "prefixed", "--yes", "--json")); len(es) != 2 {
		t.Fatalf("deleted subject ACLs: %+v", es)
	}
	if _, _, err := runCLI(t, "", "acl", "create", "--allow-principal", "User:alice", "--operation", "Create", "--subject", "s", "-b", addr); err == nil {
		t.Fatal("CREATE on a subject was accepted")
	}
	if _, _, err := runCLI(t, "", "acl", "create", "--topic", "orders", "-b", addr); err == nil || !strings.Contains(err.Error(), "--allow-principal") {
		t.Fatalf("create without a principal: %v", err)
	}
	// Without an authorizer the error says what to set.
	plain := tc.Start(t)
	if _, _, err := runCLI(t, "", "acl", "list", "-b", plain.Addr()); err == nil || !strings.Contains(err.Error(), "authorizer.class.name") {
		t.Fatalf("acl list without an authorizer: %v", err)
	}
}
