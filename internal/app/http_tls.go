package app

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"github.com/berthmq/berth/internal/server"
)

// httpSecurity makes the HTTP listener HTTPS when
// http.ssl.keystore.location is set (asking for client certificates with
// http.auth=mtls) and authenticates every request with http.auth's
// methods (http_auth.go), but /metrics and /healthz while
// http.metrics.open is true (Prometheus scrapers and load balancer
// checks without credentials).
func (n *Node) httpSecurity(ln net.Listener, h http.Handler) (net.Listener, http.Handler, error) {
	a, err := n.newHTTPAuthn(n.cfg)
	if err != nil {
		return nil, nil, err
	}
	if a != nil {
		a.onFail = n.auditHTTPAuthFailure
		open := n.cfg.Bool("http.metrics.open")
		h = a.wrap(h, func(path string) bool { return open && (path == "/metrics" || path == "/healthz") })
		if a.basic && n.cfg.Get("http.ssl.keystore.location") == "" {
			n.log.Warn("http.auth=basic over plain HTTP: passwords cross the network in clear; set http.ssl.keystore.location")
		}
	}
	if n.cfg.Get("http.ssl.keystore.location") == "" {
		return ln, h, nil
	}
	s := server.TLSSettings{
		KeystoreLocation:   n.cfg.Get("http.ssl.keystore.location"),
		KeyPassword:        n.cfg.Get("http.ssl.key.password"),
		TruststoreLocation: n.cfg.Get("http.ssl.truststore.location"),
		MinVersion:         tls.VersionTLS12,
		Logger:             n.log.With("listener", "http"),
	}
	if tlsNeedsClientCert(n.cfg) {
		s.ClientAuth = "requested" // required per request by httpAuthn
	}
	st, err := server.NewTLSStore(s)
	if err != nil {
		return nil, nil, fmt.Errorf("http.ssl: %w", err)
	}
	n.httpTLS = st
	return tls.NewListener(ln, st.ServerConfig()), h, nil
}
