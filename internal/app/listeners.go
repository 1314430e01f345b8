package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/handler"
	"github.com/berthmq/berth/internal/latency"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/peer"
	"github.com/berthmq/berth/internal/server"
)

// namedStore is a TLS store and the listener it serves.
type namedStore struct {
	name  string
	store *server.TLSStore
}

// kafkaListener is one Kafka listener of listeners=: its socket, the
// address advertised for it, its TLS material (SSL and SASL_SSL) and,
// once serving, its server.
type kafkaListener struct {
	conf config.Listener
	ln   net.Listener
	adv  metadata.Endpoint
	tls  *server.TLSStore // nil on PLAINTEXT and SASL_PLAINTEXT
	srv  *server.Server
}

// bindListeners binds every Kafka listener and loads the TLS material of
// the TLS ones; the first bound is n.listeners[0]. On an error the
// sockets bound so far are closed.
func (n *Node) bindListeners(cfg *config.Config) (err error) {
	ls, err := cfg.KafkaListeners()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			for _, l := range n.listeners {
				l.ln.Close()
			}
			n.listeners = nil
		}
	}()
	for _, l := range ls {
		kl := &kafkaListener{conf: l}
		if config.IsTLS(l.Protocol) {
			s, err := tlsSettings(cfg, l.Name, n.log.With("listener", l.Name))
			if err != nil {
				return err
			}
			if kl.tls, err = server.NewTLSStore(s); err != nil {
				return fmt.Errorf("listener %s: %w", l.Name, err)
			}
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(l.Host, strconv.Itoa(l.Port)))
		if err != nil {
			return fmt.Errorf("listeners %s (%s): %w (is another broker running? change listeners=)", cfg.Get("listeners"), l.Name, err)
		}
		kl.ln = ln
		n.listeners = append(n.listeners, kl)
		host, port, err := advertisedOn(cfg, l, ln.Addr())
		if err != nil {
			return err
		}
		kl.adv = metadata.Endpoint{Name: l.Name, Host: host, Port: port, Protocol: l.Protocol}
	}
	ib, err := cfg.InterBrokerListener()
	if err != nil {
		return err
	}
	n.interBroker = n.listenerNamed(ib.Name)
	if ib := n.interBroker; ib.tls != nil {
		principal := "(no certificate)"
		if leaf := ib.tls.Leaf(); leaf != nil {
			principal = "User:" + auth.SubjectDN(leaf)
			if m, err := auth.ParsePrincipalMappingRules(cfg.ListenerGet(ib.conf.Name, "", "ssl.principal.mapping.rules")); err == nil {
				if p, err := m.Principal(leaf); err == nil {
					principal = p.String()
				}
			}
		}
		n.log.Info("brokers connect to each other over TLS with this node's certificate; its principal belongs in super.users",
			"listener", ib.conf.Name, "principal", principal)
	}
	return nil
}

func (n *Node) listenerNamed(name string) *kafkaListener {
	for _, l := range n.listeners {
		if l.conf.Name == name {
			return l
		}
	}
	return nil
}

// endpoints are this node's advertised endpoints, one per listener.
func (n *Node) endpoints() []metadata.Endpoint {
	out := make([]metadata.Endpoint, 0, len(n.listeners))
	for _, l := range n.listeners {
		out = append(out, l.adv)
	}
	return out
}

// serveListeners starts a server per Kafka listener.
func (n *Node) serveListeners(cfg *config.Config, h *handler.Broker) error {
	for _, l := range n.listeners {
		sc := server.Config{
			MaxRequestBytes:    int32(cfg.Int("socket.request.max.bytes")),
			QueuedMaxBytes:     cfg.Int("queued.max.request.bytes"),
			MaxInflightPerConn: int(cfg.Int("max.inflight.requests.per.connection")),
			IdleTimeout:        cfg.Duration("connections.max.idle.ms"),
			Logger:             n.log.With("component", "server", "listener", l.conf.Name),
			Listener:           l.conf.Name,
			Protocol:           l.conf.Protocol,
			Accept:             h.AcceptConnection,
			Written:            n.responseWritten,

			UnauthMaxRequestBytes: int32(cfg.Int("sasl.server.max.receive.size")),
		}
		if l.tls != nil {
			sc.TLS = l.tls.ServerConfig()
		}
		if l.conf.Protocol == "SSL" { // SASL_SSL: SASL names the principal
			m, err := auth.ParsePrincipalMappingRules(cfg.ListenerGet(l.conf.Name, "", "ssl.principal.mapping.rules"))
			if err != nil {
				return fmt.Errorf("listener %s: %w", l.conf.Name, err)
			}
			sc.TLSIdentity = func(c *x509.Certificate) (server.Identity, error) {
				p, err := m.Principal(c)
				return server.Identity{Principal: p}, err
			}
		}
		l.srv = server.New(l.ln, h, sc)
		if n.kafka == nil {
			n.kafka = l.srv
		}
		go func() {
			if err := l.srv.Serve(); err != nil {
				n.log.Error("kafka listener stopped", "listener", l.conf.Name, "err", err)
			}
		}()
	}
	return nil
}

