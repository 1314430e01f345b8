package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// Three broker processes whose only Kafka listener is SASL_PLAINTEXT:
// followers replicate and coordinators reach partition leaders by
// authenticating with sasl.mechanism.inter.broker.protocol (PLAIN, the
// listener's JAAS login), so a SCRAM user's acks=all writes to a topic
// replicated three times commit, and a transaction commits.
func TestSASLThreeNodeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("real broker processes")
	}
	ports := tc.ReservePorts(t, 6)
	var voters []string
	for i := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[2*i+1]))
	}
	procs := make([]*tc.Process, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		args := append([]string{
			"--node.id", fmt.Sprint(i + 1),
			"--listeners", fmt.Sprintf("SASL_PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", ports[2*i], ports[2*i+1]),
			"--controller.quorum.voters", strings.Join(voters, ","),
			"--sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512",
			"--override", "listener.name.sasl_plaintext.plain.sasl.jaas.config=" + saslJAAS,
		}, tc.ClusterArgs...)
		dir := filepath.Join(t.TempDir(), fmt.Sprint("node", i+1))
		wg.Add(1)
		go func() { // the nodes need each other to become ready
			defer wg.Done()
			procs[i] = tc.StartProcess(t, dir, args...)
		}()
	}
	wg.Wait()
	for _, p := range procs {
		if p == nil {
			t.FailNow()
		}
	}
	addr := procs[0].Addr()
	createScramUsers(t, addr, kadm.UpsertSCRAM{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-pw"})
	ctx := ctxT(t, 60*time.Second)
	adm := adminPlain(t, addr)
	if r, err := adm.CreateTopic(ctx, 3, 3, nil, "replicated"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	carol := scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha512Mechanism()
	cl := saslClient(t, addr, carol, kgo.DefaultProduceTopic("replicated"), kgo.RequiredAcks(kgo.AllISRAcks()))
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprint(i))})
	}
	// Fail, not hang, when the followers cannot fetch: an acks=all
	// ProduceSync then does not return.
	produced := make(chan error, 1)
	go func() { produced <- cl.ProduceSync(ctx, recs...).FirstErr() }()
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("acks=all produce: %v", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("acks=all produce did not complete in 45 s: do the followers authenticate?")
	}
	txn := saslClient(t, addr, carol, kgo.TransactionalID("sasl-tx"), kgo.DefaultProduceTopic("replicated"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, txn, &kgo.Record{Value: []byte("txn")})
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	got := consumeN(t, procs[2].Addr(), "replicated", 31, kgo.SASL(carol), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if len(got) != 31 {
		t.Fatalf("read %d records", len(got))
	}
	// Every partition's ISR holds all three replicas: the followers fetch.
	td, err := adm.ListTopics(ctx, "replicated")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range td["replicated"].Partitions {
		if len(p.ISR) != 3 {
			t.Fatalf("partition %d ISR %v, want 3 replicas", p.Partition, p.ISR)
		}
	}
}
