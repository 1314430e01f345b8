package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	pem  []byte
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	p := x509.NewCertPool()
	p.AddCert(c)
	return &testCA{cert: c, key: key, pool: p, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate chain PEM and a PKCS#8 key PEM.
func (ca *testCA) issue(t testing.TB, subject pkix.Name) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	k8, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8})
}

// A client certificate's subject becomes the connection's principal
// through the mapping rules; a connection that never finishes its
// handshake holds up neither the accept loop nor other clients.
func TestTLSPrincipalFromClientCertificate(t *testing.T) {
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, pkix.Name{CommonName: "broker"})
	st, err := NewTLSStore(TLSSettings{CertChain: string(srvCert), Key: string(srvKey), TrustCerts: string(ca.pem), ClientAuth: "requested", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := auth.ParsePrincipalMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	h := newFake(func(_ context.Context, req *Request) (Reply, error) {
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	_, addr := startServer(t, h, Config{Logger: quiet(), Listener: "SSL", Protocol: "SSL", TLS: st.ServerConfig(),
		TLSIdentity: func(c *x509.Certificate) (Identity, error) {
			p, err := m.Principal(c)
			return Identity{Principal: p}, err
		}})

	// A stalled client: TCP only, no handshake.
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()

	certPEM, keyPEM := ca.issue(t, pkix.Name{CommonName: "Svc-Orders", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Example"}})
	pair, _ := tls.X509KeyPair(certPEM, keyPEM)
	for i, tc := range []struct {
		certs []tls.Certificate
		want  string
	}{{[]tls.Certificate{pair}, "User:svc-orders"}, {nil, "User:ANONYMOUS"}} {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool, Certificates: tc.certs})
		if err != nil {
			t.Fatal(err)
		}
		write(t, c, request(&kmsg.MetadataRequest{Version: 9}, int32(i)))
		readMetadata(t, c, 9)
		reqs := h.waitHandled(t, i+1)
		if got := reqs[i].Conn.Principal().String(); got != tc.want {
			t.Errorf("principal %s, want %s", got, tc.want)
		}
		if reqs[i].Conn.Listener != "SSL" || reqs[i].Conn.Protocol != "SSL" {
			t.Errorf("listener %s/%s", reqs[i].Conn.Listener, reqs[i].Conn.Protocol)
		}
		c.Close()
	}
}

// Keys as Kafka's PEM keystores hold them: an encrypted PKCS#8 key
// (openssl pkcs8 -topk8 -v2 aes-256-cbc) with ssl.key.password, a wrong
// password and a key of another certificate refused with clear errors.
func TestParseKeyPairEncryptedPKCS8(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	ca := newTestCA(t)
	certPEM, keyPEM := ca.issue(t, pkix.Name{CommonName: "broker"})
	dir := t.TempDir()
	plain, enc := filepath.Join(dir, "k.pem"), filepath.Join(dir, "k.enc.pem")
	if err := os.WriteFile(plain, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, prf := range []string{"hmacWithSHA256", "hmacWithSHA1"} {
		out, err := exec.Command(openssl, "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-v2prf", prf, "-in", plain, "-out", enc, "-passout", "pass:s3cret").CombinedOutput()
		if err != nil {
			t.Fatalf("openssl: %v\n%s", err, out)
		}
		encPEM, _ := os.ReadFile(enc)
		if !strings.Contains(string(encPEM), "ENCRYPTED PRIVATE KEY") {
			t.Fatalf("openssl wrote %s", encPEM)
		}
		keystore := append(append([]byte{}, certPEM...), encPEM...)
		if _, err := ParseKeyPair(keystore, keystore, "s3cret"); err != nil {
			t.Fatalf("%s: %v", prf, err)
		}
		if _, err := ParseKeyPair(keystore, keystore, "wrong"); err == nil || !strings.Contains(err.Error(), "password") {
			t.Fatalf("%s, wrong password: %v", prf, err)
		}
		if _, err := ParseKeyPair(keystore, keystore, ""); err == nil || !strings.Contains(err.Error(), "ssl.key.password") {
			t.Fatalf("%s, no password: %v", prf, err)
		}
	}
	_, otherKey := ca.issue(t, pkix.Name{CommonName: "other"})
	if _, err := ParseKeyPair(certPEM, otherKey, ""); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("mismatched key: %v", err)
	}
}
