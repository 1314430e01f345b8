package app

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/config"
)

// SASL settings a broker cannot honour stop it at start with a message
// that says what to set.
func TestSASLSettingsRefusedAtStart(t *testing.T) {
	const jaas = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="pw" user_admin="pw";`
	for _, c := range []struct {
		name string
		set  map[string]string
		want string
	}{
		{"Kafka's default GSSAPI", nil, "GSSAPI"},
		{"unknown mechanism", map[string]string{"sasl.enabled.mechanisms": "PLAIN,CRAM-MD5"}, "CRAM-MD5"},
		{"unprefixed JAAS", map[string]string{"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": jaas}, "listener.name.<listener>.plain.sasl.jaas.config"},
		{"bad JAAS", map[string]string{"sasl.enabled.mechanisms": "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b`}, "unterminated"},
		{"missing JWKS", map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER",
			"sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks.json"}, "nonexistent"},
		{"inter-broker mechanism not enabled", map[string]string{"sasl.enabled.mechanisms": "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
			"sasl.mechanism.inter.broker.protocol":                "SCRAM-SHA-512"}, "not enabled"},
		{"inter-broker SCRAM without a login", map[string]string{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
			"sasl.mechanism.inter.broker.protocol":                "SCRAM-SHA-512"}, "no JAAS config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Defaults()
			set := map[string]string{
				"log.dirs": t.TempDir(), "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "http.listener": "",
			}
			for k, v := range c.set {
				set[k] = v
			}
			for k, v := range set {
				if err := cfg.Set(k, v, config.SourceFlag); err != nil {
					t.Fatal(err)
				}
			}
			n, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				n.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}
