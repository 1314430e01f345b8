package tests

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// librdkafka (kcat) reading a topic it may not READ is told
// TOPIC_AUTHORIZATION_FAILED and reads nothing, and it can parse the
// answer: a refused partition's record set is empty, not null (librdkafka
// took a null one for a protocol error: "invalid MessageSetSize -1").
func TestKcatConsumerWithoutReadIsRefused(t *testing.T) {
	kcat := need(t, "/usr/bin/kcat")
	n := startSASL(t, "PLAIN,SCRAM-SHA-512",
		tc.With("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
		tc.With("super.users", "User:admin"))
	createScramUsers(t, n.Addr(), kadm.UpsertSCRAM{User: "nosy", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "nosy-pw"})
	ctx := ctxT(t, 30*time.Second)
	adm := adminPlain(t, n.Addr())
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "secrets"); err != nil {
		t.Fatal(err)
	}
	produceSync(t, adminPlainClient(t, n.Addr(), kgo.DefaultProduceTopic("secrets")), &kgo.Record{Value: []byte("classified")})
	// nosy may DESCRIBE (so librdkafka gets as far as fetching) but not READ.
	mustCreateACLs(t, adm, kadm.NewACLs().Allow("User:nosy").Topics("secrets").Operations(kadm.OpDescribe))

	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(cctx, kcat, "-b", n.Addr(), "-X", "security.protocol=SASL_PLAINTEXT",
		"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=nosy", "-X", "sasl.password=nosy-pw",
		"-C", "-t", "secrets", "-p", "0", "-o", "beginning", "-e").CombinedOutput()
	s := string(out)
	if strings.Contains(s, "classified") {
		t.Fatalf("kcat read a record without READ: %s", s)
	}
	if strings.Contains(s, "Protocol parse failure") || strings.Contains(s, "MessageSetSize") {
		t.Fatalf("librdkafka could not parse the refusal: %s", s)
	}
	if !strings.Contains(strings.ToLower(s), "authorization") {
		t.Fatalf("kcat was not told it is not authorized: %s", s)
	}
}
