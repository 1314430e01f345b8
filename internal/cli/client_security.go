package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/config"
)

// The --command-config file of Kafka's shell tools: client properties
// that say how to connect. Served: security.protocol PLAINTEXT, SSL,
// SASL_PLAINTEXT or SASL_SSL; sasl.mechanism with sasl.jaas.config's
// username and password (or librdkafka's sasl.username and
// sasl.password), which --sasl-* flags and BERTH_SASL_* override; PEM
// trust and key stores (ssl.truststore.location, ssl.keystore.location,
// ssl.key.password, or librdkafka's ssl.ca.location,
// ssl.certificate.location and ssl.key.location), and
// ssl.endpoint.identification.algorithm.

// readClientProperties reads a client properties file as a broker's are
// read (config.ReadProperties: comments, continued lines), the last value
// of a key winning.
func readClientProperties(path string) (map[string]string, error) {
	ps, err := config.ReadProperties(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	props := make(map[string]string, len(ps))
	for _, p := range ps {
		props[p.Key] = p.Value
	}
	return props, nil
}

// securityOpts turns the --command-config file into kgo options for TLS
// and the SASL settings it holds (zero without SASL_*).
func securityOpts(path string) ([]kgo.Opt, saslFlags, error) {
	if path == "" {
		return nil, saslFlags{}, nil
	}
	p, err := readClientProperties(path)
	if err != nil {
		return nil, saslFlags{}, err
	}
	proto := strings.ToUpper(p["security.protocol"])
	var sf saslFlags
	if strings.HasPrefix(proto, "SASL_") {
		if sf, err = fileSASL(p); err != nil {
			return nil, saslFlags{}, err
		}
	}
	switch proto {
	case "", "PLAINTEXT", "SASL_PLAINTEXT":
		return nil, sf, nil
	case "SSL", "SASL_SSL":
	default:
		return nil, saslFlags{}, fmt.Errorf("--command-config: security.protocol=%s: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto)
	}
	opts, err := tlsOpts(p)
	return opts, sf, err
}

// fileSASL reads the SASL settings of a client properties file:
// sasl.mechanism (Kafka's default, GSSAPI, is not served: PLAIN is
// assumed when unset) and the username and password of sasl.jaas.config
// or librdkafka's sasl.username and sasl.password.
func fileSASL(p map[string]string) (saslFlags, error) {
	sf := saslFlags{mechanism: cmp.Or(p["sasl.mechanism"], "PLAIN"), username: p["sasl.username"], password: p["sasl.password"]}
	if j := p["sasl.jaas.config"]; j != "" {
		es, err := auth.ParseJAAS(j)
		if err != nil {
			return sf, fmt.Errorf("--command-config: sasl.jaas.config: %w", err)
		}
		if len(es) != 1 {
			return sf, fmt.Errorf("--command-config: sasl.jaas.config holds %d login modules, want 1", len(es))
		}
		sf.username = cmp.Or(es[0].Options["username"], sf.username)
		sf.password = cmp.Or(es[0].Options["password"], sf.password)
	}
	return sf, nil
}

// tlsOpts is the TLS dialer of an SSL or SASL_SSL properties file.
func tlsOpts(p map[string]string) ([]kgo.Opt, error) {
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