// closeListeners closes every Kafka listener and its connections (or the
// bare sockets of listeners not serving yet).
func (n *Node) closeListeners() error {
	var errs []error
	for _, l := range n.listeners {
		if l.srv != nil {
			errs = append(errs, l.srv.Close())
		} else {
			l.ln.Close()
		}
	}
	return errors.Join(errs...)
}

// ListenerAddr is the bound address of the Kafka listener named name
// (upper case), or "".
func (n *Node) ListenerAddr(name string) string {
	if l := n.listenerNamed(strings.ToUpper(name)); l != nil {
		return l.ln.Addr().String()
	}
	return ""
}

// serverSum adds a server counter over every listener.
func (n *Node) serverSum(f func(*server.Metrics) int64) float64 {
	var t int64
	for _, l := range n.listeners {
		if l.srv != nil {
			t += f(&l.srv.Metrics)
		}
	}
	return float64(t)
}

// advertisedOn is the address clients of listener l are given: its
// advertised.listeners entry (a port of 0 meaning the bound one), else
// the bound address (the host name for a wildcard bind).
func advertisedOn(cfg *config.Config, l config.Listener, bound net.Addr) (string, int32, error) {
	ta := bound.(*net.TCPAddr)
	a, ok, err := cfg.Advertised(l)
	if err != nil {
		return "", 0, err
	}
	if ok {
		port := a.Port
		if port == 0 {
			port = ta.Port
		}
		return a.Host, int32(port), nil
	}
	host := ta.IP.String()
	if ta.IP.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return host, int32(ta.Port), nil
}

// tlsSettings reads listener's ssl.* settings (per listener, else
// global).
func tlsSettings(cfg *config.Config, listener string, logger *slog.Logger) (server.TLSSettings, error) {
	get := func(name string) string { return cfg.ListenerGet(listener, "", name) }
	s := server.TLSSettings{
		KeystoreLocation:   get("ssl.keystore.location"),
		CertChain:          get("ssl.keystore.certificate.chain"),
		Key:                get("ssl.keystore.key"),
		KeyPassword:        get("ssl.key.password"),
		TruststoreLocation: get("ssl.truststore.location"),
		TrustCerts:         get("ssl.truststore.certificates"),
		ClientAuth:         get("ssl.client.auth"),
		Logger:             logger,
	}
	var versions []uint16
	for _, v := range strings.Split(get("ssl.enabled.protocols"), ",") {
		if strings.TrimSpace(v) == "" {
			continue
		}
		tv, err := config.TLSVersion(v)
		if err != nil {
			return s, fmt.Errorf("listener %s: ssl.enabled.protocols: %w", listener, err)
		}
		versions = append(versions, tv)
	}
	maxV, err := config.TLSVersion(get("ssl.protocol"))
	if err != nil {
		return s, fmt.Errorf("listener %s: ssl.protocol: %w", listener, err)
	}
	if len(versions) > 0 {
		s.MinVersion, s.MaxVersion = slices.Min(versions), min(slices.Max(versions), maxV)
	}
	if s.MinVersion > s.MaxVersion {
		return s, fmt.Errorf("listener %s: ssl.protocol %s is below every version of ssl.enabled.protocols", listener, get("ssl.protocol"))
	}
	if cs := strings.TrimSpace(get("ssl.cipher.suites")); cs != "" {
		for _, name := range strings.Split(cs, ",") {
			id, err := config.CipherSuite(name)
			if err != nil {
				return s, fmt.Errorf("listener %s: ssl.cipher.suites: %w", listener, err)
			}
			s.CipherSuites = append(s.CipherSuites, id)
		}
	}
	return s, nil
}

