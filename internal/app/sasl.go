package app

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/handler"
	"github.com/berthmq/berth/internal/metadata"
)

// maxAuthFailureDelay caps the growing delay after failed authentications.
const maxAuthFailureDelay = 5 * time.Second

// newSASL builds the SASL configuration of the node's listeners (name →
// security protocol): an Authenticator for each SASL_PLAINTEXT or
// SASL_SSL one, from Kafka's settings as that listener reads them.
// image gives the SCRAM credentials (the metadata image).
func newSASL(cfg *config.Config, listeners map[string]string, image func() *metadata.Image, log *slog.Logger) (*handler.SASLConfig, error) {
	sc := &handler.SASLConfig{
		Listeners: map[string]*auth.Authenticator{},
		Delay: &auth.FailureDelay{
			Base: cfg.Duration("connection.failed.authentication.delay.ms"),
			Max:  maxAuthFailureDelay, Decay: 30 * time.Second,
		},
		ReauthMax: cfg.Duration("connections.max.reauth.ms"),
		Metrics:   &auth.SASLMetrics{},
	}
	if cfg.Get("sasl.jaas.config") != "" {
		return nil, errors.New("sasl.jaas.config: a broker reads it only with its listener and mechanism prefix, as Kafka does: listener.name.<listener>.plain.sasl.jaas.config=...")
	}
	for name, proto := range listeners {
		if !strings.HasPrefix(proto, "SASL_") {
			continue
		}
		a, err := newAuthenticator(cfg, name, image, log)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", name, err)
		}
		sc.Listeners[name] = a
	}
	return sc, nil
}

// scramImage reads SCRAM credentials from the current metadata image.
type scramImage func() *metadata.Image

func (f scramImage) ScramCredential(user, mech string) (auth.ScramCredential, bool) {
	im := f()
	if im == nil {
		return auth.ScramCredential{}, false
	}
	c, ok := im.ScramCredential(user, mech)
	return auth.ScramCredential{Salt: c.Salt, Iterations: int(c.Iterations), StoredKey: c.StoredKey, ServerKey: c.ServerKey}, ok
}

