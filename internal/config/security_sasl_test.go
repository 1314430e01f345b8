package config

import (
	"os"
	"path/filepath"
	"testing"
)

// A Kafka server.properties with SASL settings: per-listener names and a
// JAAS value continued over several lines with trailing backslashes.
func TestLoadFileSASLProperties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	err := os.WriteFile(path, []byte(`listeners=SASL_PLAINTEXT://127.0.0.1:9092
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="admin" \
    password="admin-secret" \
    user_admin="admin-secret";
sasl.mechanism.inter.broker.protocol=PLAIN
connections.max.reauth.ms=600000
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	c := Defaults()
	ignored, err := c.LoadFile(path)
	if err != nil || len(ignored) > 0 {
		t.Fatalf("%v, ignored %v", err, ignored)
	}
	want := `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";`
	if got := c.ListenerGet("SASL_PLAINTEXT", "plain", "sasl.jaas.config"); got != want {
		t.Fatalf("jaas %q\nwant %q", got, want)
	}
	if got := c.ListenerGet("SASL_PLAINTEXT", "", "sasl.enabled.mechanisms"); got != "PLAIN,SCRAM-SHA-512" {
		t.Fatalf("mechanisms %q", got)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if !continued(`a\`) || continued(`a\\`) || continued("a") {
		t.Fatal("continued")
	}
}