// peerDialer is how this node dials other brokers: over TLS with its
// certificate when the inter-broker listener is SSL or SASL_SSL, else
// plain TCP.
func (n *Node) peerDialer() peer.Dialer {
	ib := n.interBroker
	if ib == nil || ib.tls == nil {
		return nil
	}
	verifyName := n.cfg.ListenerGet(ib.conf.Name, "", "ssl.endpoint.identification.algorithm") == "https"
	return func(ctx context.Context, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		d := tls.Dialer{Config: ib.tls.ClientConfig(host, verifyName)}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// controllerTLS is the Raft transport's TLS when the controller listener
// is mapped to SSL: mutual TLS, with this node's certificate both ways
// and the truststore checking the peer's (a node without a trusted
// certificate is refused). nil configs: plain TCP.
func (n *Node) controllerTLS(cfg *config.Config) (*tls.Config, func(addr string) *tls.Config, error) {
	_, ctl, ok, err := cfg.Listeners()
	if err != nil || !ok {
		return nil, nil, err
	}
	proto, defaulted, err := cfg.ProtocolOf(ctl.Name)
	switch {
	case err != nil:
		return nil, nil, err
	case defaulted:
		n.log.Warn("the controller listener is not in listener.security.protocol.map; it is PLAINTEXT: anyone who reaches it can talk Raft to this node. Map it to SSL (e.g. "+ctl.Name+":SSL) to require certificates",
			"listener", ctl.Name)
	}
	switch proto {
	case "PLAINTEXT":
		return nil, nil, nil
	case "SSL":
	default:
		return nil, nil, fmt.Errorf("the controller listener %s is mapped to %s; the controller listener supports PLAINTEXT or SSL (mutual TLS)", ctl.Name, proto)
	}
	s, err := tlsSettings(cfg, ctl.Name, n.log.With("listener", ctl.Name))
	if err != nil {
		return nil, nil, err
	}
	if s.TruststoreLocation == "" && s.TrustCerts == "" {
		return nil, nil, fmt.Errorf("the controller listener %s is SSL: it needs a truststore to check the other nodes' certificates (ssl.truststore.location or listener.name.%s.ssl.truststore.location)", ctl.Name, strings.ToLower(ctl.Name))
	}
	s.ClientAuth = "required"
	st, err := server.NewTLSStore(s)
	if err != nil {
		return nil, nil, fmt.Errorf("controller listener %s: %w", ctl.Name, err)
	}
	if st.PeerCheck, err = controllerPeerCheck(cfg, ctl.Name); err != nil {
		return nil, nil, err
	}
	verifyName := cfg.ListenerGet(ctl.Name, "", "ssl.endpoint.identification.algorithm") == "https"
	client := func(addr string) *tls.Config {
		host, _, _ := net.SplitHostPort(addr)
		return st.ClientConfig(host, verifyName)
	}
	n.log.Info("the controller listener uses mutual TLS", "listener", ctl.Name)
	n.ctlTLS = &namedStore{name: ctl.Name, store: st}
	return st.ServerConfig(), client, nil
}

// certExpiry reports, per TLS listener, when the certificate it serves now
// expires (berth_tls_certificate_expiry_timestamp_seconds{listener}), so an
// alert can fire before a rotation is missed.
type certExpiry struct {
	n    *Node
	desc *prometheus.Desc
}

func newCertExpiry(n *Node) *certExpiry {
	return &certExpiry{n: n, desc: prometheus.NewDesc("berth_tls_certificate_expiry_timestamp_seconds",
		"When the certificate a TLS listener serves now expires (Unix seconds); reloads are seen at the next handshake.",
		[]string{"listener"}, nil)}
}

func (c *certExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *certExpiry) Collect(ch chan<- prometheus.Metric) {
	stores := map[string]*server.TLSStore{}
	for _, l := range c.n.listeners {
		if l.tls != nil {
			stores[l.conf.Name] = l.tls
		}
	}
	if c.n.httpTLS != nil {
		stores["http"] = c.n.httpTLS
	}
	if c.n.ctlTLS != nil {
		stores[c.n.ctlTLS.name] = c.n.ctlTLS.store
	}
	for name, st := range stores {
		if leaf := st.Leaf(); leaf != nil {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()), name)
		}
	}
}

// controllerPeerCheck is what a node's certificate must prove on the
// controller listener beyond its chain: with an authorizer on, that the
// principal it maps to (the controller listener's
// ssl.principal.mapping.rules) is one of super.users, so a client
// certificate from the same CA does not make its holder a quorum member.
// Without an authorizer, any certificate the truststore signed is a node,
// as every principal may do everything then.
func controllerPeerCheck(cfg *config.Config, listener string) (func(*x509.Certificate) error, error) {
	if cfg.Get("authorizer.class.name") == "" {
		return nil, nil
	}
	supers, err := auth.ParseSuperUsers(cfg.Get("super.users"))
	if err != nil {
		return nil, err
	}
	m, err := auth.ParsePrincipalMappingRules(cfg.ListenerGet(listener, "", "ssl.principal.mapping.rules"))
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", listener, err)
	}
	return func(c *x509.Certificate) error {
		p, err := m.Principal(c)
		if err != nil {
			return err
		}
		if !supers[p] {
			return fmt.Errorf("the certificate's principal %s is not in super.users: with an authorizer on, only super users' certificates may join the metadata quorum", p)
		}
		return nil
	}, nil
}

// responseWritten records a Produce response's last two stages.
func (n *Node) responseWritten(key int16, received, replied, written time.Time) {
	if key != 0 {
		return
	}
	st := &n.replicas.Metrics.Stages
	st.Observe(latency.Response, written.Sub(replied))
	st.Observe(latency.Total, written.Sub(received))
}
