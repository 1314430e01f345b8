package tests

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	"github.com/berthmq/berth/internal/testcluster"
)

// tlsNode starts a broker with a PLAINTEXT and an SSL listener; the
// SSL listener's settings are given per listener, as Kafka names them.
func tlsNode(t *testing.T, ca *testcluster.CA, keystore, clientAuth string, extra ...testcluster.Option) *testcluster.Node {
	t.Helper()
	opts := append([]testcluster.Option{
		testcluster.With("listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"),
		testcluster.With("listener.name.ssl.ssl.keystore.location", keystore),
		testcluster.With("listener.name.ssl.ssl.truststore.location", ca.File),
		testcluster.With("listener.name.ssl.ssl.client.auth", clientAuth),
	}, extra...)
	return testcluster.Start(t, opts...)
}

func tlsClient(t *testing.T, addr string, cfg *tls.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return testcluster.Client(t, addr, append([]kgo.Opt{kgo.DialTLSConfig(cfg)}, opts...)...)
}

// peerSerial dials addr over TLS and returns the serial number of the
// server's certificate.
func peerSerial(addr string, cfg *tls.Config) (string, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// An SSL listener beside a PLAINTEXT one: kgo produces and consumes over
// TLS, each listener's clients are told that listener's address, a
// plaintext client cannot talk to the SSL port and TLS 1.1 is refused.
func TestTLSListenerKgo(t *testing.T) {
	ca := testcluster.NewCA(t, "berth-test-ca")
	srv := ca.Issue(t, pkix.Name{CommonName: "broker-0"}, 10)
	n := tlsNode(t, ca, srv.Keystore, "none")
	sslAddr, plainAddr := n.ListenerAddr("SSL"), n.ListenerAddr("PLAINTEXT")
	if sslAddr == "" || plainAddr == "" || sslAddr == plainAddr {
		t.Fatalf("listeners: SSL %q, PLAINTEXT %q", sslAddr, plainAddr)
	}
	tc := &tls.Config{RootCAs: ca.Pool()}
	cl := tlsClient(t, sslAddr, tc, kgo.DefaultProduceTopic("tls-orders"), kgo.AllowAutoTopicCreation())
	for i := range 20 {
		produceSync(t, cl, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))})
	}
	recs := consumeN(t, sslAddr, "tls-orders", 20, kgo.DialTLSConfig(tc))
	if string(recs[0].Value) != "v0" || string(recs[19].Value) != "v19" {
		t.Fatalf("consumed over TLS: %q ... %q", recs[0].Value, recs[19].Value)
	}

	// Fetch responses over 64 KiB leave through the TLS write batching:
	// 400 distinct 1 KiB records come back intact and in order.
	big := tlsClient(t, sslAddr, tc, kgo.DefaultProduceTopic("tls-big"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recsIn []*kgo.Record
	for i := range 400 {
		v := bytes.Repeat([]byte{byte(i)}, 1024)
		copy(v, strconv.Itoa(i))
		recsIn = append(recsIn, &kgo.Record{Value: v})
	}
	produceSync(t, big, recsIn...)
	got := consumeN(t, sslAddr, "tls-big", 400, kgo.DialTLSConfig(tc), kgo.FetchMaxBytes(4<<20))
	for i, r := range got[:400] {
		if !bytes.Equal(r.Value, recsIn[i].Value) {
			t.Fatalf("record %d came back damaged over TLS", i)
		}
	}

	// Metadata answers with the endpoints of the listener asked.
	for _, tcase := range []struct {
		addr string
		opts []kgo.Opt
	}{{sslAddr, []kgo.Opt{kgo.DialTLSConfig(tc)}}, {plainAddr, nil}} {
		kcl := testcluster.Client(t, tcase.addr, tcase.opts...)
		adm := kadm.NewClient(kcl)
		md, err := adm.BrokerMetadata(ctxT(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(tcase.addr)
		if len(md.Brokers) != 1 || strconv.Itoa(int(md.Brokers[0].Port)) != port {
			t.Fatalf("Metadata through %s: brokers %+v, want port %s", tcase.addr, md.Brokers, port)
		}
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctxT(t, 10*time.Second), kcl)
		if err != nil || len(dc.Brokers) != 1 || strconv.Itoa(int(dc.Brokers[0].Port)) != port {
			t.Fatalf("DescribeCluster through %s: %+v %v, want port %s", tcase.addr, dc, err, port)
		}
		poll.Until(t, 20*time.Second, func() error {
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorKey = "g"
			fr, err := fc.RequestWith(ctxT(t, 10*time.Second), kcl)
			if err != nil || fr.ErrorCode != 0 || strconv.Itoa(int(fr.Port)) != port {
				return fmt.Errorf("FindCoordinator through %s: %+v %v, want port %s", tcase.addr, fr, err, port)
			}
			return nil
		})
	}

	// A plaintext client on the SSL port gets nowhere.
	plain := testcluster.Client(t, sslAddr, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := plain.Ping(ctx); err == nil {
		t.Fatal("a plaintext client talked to the SSL listener")
	}
	// TLS 1.1 and an untrusted server certificate are refused.
	if _, err := peerSerial(sslAddr, &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS11}); err == nil {
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
	if _, err := peerSerial(sslAddr, &tls.Config{}); err == nil {
		t.Fatal("a client without the CA trusted the broker's certificate")
	}
}

// ssl.client.auth=required: a client without a certificate, or with one
// from another CA, is refused in the handshake; a client with a trusted
// certificate is served.
func TestTLSMutualRequired(t *testing.T) {
	ca := testcluster.NewCA(t, "berth-test-ca")
	srv := ca.Issue(t, pkix.Name{CommonName: "broker-0"}, 10)
	alice := ca.Issue(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"ServiceUsers"}}, 20)
	other := testcluster.NewCA(t, "other-ca").Issue(t, pkix.Name{CommonName: "mallory"}, 30)
	n := tlsNode(t, ca, srv.Keystore, "required")
	addr := n.ListenerAddr("SSL")

	pair := func(is testcluster.Issued) []tls.Certificate {
		c, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	ping := func(certs []tls.Certificate) error {
		cl := tlsClient(t, addr, &tls.Config{RootCAs: ca.Pool(), Certificates: certs}, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := ping(nil); err == nil {
		t.Fatal("a client without a certificate was served with ssl.client.auth=required")
	}
	if err := ping(pair(other)); err == nil {
		t.Fatal("a client with an untrusted certificate was served")
	}
	if err := ping(pair(alice)); err != nil {
		t.Fatalf("a client with a trusted certificate: %v", err)
	}
	// The plaintext listener is unaffected.
	if err := testcluster.Client(t, n.ListenerAddr("PLAINTEXT")).Ping(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// The keystore file is rotated under a running broker: new connections
// get the new certificate without a restart, and a broken file keeps the
// last good one.
func TestTLSCertificateReload(t *testing.T) {
	ca := testcluster.NewCA(t, "berth-test-ca")
	first := ca.Issue(t, pkix.Name{CommonName: "broker-0"}, 10)
	second := ca.Issue(t, pkix.Name{CommonName: "broker-0"}, 11)
	keystore := t.TempDir() + "/keystore.pem"
	copyFile := func(from string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keystore+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(keystore+".tmp", keystore); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(first.Keystore)
	n := tlsNode(t, ca, keystore, "none")
	addr := n.ListenerAddr("SSL")
	tc := &tls.Config{RootCAs: ca.Pool()}
	if s, err := peerSerial(addr, tc); err != nil || s != "10" {
		t.Fatalf("first certificate: serial %s, %v", s, err)
	}
	copyFile(second.Keystore)
	poll.Until(t, 10*time.Second, func() error {
		s, err := peerSerial(addr, tc)
		if err != nil || s != "11" {
			return fmt.Errorf("serial %s, %v; want the rotated certificate's 11", s, err)
		}
		return nil
	})
	// A broken file: handshakes keep serving serial 11 across reload checks.
	if err := os.WriteFile(keystore, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		if s, err := peerSerial(addr, tc); err != nil || s != "11" {
			t.Fatalf("after a broken keystore was written: serial %s, %v; want the last good certificate (11)", s, err)
		}
	}
}

// kcat (librdkafka) over TLS, then with a client certificate (mTLS).
func TestKcatTLS(t *testing.T) {
	kcat := need(t, "/usr/bin/kcat")
	ca := testcluster.NewCA(t, "berth-test-ca")
	srv := ca.Issue(t, pkix.Name{CommonName: "broker-0"}, 10)
	client := ca.Issue(t, pkix.Name{CommonName: "kcat-client"}, 21)
	n := tlsNode(t, ca, srv.Keystore, "required")
	addr := n.ListenerAddr("SSL")
	base := []string{"-b", addr, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + ca.File}
	mtls := append(append([]string{}, base...), "-X", "ssl.certificate.location="+client.CertFile, "-X", "ssl.key.location="+client.KeyFile)

	run(t, "a\nb\nc\n", kcat, append(append([]string{}, mtls...), "-P", "-t", "kcat-tls")...)
	out := run(t, "", kcat, append(append([]string{}, mtls...), "-C", "-t", "kcat-tls", "-o", "beginning", "-e", "-f", "%s\n")...)
	if strings.Fields(out)[0] != "a" || len(strings.Fields(out)) != 3 {
		t.Fatalf("kcat consumed over mTLS: %q", out)
	}
	md := run(t, "", kcat, append(append([]string{}, mtls...), "-L")...)
	if !strings.Contains(md, addr) {
		t.Fatalf("kcat -L over TLS does not show the SSL endpoint %s:\n%s", addr, md)
	}
	// Without a client certificate the broker refuses the handshake.
	cmdArgs := append(append([]string{}, base...), "-L", "-m", "3")
	if err := runErr(kcat, cmdArgs...); err == nil {
		t.Fatal("kcat without a client certificate was served with ssl.client.auth=required")
	}
}

// runErr runs a command expected to fail and returns its error.
func runErr(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, name, args...).Run()
}

// Named listeners: a client listener and an INTERNAL one that other
// brokers use, each answered with its own (advertised) endpoint.
func TestNamedListeners(t *testing.T) {
	n := testcluster.Start(t,
		testcluster.With("listeners", "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0"),
		testcluster.With("listener.security.protocol.map", "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT"),
		testcluster.With("inter.broker.listener.name", "INTERNAL"),
		testcluster.With("advertised.listeners", "CLIENT://localhost:0"),
	)
	client, internal := n.ListenerAddr("CLIENT"), n.ListenerAddr("INTERNAL")
	_, clientPort, _ := net.SplitHostPort(client)
	_, internalPort, _ := net.SplitHostPort(internal)
	for _, tc := range []struct{ addr, host, port string }{
		{client, "localhost", clientPort}, {internal, "127.0.0.1", internalPort},
	} {
		md, err := kadm.NewClient(testcluster.Client(t, tc.addr)).BrokerMetadata(ctxT(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Brokers) != 1 || md.Brokers[0].Host != tc.host || strconv.Itoa(int(md.Brokers[0].Port)) != tc.port {
			t.Fatalf("Metadata through %s: %+v, want %s:%s", tc.addr, md.Brokers, tc.host, tc.port)
		}
	}
	cl := testcluster.Client(t, client, kgo.DefaultProduceTopic("named"), kgo.AllowAutoTopicCreation())
	produceSync(t, cl, &kgo.Record{Value: []byte("x")})
	if recs := consumeN(t, client, "named", 1); string(recs[0].Value) != "x" {
		t.Fatalf("consumed %q", recs[0].Value)
	}
}

// The HTTP listener over HTTPS with http.auth=mtls: /metrics stays open
// while http.metrics.open is true, other paths (the profiles, the schema
// registry) need a trusted client certificate; with
// http.metrics.open=false /metrics needs one too.
func TestHTTPSMutual(t *testing.T) {
	ca := testcluster.NewCA(t, "berth-test-ca")
	srv := ca.Issue(t, pkix.Name{CommonName: "broker-0"}, 10)
	op := ca.Issue(t, pkix.Name{CommonName: "operator"}, 11)
	pair, err := tls.X509KeyPair(op.CertPEM, op.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	get := func(addr, path string, certs []tls.Certificate) int {
		t.Helper()
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: certs}}}
		resp, err := hc.Get("https://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, open := range []bool{true, false} {
		n := testcluster.Start(t,
			testcluster.With("http.ssl.keystore.location", srv.Keystore),
			testcluster.With("http.ssl.truststore.location", ca.File),
			testcluster.With("http.auth", "mtls"),
			testcluster.With("http.metrics.open", strconv.FormatBool(open)),
		)
		addr := n.HTTPAddr()
		wantMetrics := http.StatusOK
		if !open {
			wantMetrics = http.StatusUnauthorized
		}
		if got := get(addr, "/metrics", nil); got != wantMetrics {
			t.Errorf("http.metrics.open=%v: /metrics without a certificate: %d, want %d", open, got, wantMetrics)
		}
		if got := get(addr, "/debug/pprof/", nil); got != http.StatusUnauthorized {
			t.Errorf("/debug/pprof/ without a certificate: %d", got)
		}
		if got := get(addr, "/subjects", nil); got != http.StatusUnauthorized {
			t.Errorf("the schema registry without a certificate: %d", got)
		}
		for _, p := range []string{"/metrics", "/debug/pprof/", "/subjects"} {
			if got := get(addr, p, []tls.Certificate{pair}); got != http.StatusOK {
				t.Errorf("%s with a trusted certificate: %d", p, got)
			}
		}
		// The HTTP certificate's expiry is a metric.
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{pair}}}}
		resp, err := hc.Get("https://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := fmt.Sprintf(`berth_tls_certificate_expiry_timestamp_seconds{listener="http"} %g`, float64(srv.NotAfter.Unix()))
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics has no line %q", want)
		}
	}
}

// The berth commands reach an SSL listener with mutual TLS through
// Kafka's --command-config file.
func TestCLICommandConfigTLS(t *testing.T) {
	ca := testcluster.NewCA(t, "berth-test-ca")
	srv := ca.Issue(t, pkix.Name{CommonName: "broker-0"}, 10)
	op := ca.Issue(t, pkix.Name{CommonName: "operator"}, 12)
	n := tlsNode(t, ca, srv.Keystore, "required")
	addr := n.ListenerAddr("SSL")
	props := t.TempDir() + "/client.properties"
	write := func(s string) {
		if err := os.WriteFile(props, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=" + ca.File +
		"\nssl.keystore.type=PEM\nssl.keystore.location=" + op.Keystore + "\n")
	if out, stderr, err := berthCLI(ctxT(t, time.Minute), "", "topic", "create", "cli-tls", "-b", addr, "--command-config", props); err != nil {
		t.Fatalf("berth topic create over mTLS: %v\n%s%s", err, out, stderr)
	}
	out, _, err := berthCLI(ctxT(t, time.Minute), "", "topic", "list", "-b", addr, "--command-config", props)
	if err != nil || !strings.Contains(out, "cli-tls") {
		t.Fatalf("berth topic list over mTLS: %v\n%s", err, out)
	}
	// Without the client certificate the broker refuses the handshake.
	write("security.protocol=SSL\nssl.ca.location=" + ca.File + "\n")
	if _, _, err := berthCLI(ctxT(t, time.Minute), "", "topic", "list", "-b", addr, "--command-config", props, "--timeout", "3s"); err == nil {
		t.Fatal("berth topic list without a client certificate succeeded against ssl.client.auth=required")
	}
}

// DescribeConfigs never shows a secret: ssl.key.password and the inline
// private key are sensitive with no value, as Kafka answers.
func TestDescribeConfigsHidesSecrets(t *testing.T) {
	n := testcluster.Start(t,
		testcluster.With("ssl.key.password", "hunter2"),
		testcluster.With("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----"),
	)
	cl := testcluster.Client(t, n.Addr())
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(md.Brokers[0].NodeID))
	req.Resources = append(req.Resources, res)
	req.IncludeSynonyms = true
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("DescribeConfigs: %v", err)
	}
	seen := 0
	for _, c := range resp.Resources[0].Configs {
		if c.Name != "ssl.key.password" && c.Name != "ssl.keystore.key" {
			if c.Value != nil && (strings.Contains(*c.Value, "hunter2") || strings.Contains(*c.Value, "secret")) {
				t.Errorf("%s shows a secret", c.Name)
			}
			continue
		}
		seen++
		if c.Value != nil || !c.IsSensitive {
			t.Errorf("%s: value %v, sensitive %v; want no value, sensitive", c.Name, c.Value, c.IsSensitive)
		}
		for _, s := range c.ConfigSynonyms {
			if s.Value != nil {
				t.Errorf("%s: synonym %s shows %q", c.Name, s.Name, *s.Value)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("%d of the 2 secret settings described", seen)
	}
}

// The dead-letter writer, an internal client, dials the inter-broker
// listener: over mutual TLS with the node's certificate when that listener
// is SSL and requires client certificates.
func TestShareDLQOverInterBrokerTLS(t *testing.T) {
	ca := testcluster.NewCA(t, "berth-test-ca")
	srv := ca.Issue(t, pkix.Name{CommonName: "broker-0"}, 10)
	n := tlsNode(t, ca, srv.Keystore, "required", testcluster.With("inter.broker.listener.name", "SSL"))
	addr := n.ListenerAddr("PLAINTEXT")
	testcluster.CreateTopic(t, addr, "tls-jobs", 1, nil)
	testcluster.CreateTopic(t, addr, "dlq.tls-jobs", 1, dlqTopicConfigs())
	prod := testcluster.Client(t, addr)
	setGroupConfigs(t, prod, "tls-workers", "errors.deadletterqueue.topic.name", "dlq.tls-jobs", "share.auto.offset.reset", "earliest")
	produceSync(t, prod, &kgo.Record{Topic: "tls-jobs", Value: []byte("poison")})
	cl := shareConsumer(t, addr, "tls-workers", "tls-jobs")
	receiveJob(t, cl, "poison").Ack(kgo.AckReject)
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if recs := consumeN(t, addr, "dlq.tls-jobs", 1); string(recs[0].Value) != "poison" {
		t.Fatalf("parked %q", recs[0].Value)
	}
}
