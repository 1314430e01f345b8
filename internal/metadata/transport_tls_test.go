package metadata

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/berthmq/berth/internal/poll"
)

// tlsPair makes a CA-signed certificate for 127.0.0.1 and returns it with
// the CA's pool.
func tlsPair(t *testing.T, caKey *ecdsa.PrivateKey, ca *x509.Certificate) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func testCA(t *testing.T) (*ecdsa.PrivateKey, *x509.Certificate, *x509.CertPool) {
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
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return key, c, pool
}

// With ServerTLS requiring client certificates, two nodes of the same CA
// exchange Raft messages; a node with another CA's certificate, and a
// plain TCP client, get nothing through.
func TestTCPTransportMutualTLS(t *testing.T) {
	caKey, ca, pool := testCA(t)
	otherKey, other, _ := testCA(t)
	newTLS := func(id uint64, cert tls.Certificate) (*TCPTransport, *fakeReceiver) {
		server := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
		client := func(addr string) *tls.Config {
			host, _, _ := net.SplitHostPort(addr)
			return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}
		}
		tr, err := NewTCPTransport(TCPConfig{NodeID: id, Addr: "127.0.0.1:0", ClusterID: "c",
			MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Logger: quietLogger(),
			ServerTLS: server, ClientTLS: client})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		r := &fakeReceiver{}
		tr.Start(r)
		return tr, r
	}
	a, _ := newTLS(1, tlsPair(t, caKey, ca))
	b, rb := newTLS(2, tlsPair(t, caKey, ca))
	a.SetPeers(map[uint64]string{2: b.Addr().String()})
	a.Send([]*pb.Message{{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(3))}})
	poll.Until(t, 5*time.Second, func() error {
		if n := len(rb.snapshot().msgs); n != 1 {
			return fmt.Errorf("%d messages over mutual TLS, want 1", n)
		}
		return nil
	})

	// A stranger (another CA's certificate, trusting b's CA) is refused.
	s, rs := newTLS(3, tlsPair(t, otherKey, other))
	s.SetPeers(map[uint64]string{2: b.Addr().String()})
	poll.Until(t, 5*time.Second, func() error {
		s.Send([]*pb.Message{{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(3)), To: new(uint64(2))}})
		if u := rs.snapshot().unreachable; len(u) == 0 {
			return fmt.Errorf("the stranger's link is not reported unreachable")
		}
		return nil
	})
	// A plain TCP client speaking the Raft handshake gets no answer.
	c, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hs := handshake{From: 4, To: 2, ClusterID: "c", Addr: "127.0.0.1:1"}
	c.Write(hs.encode())
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := c.Read(make([]byte, 8)); n > 0 {
		t.Fatal("a plain TCP client got an answer from a TLS controller listener")
	}
	if n := len(rb.snapshot().msgs); n != 1 {
		t.Fatalf("%d messages delivered, want only a's", n)
	}
}
