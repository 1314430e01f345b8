package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/testcluster"
)

func TestQuotaCLI(t *testing.T) {
	b := testcluster.Start(t).Addr()
	run := func(args ...string) string {
		t.Helper()
		out, stderr, err := runCLI(t, "", append([]string{"quota"}, append(args, "-b", b)...)...)
		if err != nil {
			t.Fatalf("berth quota %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		return out
	}
	fail := func(want string, args ...string) {
		t.Helper()
		_, _, err := runCLI(t, "", append([]string{"quota"}, append(args, "-b", b)...)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("berth quota %s: %v, want an error with %q", strings.Join(args, " "), err, want)
		}
	}
	run("set", "--user", "alice", "--add-config", "producer_byte_rate=1048576,producer_record_rate=5000,violation_action=reject")
	run("set", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default", "--add-config", "consumer_byte_rate=2048")
	run("set", "--user-default", "--add-config", "max_record_bytes=65536")
	run("set", "--ip", "10.0.0.7", "--add-config", "connection_creation_rate=20")

	out := run("describe", "--user", "alice", "--strict")
	for _, want := range []string{"ENTITY", "user=alice", "producer_byte_rate", "1048576", "producer_record_rate", "5000", "violation_action", "reject"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe --user alice --strict lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "consumer_byte_rate") {
		t.Fatalf("strict describe shows the user+client entity:\n%s", out)
	}
	if out := run("describe", "--user", "alice"); !strings.Contains(out, "user=alice,client-id=<default>") || !strings.Contains(out, "2048") {
		t.Fatalf("describe --user alice:\n%s", out)
	}
	if out := run("describe", "--entity-type", "ips"); !strings.Contains(out, "ip=10.0.0.7") || strings.Contains(out, "user=") {
		t.Fatalf("describe any ip:\n%s", out)
	}
	var all []struct {
		Entity map[string]*string `json:"entity"`
		Values map[string]float64 `json:"values"`
	}
	if err := json.Unmarshal([]byte(run("describe", "--json")), &all); err != nil || len(all) != 4 {
		t.Fatalf("describe --json: %v %+v", err, all)
	}
	foundDefault := false
	for _, q := range all {
		if n, ok := q.Entity["user"]; ok && n == nil && q.Values["max_record_bytes"] == 65536 {
			foundDefault = true
		}
	}
	if !foundDefault {
		t.Fatalf("describe --json lacks the default user: %+v", all)
	}
	run("set", "--user", "alice", "--delete-config", "producer_record_rate")
	if out := run("describe", "--user", "alice", "--strict"); strings.Contains(out, "producer_record_rate") {
		t.Fatalf("deleted value still shown:\n%s", out)
	}
	fail("unknown quota key", "set", "--user", "bob", "--add-config", "bogus=1")
	fail("must be positive", "set", "--user", "bob", "--add-config", "producer_byte_rate=-1")
	fail("connection_creation_rate", "set", "--user", "bob", "--add-config", "connection_creation_rate=1")
	fail("name an entity", "set", "--add-config", "producer_byte_rate=1")
	fail("nothing to change", "set", "--user", "bob")
	fail("not both", "set", "--user", "bob", "--user-default", "--add-config", "producer_byte_rate=1")
	if out := run("describe", "--user", "nobody"); !strings.Contains(out, "No client quotas match") {
		t.Fatalf("describe of an entity with none:\n%s", out)
	}
}
