package tests

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// stockServerProperties is Kafka's own KRaft combined-mode
// config/kraft/server.properties (the settings it ships with, comments
// cut) followed by the security block an operator adds: a SASL_SSL
// listener with PEM stores, PLAIN's bootstrap admin in the JAAS form over
// several lines, SCRAM, and the StandardAuthorizer.
const stockServerProperties = `process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{{CPORT}}
listeners=SASL_SSL://127.0.0.1:{{KPORT}},CONTROLLER://127.0.0.1:{{CPORT}}
inter.broker.listener.name=SASL_SSL
advertised.listeners=SASL_SSL://127.0.0.1:{{KPORT}}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={{DIR}}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000

# Security
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="admin" \
    password="admin-secret" \
    user_admin="admin-secret";
ssl.keystore.type=PEM
ssl.keystore.location={{KEYSTORE}}
ssl.truststore.type=PEM
ssl.truststore.location={{TRUSTSTORE}}
ssl.client.auth=none
ssl.endpoint.identification.algorithm=https
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
allow.everyone.if.no.acl.found=false
`

// A stock Kafka server.properties with security settings starts Berth
// with the same meaning (issue 14 item 7): the SASL_SSL listener serves
// TLS and PLAIN/SCRAM, the authorizer refuses a user without ACLs,
// log.retention.hours is honoured, and the settings Berth does not use
// are named in a warning. A setting Berth cannot honour (a JKS keystore,
// another authorizer class, GSSAPI) stops the start with the reason.
func TestStockServerPropertiesWithSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("broker processes")
	}
	ca := tc.NewCA(t, "props-ca")
	node := ca.Issue(t, pkix.Name{CommonName: "berth-broker"}, 300)
	ports := tc.ReservePorts(t, 2)
	dir := t.TempDir()
	props := strings.NewReplacer("{{KPORT}}", fmt.Sprint(ports[0]), "{{CPORT}}", fmt.Sprint(ports[1]),
		"{{DIR}}", dir, "{{KEYSTORE}}", node.Keystore, "{{TRUSTSTORE}}", ca.File).Replace(stockServerProperties)
	file := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(file, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}

	// The test harness passes its own --listeners and --log.dirs; give it
	// the file's values so the file's meaning is what runs.
	listeners := fmt.Sprintf("SASL_SSL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", ports[0], ports[1])
	p := tc.StartProcessLogged(t, dir, filepath.Join(t.TempDir(), "berth.log"), "--config", file, "--listeners", listeners)

	tlsCfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	admin := kadm.NewClient(tc.Client(t, p.Addr(), kgo.DialTLSConfig(tlsCfg),
		kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())))
	ctx := ctxT(t, time.Minute)
	if r, err := admin.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil || r.Err != nil {
		t.Fatalf("create orders as the JAAS admin over SASL_SSL: %v %v", err, r.Err)
	}
	cfgs, err := admin.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	retention := ""
	for _, rc := range cfgs {
		for _, c := range rc.Configs {
			if c.Key == "log.retention.ms" && c.Value != nil {
				retention = *c.Value
			}
		}
	}
	if retention != "604800000" {
		t.Errorf("log.retention.ms %q, want 604800000 from log.retention.hours=168", retention)
	}
	if res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-pw"}}); err != nil || res.Error() != nil {
		t.Fatalf("SCRAM user: %v %v", err, res.Error())
	}
	bob := tc.Client(t, p.Addr(), kgo.DialTLSConfig(tlsCfg), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1))
	if err := bob.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob without ACLs producing: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	poll.Until(t, 10*time.Second, func() error {
		b, _ := os.ReadFile(p.LogFile)
		for _, k := range []string{"process.roles", "num.network.threads", "num.io.threads"} {
			if !strings.Contains(string(b), k) {
				return fmt.Errorf("the start-up warning does not name %s:\n%s", k, b)
			}
		}
		return nil
	})

	// Settings Berth cannot honour stop the start and say why.
	for _, bad := range []struct{ from, to, want string }{
		{"ssl.keystore.type=PEM", "ssl.keystore.type=JKS", "PEM"},
		{"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "authorizer.class.name=com.example.MyAuthorizer", "authorizer.class.name"},
		{"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512", "sasl.enabled.mechanisms=GSSAPI", "GSSAPI"},
	} {
		f := filepath.Join(t.TempDir(), "bad.properties")
		if err := os.WriteFile(f, []byte(strings.Replace(props, bad.from, bad.to, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(tc.Binary(t), "serve", "--config", f, "--log.dirs", t.TempDir(), "--listeners", listeners)
		done := make(chan struct{})
		var out []byte
		go func() { out, _ = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("%s: berth kept running", bad.to)
		}
		if cmd.ProcessState.Success() || !strings.Contains(string(out), bad.want) {
			t.Errorf("%s: exit %v, output %q: want a refusal naming %s", bad.to, cmd.ProcessState, out, bad.want)
		}
	}
}
