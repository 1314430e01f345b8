package tests

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/berthmq/berth/internal/cli"
	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// seedJAAS is the SASL_SSL listener's PLAIN users: the bootstrap admin
// and the brokers' own user, which they authenticate to each other with
// (sasl.mechanism.inter.broker.protocol=PLAIN).
const seedJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required
	username="broker" password="broker-secret"
	user_broker="broker-secret"
	user_admin="admin-secret";`

// The seeds' shared-cluster scenario (issue 14), end to end on three
// broker processes with SASL_SSL client listeners, mutual TLS between the
// controllers, the StandardAuthorizer and the audit trail on:
//
//   - tenants harbor-retail and meridian (and meridian's service
//     svc-meridian-pos) are SCRAM-SHA-512 users created through
//     AlterUserScramCredentials by the PLAIN bootstrap admin, with ACLs
//     that give each its own topics;
//   - svc-meridian-pos producing to orders is refused with
//     TOPIC_AUTHORIZATION_FAILED whatever its records claim, and nothing
//     lands in orders;
//   - harbor-retail publishes near its 5,000 records/s quota while
//     meridian floods at ten times its own quota and is throttled, then
//     (violation_action=reject) rejected with THROTTLING_QUOTA_EXCEEDED;
//     meridian stays near its quota and harbor-retail's rate holds;
//     harbor-retail's p99 produce latency with and without the flood is
//     logged, and asserted within 20% only with BERTH_SEED_STRICT=1 (a
//     shared 2-core machine runs the three brokers, both tenants and the
//     test: its p99 is the machine's as much as Berth's);
//   - `berth audit search` finds the refused attempt.
func TestSeedSharedClusterTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("three broker processes")
	}
	ca := tc.NewCA(t, "seed-ca")
	node := ca.Issue(t, pkix.Name{CommonName: "berth-broker", OrganizationalUnit: []string{"Brokers"}}, 200)
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
			"--listeners", fmt.Sprintf("SASL_SSL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", ports[2*i], ports[2*i+1]),
			"--controller.quorum.voters", strings.Join(voters, ","),
			"--override", "listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SSL",
			"--override", "ssl.keystore.type=PEM",
			"--override", "ssl.keystore.location=" + node.Keystore,
			"--override", "ssl.truststore.type=PEM",
			"--override", "ssl.truststore.location=" + ca.File,
			"--override", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
			"--override", "sasl.mechanism.inter.broker.protocol=PLAIN",
			"--override", "listener.name.sasl_ssl.plain.sasl.jaas.config=" + seedJAAS,
			"--override", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			// The controllers' certificates map to this principal; the
			// brokers' SASL user is User:broker.
			"--override", "super.users=User:admin;User:broker;User:CN=berth-broker,OU=Brokers",
			"--override", "audit.log.enable=true",
			"--override", "quota.window.num=2",
		}, tc.ClusterArgs...)
		dir := filepath.Join(t.TempDir(), fmt.Sprint("node", i+1))
		wg.Add(1)
		go func() { // the nodes need each other to become ready
			defer wg.Done()
			procs[i] = tc.StartProcess(t, dir, args...)
		}()
	}
	wg.Wait()
	var seeds []string
	for _, p := range procs {
		if p == nil {
			t.FailNow()
		}
		seeds = append(seeds, p.Addr())
	}
	tlsCfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}

	// The controller port takes only the nodes: a certificate from the
	// same CA whose principal is not a super user is refused there.
	app := ca.Issue(t, pkix.Name{CommonName: "app", OrganizationalUnit: []string{"Services"}}, 201)
	appPair, err := tls.X509KeyPair(app.CertPEM, app.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[1]), &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{appPair}}); err == nil {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Fatal("a client certificate of the cluster's CA was served by the controller listener")
		}
		conn.Close()
	}
	as := func(m kgo.Opt, opts ...kgo.Opt) *kgo.Client {
		return tc.Client(t, seeds[0], append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTLSConfig(tlsCfg), m, kgo.RetryTimeout(10 * time.Second)}, opts...)...)
	}
	admin := kadm.NewClient(as(kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())))
	ctx := ctxT(t, 10*time.Minute) // BERTH_SEED_STRICT's rounds take three

	// Tenants, their topics, ACLs and quotas.
	users := map[string]string{"harbor-retail": "hr-secret", "meridian": "mer-secret", "svc-meridian-pos": "pos-secret"}
	var ups []kadm.UpsertSCRAM
	for u, pw := range users {
		ups = append(ups, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: pw})
	}
	if res, err := admin.AlterUserSCRAMs(ctx, nil, ups); err != nil || res.Error() != nil {
		t.Fatalf("creating the tenants' users: %v %v", err, res.Error())
	}
	for _, topic := range []string{"orders", "meridian-events"} {
		if r, err := admin.CreateTopic(ctx, 1, 3, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
	}
	acls := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:harbor-retail").AllowHosts().Topics("orders").Operations(kadm.OpWrite, kadm.OpDescribe),
		kadm.NewACLs().Allow("User:meridian", "User:svc-meridian-pos").AllowHosts().Topics("meridian-").
			ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite, kadm.OpDescribe),
	}
	for _, b := range acls {
		res, err := admin.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("CreateACLs: %v", r.Err)
			}
		}
	}
	setQuotas(t, admin, userEntity("harbor-retail"), "producer_record_rate", 5000.0)
	setQuotas(t, admin, userEntity("meridian"), "producer_record_rate", 500.0)
	// Every broker has the users, ACLs and quotas before the tenants
	// connect (each applies the metadata log on its own).
	poll.Until(t, 30*time.Second, func() error {
		for _, s := range seeds {
			d, err := kadm.NewClient(as(kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()), kgo.SeedBrokers(s))).
				DescribeClientQuotas(ctx, false, nil)
			if err != nil {
				return err
			}
			if len(d) != 2 {
				return fmt.Errorf("%s: %d quota entities, want 2", s, len(d))
			}
		}
		return nil
	})
	scramAs := func(user string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: users[user]}.AsSha512Mechanism())
	}

	// svc-meridian-pos may not write to orders, whatever its records say.
	pos := as(scramAs("svc-meridian-pos"), kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(2))
	err = pos.ProduceSync(ctx, &kgo.Record{Key: []byte("order-1"), Value: []byte(`{"tenant":"harbor-retail"}`),
		Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("harbor-retail")}}}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("svc-meridian-pos producing to orders: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// kgo stops at Metadata (no DESCRIBE on orders); a Produce sent
	// anyway to the partition's leader is refused by the WRITE check and
	// appends nothing.
	before := endOffset(t, admin, "orders")
	md, err := admin.Metadata(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "orders", md.Topics["orders"].ID // v13 names topics by id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = valuesBatch([]string{`{"tenant":"harbor-retail"}`})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := pos.Broker(int(md.Topics["orders"].Partitions[0].Leader)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if c := raw.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("raw Produce to orders by svc-meridian-pos: error %d, want TOPIC_AUTHORIZATION_FAILED", c)
	}
	if after := endOffset(t, admin, "orders"); after != before {
		t.Fatalf("orders' end offset moved from %d to %d after refused writes", before, after)
	}
	pos.Close() // its metadata retries for orders would go on (and be audited) every few seconds
	produceSync(t, as(scramAs("svc-meridian-pos"), kgo.DefaultProduceTopic("meridian-events")), &kgo.Record{Value: []byte("pos-ok")})

	// Isolation: harbor-retail steady, meridian flooding, in both modes.
	// Phases with and without the flood alternate and each condition's
	// latencies are pooled, so that a p99 compares like with like rather
	// than one phase's luck with a shared disk (BERTH_SEED_STRICT=1 runs
	// thirty rounds per mode, or BERTH_SEED_ROUNDS, and asserts the
	// seed's 20%: a single stall of the shared machine moves the p99 of
	// ten rounds by as much).
	const aRate = 4500
	rounds, phase := 1, 3*time.Second
	strict := os.Getenv("BERTH_SEED_STRICT") != ""
	if strict {
		rounds, phase = 30, 1500*time.Millisecond
		if n, err := strconv.Atoi(os.Getenv("BERTH_SEED_ROUNDS")); err == nil && n > 0 {
			rounds = n
		}
	}
	control := os.Getenv("BERTH_SEED_CONTROL") != "" // no flood at all: the measure's own noise
	// harbor-retail's own throttles, which would be its quota's doing.
	var aThrottles atomic.Int64
	// One harbor-retail client throughout, as a service would run: a
	// phase's first records do not pay its connections and metadata.
	a := as(scramAs("harbor-retail"), kgo.DefaultProduceTopic("orders"), kgo.ProducerLinger(time.Millisecond),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.WithHooks(throttleHook{&aThrottles}))
	defer a.Close()
	paced(t, a, aRate, time.Second) // warm-up: connections, metadata, the first fsyncs
	for _, mode := range []string{"throttle", "reject"} {
		if mode == "reject" {
			setQuotas(t, admin, userEntity("meridian"), "producer_record_rate", 500.0, "violation_action", 1.0)
		}
		var throttles, rejected, acked atomic.Int64
		var other atomic.Value
		var floodTime time.Duration
		var alones, withs []pacedResult
		// One meridian client per mode, connected before the first
		// round and kept between floods, as a tenant's service would be:
		// its TLS and SCRAM handshakes are not part of the flood.
		bcl := as(scramAs("meridian"), kgo.DefaultProduceTopic("meridian-events"), kgo.ProducerLinger(5*time.Millisecond),
			kgo.DisableIdempotentWrite(), kgo.RecordRetries(1), kgo.ProducerBatchMaxBytes(16<<10),
			kgo.MetadataMinAge(250*time.Millisecond), kgo.WithHooks(throttleHook{&throttles}))
		// The previous mode's flood may still hold meridian over its
		// quota (refused now that it rejects): try until a window passes.
		poll.Until(t, 30*time.Second, func() error {
			return bcl.ProduceSync(ctx, &kgo.Record{Value: []byte("meridian-connects")}).FirstErr()
		})
		for range rounds {
			alones = append(alones, paced(t, a, aRate, phase))
			fctx, cancel := context.WithCancel(ctx)
			var fwg sync.WaitGroup
			fwg.Add(1)
			start := time.Now()
			go func() {
				defer fwg.Done()
				if control {
					<-fctx.Done()
					return
				}
				flood(fctx, bcl, 5000, func(err error) {
					switch {
					case err == nil:
						if time.Since(start) > time.Second { // past the first window
							acked.Add(1)
						}
					case errors.Is(err, kerr.ThrottlingQuotaExceeded):
						rejected.Add(1)
					case fctx.Err() == nil:
						other.CompareAndSwap(nil, err)
					}
				})
			}()
			withs = append(withs, paced(t, a, aRate, phase))
			floodTime += time.Since(start) - time.Second
			cancel()
			fwg.Wait()
			// The records meridian still holds are dropped, not sent
			// into the next phase without a flood.
			if err := bcl.AbortBufferedRecords(ctx); err != nil {
				t.Fatal(err)
			}
		}
		bcl.Close()
		alone, with := pooled(alones), pooled(withs)
		bRate := float64(acked.Load()) / floodTime.Seconds()
		ratio := float64(with.p99) / float64(max(alone.p99, time.Microsecond))
		t.Logf("%s, %d round(s) of %v: harbor-retail alone %.0f records/s, p50 %v p99 %v; with the flood %.0f records/s, p50 %v p99 %v (p99 x%.2f, max %v / %v); meridian %.0f records/s acked (quota 500, offered 5000), %d throttles, %d rejected; harbor-retail throttled %d times",
			mode, rounds, phase, alone.rate, alone.p50, alone.p99, with.rate, with.p50, with.p99, ratio, alone.lats[len(alone.lats)-1], with.lats[len(with.lats)-1],
			bRate, throttles.Load(), rejected.Load(), aThrottles.Load())
		if e := other.Load(); e != nil {
			t.Logf("meridian's first other error: %v", e)
		}
		if bRate > 1.3*500 {
			t.Errorf("%s: meridian achieved %.0f records/s, over 130%% of its 500 records/s quota", mode, bRate)
		}
		if !control && mode == "throttle" && throttles.Load() == 0 {
			t.Error("meridian was never told to wait (throttle_time_ms)")
		}
		if !control && mode == "reject" && rejected.Load() == 0 {
			t.Error("meridian was never rejected with THROTTLING_QUOTA_EXCEEDED")
		}
		if with.rate < 0.9*alone.rate {
			t.Errorf("%s: harbor-retail's rate fell from %.0f to %.0f records/s while meridian flooded", mode, alone.rate, with.rate)
		}
		if strict && ratio > 1.2 {
			t.Errorf("%s: harbor-retail's p99 rose from %v to %v (x%.2f), more than 20%%", mode, alone.p99, with.p99, ratio)
		}
	}

	// The audit trail finds the refused attempt.
	props := filepath.Join(t.TempDir(), "admin.properties")
	if err := os.WriteFile(props, []byte("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"admin-secret\";\n"+
		"ssl.truststore.type=PEM\nssl.truststore.location="+ca.File+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 60*time.Second, func() error {
		var out, errb strings.Builder
		err := cli.Run(ctx, []string{"audit", "search", "-b", seeds[1], "--command-config", props, "--timeout", "10s",
			"--principal", "User:svc-meridian-pos", "--resource", "topic:orders", "--denied", "--since", "1h"},
			strings.NewReader(""), &out, &errb)
		if err != nil {
			return fmt.Errorf("berth audit search: %v: %s", err, errb.String())
		}
		if !refusedWrite.MatchString(out.String()) {
			return fmt.Errorf("the refused write is not in the audit trail yet:\n%s", out.String())
		}
		t.Logf("berth audit search:\n%s", out.String())
		return nil
	})
}

// refusedWrite is the audit search's row of a refused Produce to orders.
var refusedWrite = regexp.MustCompile(`User:svc-meridian-pos .* Produce Write +topic:orders +denied TOPIC_AUTHORIZATION_FAILED`)

// endOffset is the sum of a topic's partitions' end offsets.
func endOffset(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctxT(t, 20*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}
