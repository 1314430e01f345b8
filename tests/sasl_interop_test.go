package tests

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// kcat (librdkafka 2.0) over SASL_PLAINTEXT: SCRAM-SHA-512 produces and
// consumes, a wrong password produces nothing, and OAUTHBEARER with
// librdkafka's unsecured JWT works where the broker has no JWKS.
func TestKcatSASL(t *testing.T) {
	kcat := need(t, "/usr/bin/kcat")
	n := startSASL(t, "PLAIN,SCRAM-SHA-512,OAUTHBEARER")
	createScramUsers(t, n.Addr(), kadm.UpsertSCRAM{User: "kc", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "kc-pw"})
	ctx := ctxT(t, 30*time.Second)
	if _, err := adminPlain(t, n.Addr()).CreateTopic(ctx, 1, 1, nil, "kcat-sasl"); err != nil {
		t.Fatal(err)
	}
	scram := func(pass string) []string {
		return []string{"-b", n.Addr(), "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=kc", "-X", "sasl.password=" + pass}
	}
	var in strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&in, "v%d\n", i)
	}
	run(t, in.String(), kcat, append(scram("kc-pw"), "-P", "-t", "kcat-sasl", "-p", "0")...)
	out := run(t, "", kcat, append(scram("kc-pw"), "-C", "-t", "kcat-sasl", "-p", "0", "-o", "beginning", "-e")...)
	if got := strings.Fields(out); len(got) != 20 || got[19] != "v19" {
		t.Fatalf("kcat SCRAM consumer read %q", out)
	}

	// A wrong password: kcat fails and nothing is written.
	cmd := exec.Command(kcat, append(scram("nope"), "-P", "-t", "kcat-sasl", "-p", "0", "-X", "message.timeout.ms=3000")...)
	cmd.Stdin = strings.NewReader("intruder\n")
	if b, err := cmd.CombinedOutput(); err == nil && !strings.Contains(string(b), "uthentication") {
		t.Fatalf("kcat with a wrong password succeeded: %s", b)
	}
	ends, err := adminPlain(t, n.Addr()).ListEndOffsets(ctx, "kcat-sasl")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("kcat-sasl", 0); o.Offset != 20 {
		t.Fatalf("end offset %d after a refused producer, want 20", o.Offset)
	}

	oauth := []string{"-b", n.Addr(), "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=OAUTHBEARER",
		"-X", "enable.sasl.oauthbearer.unsecure.jwt=true", "-X", "sasl.oauthbearer.config=principal=kcat-dev"}
	run(t, "from-oauth\n", kcat, append(oauth, "-P", "-t", "kcat-sasl", "-p", "0")...)
	out = run(t, "", kcat, append(oauth, "-C", "-t", "kcat-sasl", "-p", "0", "-o", "-1", "-e")...)
	if strings.TrimSpace(out) != "from-oauth" {
		t.Fatalf("kcat OAUTHBEARER read %q", out)
	}
}

// kafka-python 2.0 (SaslHandshake v0, unwrapped tokens) produces and
// consumes with SCRAM-SHA-256 and PLAIN.
func TestKafkaPythonSASL(t *testing.T) {
	py := need(t, "/usr/bin/python3")
	if exec.Command(py, "-c", "import kafka").Run() != nil {
		need(t, "/nonexistent/python3-kafka")
	}
	n := startSASL(t, "PLAIN,SCRAM-SHA-256")
	createScramUsers(t, n.Addr(), kadm.UpsertSCRAM{User: "py", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "py-pw"})
	ctx := ctxT(t, 30*time.Second)
	adm := adminPlain(t, n.Addr())
	for _, topic := range []string{"kp-scram", "kp-plain"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if out := run(t, "", py, "testdata/kafkapython_sasl.py", n.Addr(), "kp-scram", "50", "SCRAM-SHA-256", "py", "py-pw"); !strings.Contains(out, "ok 50") {
		t.Fatalf("kafka-python SCRAM: %q", out)
	}
	if out := run(t, "", py, "testdata/kafkapython_sasl.py", n.Addr(), "kp-plain", "10", "PLAIN", "admin", "admin-secret"); !strings.Contains(out, "ok 10") {
		t.Fatalf("kafka-python PLAIN: %q", out)
	}
}
