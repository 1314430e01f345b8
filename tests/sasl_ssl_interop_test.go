package tests

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// Stock clients over a SASL_SSL listener (TLS, then SASL): kcat
// (librdkafka) with SCRAM-SHA-512 and with an unsecured OAUTHBEARER token
// (the broker has no JWKS), and kafka-python with SCRAM-SHA-512, each
// producing and reading back; a kcat that does not trust the broker's CA
// is refused.
func TestSASLSSLStockClients(t *testing.T) {
	kcat := need(t, "/usr/bin/kcat")
	py := need(t, "/usr/bin/python3")
	ca := tc.NewCA(t, "sasl-ssl-ca")
	node := ca.Issue(t, pkix.Name{CommonName: "berth-node"}, 400)
	n := tc.Start(t,
		tc.With("listeners", "SASL_SSL://127.0.0.1:0"),
		tc.With("ssl.keystore.type", "PEM"), tc.With("ssl.keystore.location", node.Keystore),
		tc.With("ssl.truststore.type", "PEM"), tc.With("ssl.truststore.location", ca.File),
		tc.With("listener.name.sasl_ssl.sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512,OAUTHBEARER"),
		tc.With("listener.name.sasl_ssl.plain.sasl.jaas.config", saslJAAS),
	)
	addr := n.Addr()
	admin := kadm.NewClient(adminPlainTLS(t, addr, ca))
	ctx := ctxT(t, 30*time.Second)
	if res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "kc", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "kc-pw"}}); err != nil || res.Error() != nil {
		t.Fatalf("SCRAM user: %v %v", err, res.Error())
	}
	for _, topic := range []string{"ss-kcat", "ss-oauth", "ss-python"} {
		if r, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
	}
	tlsArgs := []string{"-b", addr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + ca.File}
	scramArgs := append(append([]string{}, tlsArgs...), "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=kc", "-X", "sasl.password=kc-pw")
	oauthArgs := append(append([]string{}, tlsArgs...), "-X", "sasl.mechanisms=OAUTHBEARER",
		"-X", "enable.sasl.oauthbearer.unsecure.jwt=true", "-X", "sasl.oauthbearer.config=principal=tok-user")
	for _, c := range []struct {
		topic string
		args  []string
	}{{"ss-kcat", scramArgs}, {"ss-oauth", oauthArgs}} {
		var in strings.Builder
		for i := range 10 {
			fmt.Fprintf(&in, "v%d\n", i)
		}
		run(t, in.String(), kcat, append(c.args, "-P", "-t", c.topic, "-p", "0")...)
		out := run(t, "", kcat, append(c.args, "-C", "-t", c.topic, "-p", "0", "-o", "beginning", "-e")...)
		if got := strings.Fields(out); len(got) != 10 || got[9] != "v9" {
			t.Fatalf("kcat over SASL_SSL (%s) read %q", c.topic, out)
		}
	}
	if out := run(t, "", py, "testdata/kafkapython_sasl.py", addr, "ss-python", "20", "SCRAM-SHA-512", "kc", "kc-pw", ca.File); !strings.Contains(out, "ok 20") {
		t.Fatalf("kafka-python over SASL_SSL: %q", out)
	}
	// A client that does not trust the broker's CA does not get in.
	stranger := tc.NewCA(t, "stranger")
	cmd := exec.Command(kcat, "-b", addr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+stranger.File,
		"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=kc", "-X", "sasl.password=kc-pw", "-L", "-m", "5")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("kcat with an untrusted CA listed metadata: %s", out)
	}
}

// adminPlainTLS is the PLAIN admin's client over TLS trusting ca.
func adminPlainTLS(t *testing.T, addr string, ca *tc.CA) *kgo.Client {
	return adminPlainClient(t, addr, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}))
}
