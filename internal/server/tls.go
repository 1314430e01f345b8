package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// TLSSettings are one listener's (or the HTTP listener's, or the node's
// as a client of other brokers) key material and TLS policy, from PEM
// files or inline PEM text, as Kafka's ssl.* settings give them.
type TLSSettings struct {
	// KeystoreLocation is a PEM file with the certificate chain and the
	// private key; CertChain and Key are the same given inline.
	KeystoreLocation string
	CertChain, Key   string
	// KeyPassword decrypts an encrypted PKCS#8 key.
	KeyPassword string
	// TruststoreLocation is a PEM file of CA certificates; TrustCerts the
	// same inline. Empty: no client certificates are checked, and a
	// client config uses the system roots.
	TruststoreLocation string
	TrustCerts         string
	// ClientAuth is ssl.client.auth: none, requested or required.
	ClientAuth             string
	MinVersion, MaxVersion uint16
	CipherSuites           []uint16
	Logger                 *slog.Logger
}

// tlsReloadEvery bounds how often the files are looked at for changes
// (on the next handshake after it passed).
const tlsReloadEvery = time.Second

// handshakeTimeout bounds a TLS handshake on an accepted connection.
const handshakeTimeout = 10 * time.Second

// TLSStore holds a listener's certificate and trust pool and reloads them
// when their files change: each handshake looks at the files' size and
// modification time (at most once a second) and loads what changed; a new
// file that does not load keeps the old material and logs an error.
// Safe for concurrent use.
type TLSStore struct {
	s TLSSettings
	// PeerCheck, when set before the store is used, is asked about the
	// other side's leaf certificate after its chain verified, on both
	// sides of a handshake (the controller listener's "does this node
	// belong to the cluster"); an error fails the handshake.
	PeerCheck func(*x509.Certificate) error

	mu      sync.Mutex // guards what follows
	cert    *tls.Certificate
	pool    *x509.CertPool // nil: no truststore
	kstamp  fileStamp
	tstamp  fileStamp
	checked time.Time
}

type fileStamp struct {
	size int64
	mod  time.Time
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.Size(), fi.ModTime()}, nil
}

// NewTLSStore loads the key material; an error names what is wrong.
func NewTLSStore(s TLSSettings) (*TLSStore, error) {
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	st := &TLSStore{s: s, checked: time.Now()}
	var err error
	if st.cert, st.kstamp, err = st.loadCert(); err != nil {
		return nil, err
	}
	if st.pool, st.tstamp, err = st.loadTrust(); err != nil {
		return nil, err
	}
	return st, nil
}