func newAuthenticator(cfg *config.Config, listener string, image func() *metadata.Image, log *slog.Logger) (*auth.Authenticator, error) {
	mechs, err := auth.ParseMechanisms(cfg.ListenerGet(listener, "", "sasl.enabled.mechanisms"))
	if err != nil {
		return nil, err
	}
	if len(mechs) == 0 {
		return nil, errors.New("sasl.enabled.mechanisms is empty: enable PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	}
	a := &auth.Authenticator{Enabled: mechs, Scram: scramImage(image), Secret: make([]byte, 32), Reauth: map[string]time.Duration{}}
	rand.Read(a.Secret)
	for _, m := range mechs {
		v := cfg.ListenerGet(listener, strings.ToLower(m), "connections.max.reauth.ms")
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("connections.max.reauth.ms for %s: %q is not a number of milliseconds", m, v)
		}
		a.Reauth[m] = time.Duration(ms) * time.Millisecond
	}
	if jaas := cfg.ListenerGet(listener, "plain", "sasl.jaas.config"); jaas != "" && a.Enables(auth.MechPlain) {
		if a.Plain, err = auth.PlainUsers(jaas); err != nil {
			return nil, fmt.Errorf("listener.name.%s.plain.sasl.jaas.config: %w", strings.ToLower(listener), err)
		}
	}
	if a.Enables(auth.MechOAuthBearer) {
		get := func(name string) string { return cfg.ListenerGet(listener, "oauthbearer", name) }
		v := &auth.OAuthValidator{
			Issuer:    get("sasl.oauthbearer.expected.issuer"),
			SubClaim:  get("sasl.oauthbearer.sub.claim.name"),
			ClockSkew: time.Duration(cfg.Int("sasl.oauthbearer.clock.skew.seconds")) * time.Second,
		}
		for _, aud := range strings.Split(get("sasl.oauthbearer.expected.audience"), ",") {
			if aud = strings.TrimSpace(aud); aud != "" {
				v.Audience = append(v.Audience, aud)
			}
		}
		if u := get("sasl.oauthbearer.jwks.endpoint.url"); u != "" {
			if v.JWKS, err = auth.NewJWKS(u, cfg.Duration("sasl.oauthbearer.jwks.endpoint.refresh.ms")); err != nil {
				return nil, err
			}
		} else {
			log.Warn("OAUTHBEARER accepts unsecured tokens (alg none): sasl.oauthbearer.jwks.endpoint.url is not set; for development only",
				"listener", listener)
		}
		a.OAuth = v
	}
	return a, nil
}

// image is the current metadata image; nil before the controller opens.
func (n *Node) image() *metadata.Image {
	if n.ctrl == nil {
		return nil
	}
	return n.ctrl.Image()
}

var (
	descAuthSuccesses = prometheus.NewDesc("berth_auth_successes_total", "SASL authentications that succeeded, by mechanism.", []string{"mechanism"}, nil)
	descAuthFailures  = prometheus.NewDesc("berth_auth_failures_total", "SASL authentications that failed (wrong credentials, invalid tokens, malformed exchanges), by mechanism.", []string{"mechanism"}, nil)
)

// saslCollector reports the SASL counters at scrape time: every enabled
// mechanism of every SASL listener, zero until used.
type saslCollector struct{ n *Node }

func (c *saslCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAuthSuccesses
	ch <- descAuthFailures
}

func (c *saslCollector) Collect(ch chan<- prometheus.Metric) {
	sc := c.n.sasl
	if sc == nil {
		return
	}
	ok, failed := sc.Metrics.Snapshot()
	mechs := map[string]bool{}
	for _, a := range sc.Listeners {
		for _, m := range a.Enabled {
			mechs[m] = true
		}
	}
	for m := range ok {
		mechs[m] = true
	}
	for m := range failed {
		mechs[m] = true
	}
	for m := range mechs {
		ch <- prometheus.MustNewConstMetric(descAuthSuccesses, prometheus.CounterValue, float64(ok[m]), m)
		ch <- prometheus.MustNewConstMetric(descAuthFailures, prometheus.CounterValue, float64(failed[m]), m)
	}
}

// interBrokerSASL is how this node authenticates to the SASL listener its
// peers and it itself connect to (replication, coordinator requests, the
// dead-letter writer): Kafka's sasl.mechanism.inter.broker.protocol with
// the username and password options of that mechanism's JAAS config on
// the listener (PlainLoginModule or ScramLoginModule, as Kafka reads
// them). Left at Kafka's default (GSSAPI, not supported), PLAIN is used
// when the listener's PLAIN JAAS config names a username and password;
// without them the node starts with a warning (its own connections will
// be refused). nil for a listener without SASL.
func interBrokerSASL(cfg *config.Config, listener, proto string, log *slog.Logger) (sasl.Mechanism, error) {
	if !strings.HasPrefix(proto, "SASL_") {
		return nil, nil
	}
	const setting = "sasl.mechanism.inter.broker.protocol"
	if cfg.SourceOf(setting) == config.SourceDefault {
		m, err := interBrokerMechanism(cfg, listener, auth.MechPlain)
		if err != nil {
			log.Warn("this broker cannot authenticate to its own SASL listener: replication, transaction markers, share state and dead letters will be refused", "err", err)
		}
		return m, nil
	}
	return interBrokerMechanism(cfg, listener, strings.ToUpper(strings.TrimSpace(cfg.Get(setting))))
}

func interBrokerMechanism(cfg *config.Config, listener, mech string) (sasl.Mechanism, error) {
	const setting = "sasl.mechanism.inter.broker.protocol"
	enabled, _ := auth.ParseMechanisms(cfg.ListenerGet(listener, "", "sasl.enabled.mechanisms"))
	hint := fmt.Sprintf("the broker connects to listener %s itself (replication, coordinators, dead letters): set %s to an enabled mechanism and give its JAAS config a username and password, e.g. listener.name.%s.plain.sasl.jaas.config=%s required username=\"broker\" password=\"...\" user_broker=\"...\";",
		listener, setting, strings.ToLower(listener), auth.PlainLoginModule)
	if !slices.Contains(enabled, mech) {
		return nil, fmt.Errorf("%s=%s is not enabled on listener %s: %s", setting, mech, listener, hint)
	}
	jaas := cfg.ListenerGet(listener, strings.ToLower(mech), "sasl.jaas.config")
	if jaas == "" {
		return nil, fmt.Errorf("no JAAS config for %s on listener %s: %s", mech, listener, hint)
	}
	es, err := auth.ParseJAAS(jaas)
	if err != nil {
		return nil, err
	}
	user, pass := es[0].Options["username"], es[0].Options["password"]
	if user == "" || pass == "" {
		return nil, fmt.Errorf("the %s JAAS config of listener %s has no username and password: %s", mech, listener, hint)
	}
	switch mech {
	case auth.MechPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case auth.MechScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case auth.MechScramSHA512:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%s=%s: the broker's own connections use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", setting, mech)
}
