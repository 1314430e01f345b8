package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for TLS tests: it issues node and client
// certificates (SAN IP 127.0.0.1 and localhost) written as PEM files.
type CA struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	// File is the CA certificate as a PEM file (a truststore).
	File string
	dir  string
}

// NewCA makes a CA whose files live in a test's temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, key: key, dir: t.TempDir()}
	ca.CertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	ca.File = filepath.Join(ca.dir, "ca.pem")
	if err := os.WriteFile(ca.File, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Pool is a cert pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issued is a certificate and its key, as PEM and as files.
type Issued struct {
	CertPEM, KeyPEM []byte
	// Keystore is a PEM file with the certificate then the key (Kafka's
	// PEM ssl.keystore.location); CertFile and KeyFile hold them apart
	// (librdkafka's ssl.certificate.location and ssl.key.location).
	Keystore, CertFile, KeyFile string
	NotAfter                    time.Time
}

// Issue signs a certificate for subject with serial, usable as a server
// and a client certificate, with SANs IP 127.0.0.1 and DNS localhost.
func (ca *CA) Issue(t testing.TB, subject pkix.Name, serial int64) Issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	k8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	is := Issued{
		NotAfter: tmpl.NotAfter,
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8}),
	}
	base := filepath.Join(ca.dir, subject.CommonName+"-"+big.NewInt(serial).String())
	is.Keystore, is.CertFile, is.KeyFile = base+".keystore.pem", base+".crt", base+".key"
	for f, b := range map[string][]byte{is.Keystore: append(append([]byte{}, is.CertPEM...), is.KeyPEM...), is.CertFile: is.CertPEM, is.KeyFile: is.KeyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return is
}
