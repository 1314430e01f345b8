package tests

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// The bootstrap admin of the SASL tests' brokers: a PLAIN user from the
// listener's JAAS config.
const saslJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required
	username="admin" password="admin-secret"
	user_admin="admin-secret"
	user_quote="with \"quotes\" and ; semicolon";`

// startSASL starts a broker with one SASL_PLAINTEXT listener enabling
// mechs, PLAIN's admin from the JAAS config.
func startSASL(t *testing.T, mechs string, opts ...tc.Option) *tc.Node {
	t.Helper()
	return tc.Start(t, append([]tc.Option{
		tc.With("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
		tc.With("listener.name.sasl_plaintext.sasl.enabled.mechanisms", mechs),
		tc.With("listener.name.sasl_plaintext.plain.sasl.jaas.config", saslJAAS),
	}, opts...)...)
}

func saslClient(t *testing.T, addr string, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return tc.Client(t, addr, append([]kgo.Opt{kgo.SASL(m), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
}

func adminPlain(t *testing.T, addr string) *kadm.Client {
	return kadm.NewClient(saslClient(t, addr, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
}

// createScramUsers creates SCRAM users through AlterUserScramCredentials
// as the PLAIN admin.
func createScramUsers(t *testing.T, addr string, ups ...kadm.UpsertSCRAM) {
	t.Helper()
	res, err := adminPlain(t, addr).AlterUserSCRAMs(ctxT(t, 20*time.Second), nil, ups)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
}

// SCRAM-SHA-512 and -256 users created with kadm produce and consume
// with kgo; PLAIN checks the same credentials; DescribeUserScramCredentials
// lists them without secrets.
func TestSASLScramAndPlainKgo(t *testing.T) {
	n := startSASL(t, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
	createScramUsers(t, n.Addr(),
		kadm.UpsertSCRAM{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"},
		kadm.UpsertSCRAM{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "bob-pw"},
	)
	adm := adminPlain(t, n.Addr())
	ctx := ctxT(t, 30*time.Second)
	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(desc) != 2 || desc["alice"].CredInfos[0].Mechanism != kadm.ScramSha512 || desc["bob"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("described %+v", desc)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "scram-orders"); err != nil {
		t.Fatal(err)
	}

	alice := saslClient(t, n.Addr(), scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism(), kgo.DefaultProduceTopic("scram-orders"))
	produceSync(t, alice, &kgo.Record{Value: []byte("from alice")})
	bob := scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha256Mechanism()
	got := consumeN(t, n.Addr(), "scram-orders", 1, kgo.SASL(bob))
	if string(got[0].Value) != "from alice" {
		t.Fatalf("consumed %q", got[0].Value)
	}
	// PLAIN over the SCRAM store, and the JAAS user with escapes.
	for _, m := range []sasl.Mechanism{
		plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism(),
		plain.Auth{User: "quote", Pass: `with "quotes" and ; semicolon`}.AsMechanism(),
	} {
		cl := saslClient(t, n.Addr(), m, kgo.DefaultProduceTopic("scram-orders"))
		produceSync(t, cl, &kgo.Record{Value: []byte("plain")})
	}
	// Mechanism mismatch: bob has no SCRAM-SHA-512 credential.
	wrong := saslClient(t, n.Addr(), scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism())
	if err := wrong.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("bob over SCRAM-SHA-512: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// AlterUserScramCredentials' checks answer Kafka's codes per user, and a
// deleted credential no longer authenticates.
func TestSASLAlterUserScramErrors(t *testing.T) {
	n := startSASL(t, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
	adm := adminPlain(t, n.Addr())
	ctx := ctxT(t, 30*time.Second)
	createScramUsers(t, n.Addr(), kadm.UpsertSCRAM{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw"})

	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(name string, mech int8, iters int32, saltedLen int) {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iters, []byte("salt"), make([]byte, saltedLen)
		req.Upsertions = append(req.Upsertions, u)
	}
	del := func(name string, mech int8) {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		req.Deletions = append(req.Deletions, d)
	}
	up("few", 1, 100, 32)
	up("many", 2, 20000, 64)
	up("mech", 3, 4096, 32)
	up("dup", 1, 4096, 32)
	up("dup", 1, 4096, 32)
	del("ghost", 1)
	up("", 1, 4096, 32)
	up("dave", 2, 4096, 64) // fine
	resp, err := req.RequestWith(ctx, adminPlainClient(t, n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{
		"few": kerr.UnacceptableCredential.Code, "many": kerr.UnacceptableCredential.Code,
		"mech": kerr.UnsupportedSaslMechanism.Code, "dup": kerr.DuplicateResource.Code,
		"ghost": kerr.ResourceNotFound.Code, "": kerr.UnacceptableCredential.Code, "dave": 0,
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != want[r.User] {
			t.Errorf("user %q: code %d, want %d", r.User, r.ErrorCode, want[r.User])
		}
	}
	desc, err := adm.DescribeUserSCRAMs(ctx, "dave", "ghost")
	if err != nil {
		t.Fatal(err)
	}
	if desc["dave"].Err != nil || !errors.Is(desc["ghost"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe: %+v", desc)
	}

	carol := scram.Auth{User: "carol", Pass: "pw"}.AsSha256Mechanism()
	if err := saslClient(t, n.Addr(), carol).Ping(ctx); err != nil {
		t.Fatalf("carol before deletion: %v", err)
	}
	res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || res.Error() != nil {
		t.Fatalf("delete: %v %v", err, res.Error())
	}
	if err := saslClient(t, n.Addr(), carol).Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("carol after deletion: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

func adminPlainClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	return saslClient(t, addr, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism(), opts...)
}

// saslConn is a raw Kafka connection for the tests that need to see what
// a client library hides: it sends kmsg requests one at a time.
type saslConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialSASL(t *testing.T, addr string) *saslConn { return &saslConn{t: t, c: dial(t, addr)} }

// do sends req and reads its response; err when the broker closed the
// connection.
func (s *saslConn) do(req kmsg.Request) (kmsg.Response, error) {
	s.corr++
	b := make([]byte, 4, 256)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(s.corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := s.c.Write(b); err != nil {
		return nil, err
	}
	var sz [4]byte
	if _, err := s.c.Read(sz[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := readFull(s.c, body); err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	body = body[4:]
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		s.t.Fatalf("decoding %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// plainAuth runs SaslHandshake v1 and SaslAuthenticate v2 with PLAIN.
func (s *saslConn) plainAuth(user, pass string) *kmsg.SASLAuthenticateResponse {
	s.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	r, err := s.do(hs)
	if err != nil || r.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
		s.t.Fatalf("handshake: %v %+v", err, r)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 2, []byte("\x00"+user+"\x00"+pass)
	ar, err := s.do(au)
	if err != nil {
		s.t.Fatalf("authenticate: %v", err)
	}
	return ar.(*kmsg.SASLAuthenticateResponse)
}

func metadataReq() kmsg.Request {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = 9
	return r
}

// On a SASL listener a request before authentication closes the
// connection; ApiVersions is answered; an unknown mechanism gets
// UNSUPPORTED_SASL_MECHANISM with the enabled list.
func TestSASLUnauthenticatedRequestCloses(t *testing.T) {
	n := startSASL(t, "PLAIN,SCRAM-SHA-512")
	c := dialSASL(t, n.Addr())
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	if _, err := c.do(av); err != nil {
		t.Fatalf("ApiVersions before auth: %v", err)
	}
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks, p.TimeoutMillis = 9, -1, 1000
	if _, err := c.do(p); err == nil {
		t.Fatal("Produce before authentication was answered")
	}

	c = dialSASL(t, n.Addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	r, err := c.do(hs)
	if err != nil {
		t.Fatal(err)
	}
	hr := r.(*kmsg.SASLHandshakeResponse)
	if hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hr.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-512" {
		t.Fatalf("handshake GSSAPI: %+v", hr)
	}
}

// A wrong password: SASL_AUTHENTICATION_FAILED with a message, nothing
// produced, the answer delayed longer with each failure from the address.
func TestSASLWrongPasswordDelayGrows(t *testing.T) {
	n := startSASL(t, "PLAIN,SCRAM-SHA-512", tc.With("connection.failed.authentication.delay.ms", "150"))
	ctx := ctxT(t, 30*time.Second)
	if _, err := kadm.NewClient(adminPlainClient(t, n.Addr())).CreateTopic(ctx, 1, 1, nil, "guarded"); err != nil {
		t.Fatal(err)
	}
	var took []time.Duration
	for i := 0; i < 3; i++ {
		c := dialSASL(t, n.Addr())
		start := time.Now()
		ar := c.plainAuth("admin", "guess")
		took = append(took, time.Since(start))
		if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil || !strings.Contains(*ar.ErrorMessage, "invalid") {
			t.Fatalf("wrong password answered %+v", ar)
		}
		if _, err := c.do(metadataReq()); err == nil {
			t.Fatal("a request after a failed authentication was answered")
		}
	}
	if took[0] < 150*time.Millisecond || took[1] < 300*time.Millisecond || took[2] < 600*time.Millisecond {
		t.Fatalf("failure delays %v, want >= 150ms, 300ms, 600ms", took)
	}
	if v := scrapeMetric(t, n.HTTPAddr(), `berth_auth_failures_total{mechanism="PLAIN"}`); v != 3 {
		t.Fatalf("berth_auth_failures_total{PLAIN} = %v, want 3", v)
	}
	// kgo with a wrong SCRAM password produces nothing.
	bad := saslClient(t, n.Addr(), scram.Auth{User: "admin", Pass: "nope"}.AsSha512Mechanism(),
		kgo.DefaultProduceTopic("guarded"), kgo.RecordDeliveryTimeout(time.Second))
	if err := bad.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong SCRAM password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := bad.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("produce with a wrong password succeeded")
	}
	ends, err := kadm.NewClient(adminPlainClient(t, n.Addr())).ListEndOffsets(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("guarded", 0); o.Offset != 0 {
		t.Fatalf("guarded end offset %d after refused producers, want 0", o.Offset)
	}
}

// KIP-368: with a short connections.max.reauth.ms kgo re-authenticates
// and keeps producing; a raw client that does not is cut off at its first
// request after the session's lifetime, which SaslAuthenticate announced.
func TestSASLReauthentication(t *testing.T) {
	n := startSASL(t, "PLAIN,SCRAM-SHA-512", tc.With("listener.name.sasl_plaintext.plain.connections.max.reauth.ms", "2000"))
	ctx := ctxT(t, 30*time.Second)
	if _, err := kadm.NewClient(adminPlainClient(t, n.Addr())).CreateTopic(ctx, 1, 1, nil, "reauth"); err != nil {
		t.Fatal(err)
	}
	var d disconnects
	cl := adminPlainClient(t, n.Addr(), kgo.WithHooks(&d))
	deadline := time.Now().Add(2500 * time.Millisecond)
	sent := 0
	for time.Now().Before(deadline) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce %d across re-authentications: %v", sent, err)
		}
		sent++
	}
	if d.n.Load() != 0 {
		t.Fatalf("kgo's connections were closed %d times: it should re-authenticate on them", d.n.Load())
	}

	c := dialSASL(t, n.Addr())
	ar := c.plainAuth("admin", "admin-secret")
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis <= 0 || ar.SessionLifetimeMillis > 2000 {
		t.Fatalf("authenticate: %+v, want a session lifetime of at most 2000 ms", ar)
	}
	if _, err := c.do(metadataReq()); err != nil {
		t.Fatalf("request within the session: %v", err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if _, err := c.do(metadataReq()); err == nil {
			return errors.New("the expired session's connection still answers")
		}
		return nil
	})

	// Re-authentication as another principal is refused.
	c = dialSASL(t, n.Addr())
	if ar := c.plainAuth("admin", "admin-secret"); ar.ErrorCode != 0 {
		t.Fatal(ar.ErrorCode)
	}
	if ar := c.plainAuth("quote", `with "quotes" and ; semicolon`); ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as another principal: code %d", ar.ErrorCode)
	}
}

// disconnects counts kgo's broker disconnections (HookBrokerDisconnect).
type disconnects struct{ n atomic.Int64 }

func (d *disconnects) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { d.n.Add(1) }

// scrapeMetric reads one series from a node's /metrics.
func scrapeMetric(t *testing.T, httpAddr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /metrics", series)
	return 0
}

// SaslHandshake v0 is followed by unwrapped PLAIN tokens (Kafka's oldest
// framing): a good one is answered with an empty token and the connection
// serves requests; a bad one closes the connection.
func TestSASLHandshakeV0RawTokens(t *testing.T) {
	n := startSASL(t, "PLAIN")
	for _, c := range []struct {
		pass string
		ok   bool
	}{{"admin-secret", true}, {"wrong", false}} {
		conn := dialSASL(t, n.Addr())
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 0, "PLAIN"
		if r, err := conn.do(hs); err != nil || r.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
			t.Fatalf("handshake v0: %v %+v", err, r)
		}
		tok := []byte("\x00admin\x00" + c.pass)
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(tok)))
		if _, err := conn.c.Write(append(frame, tok...)); err != nil {
			t.Fatal(err)
		}
		var sz [4]byte
		_, err := readFull(conn.c, sz[:])
		if !c.ok {
			if err == nil {
				t.Fatal("a wrong raw PLAIN token was answered")
			}
			continue
		}
		if err != nil || binary.BigEndian.Uint32(sz[:]) != 0 {
			t.Fatalf("raw PLAIN answer: %v size %d, want an empty token", err, binary.BigEndian.Uint32(sz[:]))
		}
		if _, err := conn.do(metadataReq()); err != nil {
			t.Fatalf("request after raw authentication: %v", err)
		}
	}
}