func (st *TLSStore) loadCert() (*tls.Certificate, fileStamp, error) {
	chain, key := []byte(st.s.CertChain), []byte(st.s.Key)
	var stamp fileStamp
	if p := st.s.KeystoreLocation; p != "" {
		var err error
		if stamp, err = stampOf(p); err != nil {
			return nil, stamp, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, stamp, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		chain, key = b, b
	}
	if len(chain) == 0 {
		return nil, stamp, nil // a client without a certificate
	}
	cert, err := ParseKeyPair(chain, key, st.s.KeyPassword)
	if err != nil {
		if st.s.KeystoreLocation != "" {
			return nil, stamp, fmt.Errorf("ssl.keystore.location %s: %w", st.s.KeystoreLocation, err)
		}
		return nil, stamp, fmt.Errorf("ssl.keystore.certificate.chain/ssl.keystore.key: %w", err)
	}
	return cert, stamp, nil
}

func (st *TLSStore) loadTrust() (*x509.CertPool, fileStamp, error) {
	b := []byte(st.s.TrustCerts)
	var stamp fileStamp
	what := "ssl.truststore.certificates"
	if p := st.s.TruststoreLocation; p != "" {
		var err error
		what = "ssl.truststore.location " + p
		if stamp, err = stampOf(p); err != nil {
			return nil, stamp, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		if b, err = os.ReadFile(p); err != nil {
			return nil, stamp, fmt.Errorf("ssl.truststore.location: %w", err)
		}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if st.s.TruststoreLocation != "" {
			return nil, stamp, fmt.Errorf("%s: no certificates", what)
		}
		return nil, stamp, nil
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, stamp, fmt.Errorf("%s: %w", what, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, stamp, fmt.Errorf("%s: no PEM CERTIFICATE blocks", what)
	}
	return pool, stamp, nil
}

// refresh reloads what changed, at most once per tlsReloadEvery.
func (st *TLSStore) refresh() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if time.Since(st.checked) < tlsReloadEvery {
		return
	}
	st.checked = time.Now()
	if p := st.s.KeystoreLocation; p != "" {
		if s, err := stampOf(p); err == nil && s != st.kstamp {
			cert, stamp, err := st.loadCert()
			if err != nil {
				st.s.Logger.Error("TLS certificate not reloaded; keeping the previous one", "file", p, "err", err)
				st.kstamp = s // do not retry until it changes again
			} else {
				st.cert, st.kstamp = cert, stamp
				st.s.Logger.Info("TLS certificate reloaded", "file", p, "serial", serialOf(cert))
			}
		}
	}
	if p := st.s.TruststoreLocation; p != "" {
		if s, err := stampOf(p); err == nil && s != st.tstamp {
			pool, stamp, err := st.loadTrust()
			if err != nil {
				st.s.Logger.Error("TLS truststore not reloaded; keeping the previous one", "file", p, "err", err)
				st.tstamp = s
			} else {
				st.pool, st.tstamp = pool, stamp
				st.s.Logger.Info("TLS truststore reloaded", "file", p)
			}
		}
	}
}

func serialOf(c *tls.Certificate) string {
	if c == nil || c.Leaf == nil {
		return ""
	}
	return c.Leaf.SerialNumber.String()
}

// Leaf is the current certificate (nil when the store has none).
func (st *TLSStore) Leaf() *x509.Certificate {
	cert, _ := st.current()
	if cert == nil {
		return nil
	}
	return cert.Leaf
}

func (st *TLSStore) current() (*tls.Certificate, *x509.CertPool) {
	st.refresh()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cert, st.pool
}

func (st *TLSStore) base() *tls.Config {
	c := &tls.Config{MinVersion: st.s.MinVersion, MaxVersion: st.s.MaxVersion, CipherSuites: st.s.CipherSuites,
		// Full 16 KiB records from the start: Kafka traffic is bulk, and
		// small first records (for page-load latency) only cost throughput.
		DynamicRecordSizingDisabled: true}
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}

// ServerConfig is the tls.Config of a listener: each handshake gets the
// current certificate and trust pool.
func (st *TLSStore) ServerConfig() *tls.Config {
	c := st.base()
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := st.current()
		if cert == nil {
			return nil, errors.New("no server certificate")
		}
		cc := st.base()
		cc.Certificates = []tls.Certificate{*cert}
		cc.ClientCAs = pool
		switch st.s.ClientAuth {
		case "required":
			cc.ClientAuth = tls.RequireAndVerifyClientCert
		case "requested":
			cc.ClientAuth = tls.VerifyClientCertIfGiven
		}
		if st.PeerCheck != nil {
			cc.VerifyConnection = st.checkPeer(nil)
		}
		return cc, nil
	}
	return c
}

// ClientConfig is a tls.Config for dialing another node: this node's
// certificate as the client certificate, the truststore as the roots
// (the system's when there is none), and serverName checked against the
// peer's certificate unless verifyName is false (then only the chain is
// checked). Build one per dial: it carries the material current now.
func (st *TLSStore) ClientConfig(serverName string, verifyName bool) *tls.Config {
	cert, pool := st.current()
	c := st.base()
	c.ServerName = serverName
	c.RootCAs = pool
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	var chain func(tls.ConnectionState) error
	if !verifyName {
		c.InsecureSkipVerify = true // the chain is checked below, the name is not
		chain = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the peer sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			for _, ic := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
		c.VerifyConnection = chain
	}
	if st.PeerCheck != nil {
		c.VerifyConnection = st.checkPeer(chain)
	}
	return c
}

// checkPeer runs first (the chain check, when the name is not), then
// PeerCheck on the peer's leaf certificate.
func (st *TLSStore) checkPeer(first func(tls.ConnectionState) error) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if first != nil {
			if err := first(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the peer sent no certificate")
		}
		return st.PeerCheck(cs.PeerCertificates[0])
	}
}

// handshake runs the server side of a TLS handshake on an accepted
// connection (in the connection's goroutine, so the accept loop never
// waits for it) and gives the connection its identity from a client
// certificate.
func (c *Conn) handshake(tc *tls.Conn) error {
	ctx, cancel := context.WithTimeout(c.ctx, handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	if f := c.s.cfg.TLSIdentity; f != nil {
		cs := tc.ConnectionState()
		if len(cs.PeerCertificates) > 0 {
			id, err := f(cs.PeerCertificates[0])
			if err != nil {
				return err
			}
			c.SetIdentity(id)
		}
	}
	return nil
}

// batchConn sits under a TLS connection and, during a large response,
// gathers TLS's records (one write each, 16 KiB at most) into a few large
// writes: a Fetch response of megabytes otherwise costs a syscall per
// record, more than its encryption. Outside a batch writes go straight
// through (handshake, alerts, key updates).
type batchConn struct {
	net.Conn
	mu  sync.Mutex // guards on and buf; held across the underlying write
	on  bool
	buf *[]byte
}

// batchFlushBytes is when a batch is written out before it ends.
const batchFlushBytes = 256 << 10

var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, batchFlushBytes+32<<10); return &b }}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on {
		return b.Conn.Write(p)
	}
	*b.buf = append(*b.buf, p...)
	if len(*b.buf) >= batchFlushBytes {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (b *batchConn) flushLocked() error {
	_, err := b.Conn.Write(*b.buf)
	*b.buf = (*b.buf)[:0]
	return err
}

// begin starts gathering writes; end writes out what was gathered.
func (b *batchConn) begin() {
	b.mu.Lock()
	b.on, b.buf = true, batchBufs.Get().(*[]byte)
	b.mu.Unlock()
}

func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.flushLocked()
	b.on = false
	batchBufs.Put(b.buf)
	b.buf = nil
	return err
}
