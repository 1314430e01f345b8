package cli

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The --command-config file of Kafka's shell tools: client properties
// that say how to connect. Served: security.protocol PLAINTEXT or SSL,
// PEM trust and key stores (ssl.truststore.location, ssl.keystore.location,
// ssl.key.password, or librdkafka's ssl.ca.location,
// ssl.certificate.location and ssl.key.location), and
// ssl.endpoint.identification.algorithm.

// readClientProperties reads a key=value file (# and ! comments).
func readClientProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("--command-config %s:%d: want key=value", path, line)
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return props, sc.Err()
}

// securityOpts turns the --command-config file into kgo options.
func securityOpts(path string) ([]kgo.Opt, error) {
	if path == "" {
		return nil, nil
	}
	p, err := readClientProperties(path)
	if err != nil {
		return nil, err
	}
	switch proto := strings.ToUpper(p["security.protocol"]); proto {
	case "", "PLAINTEXT":
		return nil, nil
	case "SSL":
	default:
		return nil, fmt.Errorf("--command-config: security.protocol=%s is not supported by the berth commands; use SSL or PLAINTEXT", proto)
	}
	for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if t := p[k]; t != "" && !strings.EqualFold(t, "PEM") {
			return nil, fmt.Errorf("--command-config: %s=%s: only PEM files are read", k, t)
		}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	ca := first(p, "ssl.truststore.location", "ssl.ca.location")
	if ca != "" {
		b, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("--command-config: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--command-config: %s holds no PEM certificate", ca)
		}
	}
	certFile := first(p, "ssl.keystore.location", "ssl.certificate.location")
	keyFile := first(p, "ssl.key.location", "ssl.keystore.location")
	if certFile != "" {
		if p["ssl.key.password"] != "" {
			return nil, errors.New("--command-config: encrypted client keys (ssl.key.password) are not read; decrypt the key (openssl pkcs8 -in key.pem -out plain.pem)")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--command-config: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	skipName := p["ssl.endpoint.identification.algorithm"] == "" && hasKey(p, "ssl.endpoint.identification.algorithm")
	return []kgo.Opt{kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		c := cfg.Clone()
		if h, _, err := net.SplitHostPort(host); err == nil {
			c.ServerName = h
		}
		if skipName {
			c.InsecureSkipVerify = true
			c.VerifyConnection = verifyChainOnly(cfg.RootCAs)
		}
		d := &tls.Dialer{Config: c}
		return d.DialContext(ctx, network, host)
	})}, nil
}

func first(p map[string]string, keys ...string) string {
	for _, k := range keys {
		if p[k] != "" {
			return p[k]
		}
	}
	return ""
}

func hasKey(p map[string]string, k string) bool { _, ok := p[k]; return ok }

// verifyChainOnly checks the server's chain against roots (the system's
// when nil) without its name, as ssl.endpoint.identification.algorithm=
// (empty) asks.
func verifyChainOnly(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the broker sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		return err
	}
}
