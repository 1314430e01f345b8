package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/testcluster"
)

// berth schema against a node's registry: register, list, get, check,
// config and delete, as tables and as JSON.
func TestSchemaCommands(t *testing.T) {
	n := testcluster.Start(t)
	reg := "http://" + n.HTTPAddr()
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := write("v1.avsc", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"total","type":"double"}]}`)
	v3 := write("v3.avsc", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"}]}`)
	run := func(args ...string) (string, error) {
		t.Helper()
		out, errOut, err := runCLI(t, "", append(args, "--registry", reg)...)
		if errOut != "" {
			t.Logf("stderr: %s", errOut)
		}
		return out, err
	}

	out, err := run("schema", "register", "orders-value", "--file", v1, "--json")
	var reg1 struct {
		Subject     string
		Version, ID int
	}
	if err != nil || json.Unmarshal([]byte(out), &reg1) != nil || reg1.Version != 1 || reg1.ID < 1 {
		t.Fatalf("register: %q, %v", out, err)
	}
	// Standard input works too, and a JSON schema.
	out, _, err = runCLI(t, `{"type":"object","properties":{"n":{"type":"integer"}}}`, "schema", "register", "events-value", "--type", "json", "--file", "-", "--registry", reg)
	if err != nil || !strings.Contains(out, "events-value") {
		t.Fatalf("register from stdin: %q, %v", out, err)
	}
	out, err = run("schema", "list")
	if err != nil || !strings.Contains(out, "SUBJECT") || !strings.Contains(out, "orders-value") || !strings.Contains(out, "JSON") {
		t.Fatalf("list: %q, %v", out, err)
	}
	out, err = run("schema", "get", "orders-value")
	if err != nil || !strings.Contains(out, `"total"`) {
		t.Fatalf("get: %q, %v", out, err)
	}
	out, err = run("schema", "get", "--id", "1", "--json")
	if err != nil || !strings.Contains(out, `orders-value`) {
		t.Fatalf("get --id: %q, %v", out, err)
	}
	out, err = run("schema", "check", "orders-value", "--file", v3, "--json")
	if err == nil || !strings.Contains(out, `"is_compatible": false`) || !strings.Contains(out, "amount") {
		t.Fatalf("check v3: %q, %v (want incompatible, naming amount)", out, err)
	}
	if _, err = run("schema", "register", "orders-value", "--file", v3); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("register v3: %v, want a 409", err)
	}
	out, err = run("schema", "config", "orders-value", "--set", "none")
	if err != nil || !strings.Contains(out, "NONE") {
		t.Fatalf("config --set: %q, %v", out, err)
	}
	if out, err = run("schema", "register", "orders-value", "--file", v3); err != nil {
		t.Fatalf("register v3 under NONE: %q, %v", out, err)
	}
	out, err = run("schema", "config")
	if err != nil || !strings.Contains(out, "(global)") || !strings.Contains(out, "BACKWARD") {
		t.Fatalf("config: %q, %v", out, err)
	}
	out, err = run("schema", "delete", "orders-value", "--version", "latest")
	if err != nil || !strings.Contains(out, "2") {
		t.Fatalf("delete version: %q, %v", out, err)
	}
	if _, err = run("schema", "delete", "orders-value"); err != nil {
		t.Fatal(err)
	}
	out, err = run("schema", "delete", "orders-value", "--permanent", "--json")
	if err != nil || !strings.Contains(out, `"permanent": true`) {
		t.Fatalf("permanent delete: %q, %v", out, err)
	}
	if _, err = run("schema", "get", "orders-value"); err == nil || !strings.Contains(err.Error(), "40401") {
		t.Fatalf("get after delete: %v, want 40401", err)
	}
	// A registry that is not there says what to do.
	if _, _, err = runCLI(t, "", "schema", "list", "--registry", "http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "--registry") {
		t.Fatalf("unreachable registry: %v", err)
	}
}
