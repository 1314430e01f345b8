package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/testcluster"
)

// berth user create|list|delete against a SASL_PLAINTEXT broker, as its
// PLAIN bootstrap admin; the created user then logs in with the CLI's
// SCRAM flags, and a wrong password is refused with advice.
func TestIntegrationUserCreateListDelete(t *testing.T) {
	n := testcluster.Start(t,
		testcluster.With("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
		testcluster.With("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"),
		testcluster.With("listener.name.sasl_plaintext.plain.sasl.jaas.config",
			`org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`),
	)
	admin := []string{"-b", n.Addr(), "--sasl-mechanism", "PLAIN", "--sasl-username", "admin", "--sasl-password", "admin-secret"}
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, err := runCLI(t, stdin, append(args, admin...)...)
		if err != nil {
			t.Fatalf("berth %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("alice-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run("", "user", "create", "alice", "--password-file", pwFile)
	run("bob-pw\n", "user", "create", "bob", "--mechanism", "SCRAM-SHA-256", "--iterations", "4096")
	run("", "user", "create", "bob", "--mechanism", "SCRAM-SHA-512", "--password", "bob-512")

	var users []userEntry
	if err := json.Unmarshal([]byte(run("", "user", "list", "--json")), &users); err != nil {
		t.Fatal(err)
	}
	want := []userEntry{{"alice", "SCRAM-SHA-512", 8192}, {"bob", "SCRAM-SHA-256", 4096}, {"bob", "SCRAM-SHA-512", 8192}}
	if len(users) != 3 || users[0] != want[0] || users[1] != want[1] || users[2] != want[2] {
		t.Fatalf("users %+v, want %+v", users, want)
	}
	if out := run("", "user", "list"); !strings.Contains(out, "USER") || !strings.Contains(out, "alice") {
		t.Fatalf("table: %s", out)
	}

	// alice logs in with SCRAM-SHA-512 through the common flags.
	if _, errOut, err := runCLI(t, "", "topic", "list", "-b", n.Addr(), "--sasl-mechanism", "SCRAM-SHA-512",
		"--sasl-username", "alice", "--sasl-password", "alice-pw"); err != nil {
		t.Fatalf("alice: %v %s", err, errOut)
	}
	_, _, err := runCLI(t, "", "topic", "list", "-b", n.Addr(), "--sasl-mechanism", "SCRAM-SHA-512",
		"--sasl-username", "alice", "--sasl-password", "wrong", "--timeout", "5s")
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "--sasl-password") {
		t.Fatalf("wrong password: %v", err)
	}

	run("", "user", "delete", "bob")
	run("", "user", "delete", "alice", "--mechanism", "SCRAM-SHA-512")
	if err := json.Unmarshal([]byte(run("", "user", "list", "--json")), &users); err != nil || len(users) != 0 {
		t.Fatalf("after delete: %+v %v", users, err)
	}
	if _, _, err := runCLI(t, "", append([]string{"user", "delete", "ghost"}, admin...)...); err == nil || !strings.Contains(err.Error(), "berth user list") {
		t.Fatalf("deleting an unknown user: %v", err)
	}
	if _, _, err := runCLI(t, "", append([]string{"user", "create", "x", "--iterations", "100", "--password", "p"}, admin...)...); err == nil {
		t.Fatal("--iterations 100 accepted")
	}
}
