package tests

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// A single node whose only listener is SASL talks to itself through it
// (transaction markers go through the peer pool): it authenticates with
// sasl.mechanism.inter.broker.protocol and its JAAS username and
// password, so a transaction commits and read_committed sees it, with
// PLAIN (the default's choice) and with a SCRAM broker user.
func TestSASLTransactionsOnSASLOnlyNode(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			n := startSASL(t, "PLAIN,SCRAM-SHA-512")
			if mech != "PLAIN" {
				createScramUsers(t, n.Addr(), kadm.UpsertSCRAM{User: "broker", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "broker-pw"})
				n.Close()
				n = tc.StartIn(t, n.Dir,
					tc.With("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
					tc.With("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512"),
					tc.With("listener.name.sasl_plaintext.plain.sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`),
					tc.With("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
					tc.With("listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
						`org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-pw";`))
			}
			ctx := ctxT(t, 30*time.Second)
			if _, err := adminPlain(t, n.Addr()).CreateTopic(ctx, 1, 1, nil, "tx"); err != nil {
				t.Fatal(err)
			}
			admin := plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
			cl := saslClient(t, n.Addr(), admin, kgo.TransactionalID("tx1"), kgo.DefaultProduceTopic("tx"))
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			produceSync(t, cl, &kgo.Record{Value: []byte("committed")})
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			got := consumeN(t, n.Addr(), "tx", 1, kgo.SASL(admin), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			if string(got[0].Value) != "committed" {
				t.Fatalf("read %q", got[0].Value)
			}
		})
	}
}
