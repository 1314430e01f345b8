package app

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"github.com/berthmq/berth/internal/server"
)

// httpSecurity makes the HTTP listener HTTPS when
// http.ssl.keystore.location is set and, with http.auth=mtls, requires a
// client certificate the truststore signed on every path but /metrics and
// /healthz while http.metrics.open is true (Prometheus scrapers and load
// balancer checks without certificates).
func (n *Node) httpSecurity(ln net.Listener, h http.Handler) (net.Listener, http.Handler, error) {
	if n.cfg.Get("http.ssl.keystore.location") == "" {
		return ln, h, nil
	}
	mtls := n.cfg.Get("http.auth") == "mtls"
	s := server.TLSSettings{
		KeystoreLocation:   n.cfg.Get("http.ssl.keystore.location"),
		KeyPassword:        n.cfg.Get("http.ssl.key.password"),
		TruststoreLocation: n.cfg.Get("http.ssl.truststore.location"),
		MinVersion:         tls.VersionTLS12,
		Logger:             n.log.With("listener", "http"),
	}
	if mtls {
		s.ClientAuth = "requested" // required per path below
	}
	st, err := server.NewTLSStore(s)
	if err != nil {
		return nil, nil, fmt.Errorf("http.ssl: %w", err)
	}
	n.httpTLS = st
	if mtls {
		open := n.cfg.Bool("http.metrics.open")
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if open && (r.URL.Path == "/metrics" || r.URL.Path == "/healthz") {
				inner.ServeHTTP(w, r)
				return
			}
			if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
				http.Error(w, "a client certificate signed by http.ssl.truststore.location is required (http.auth=mtls)", http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	return tls.NewListener(ln, st.ServerConfig()), h, nil
}
