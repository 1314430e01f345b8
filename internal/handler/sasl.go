package handler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/server"
)

// SASLConfig is what SaslHandshake and SaslAuthenticate need: each SASL
// listener's Authenticator (by listener name), the growing delay after a
// failure, KIP-368's session lifetime and the counters.
type SASLConfig struct {
	Listeners map[string]*auth.Authenticator
	Delay     *auth.FailureDelay
	// ReauthMax is connections.max.reauth.ms: the longest session before
	// the client must re-authenticate (KIP-368); 0: sessions never end
	// (an OAUTHBEARER token's exp is then not enforced on the
	// connection, as in Kafka).
	ReauthMax time.Duration
	Metrics   *auth.SASLMetrics
}

// saslConn is a SASL connection's exchange state (server.Conn.SASL),
// touched only by the read loop.
type saslConn struct {
	mech      string       // the handshake's mechanism
	session   auth.Session // the exchange in progress; nil between exchanges
	handshake int16        // the handshake's version
	counted   bool         // the session's failure was already logged and counted
	failed    bool         // authentication failed: the next request closes the connection
}

func saslState(c *server.Conn) *saslConn {
	if st, ok := c.SASL.(*saslConn); ok {
		return st
	}
	st := &saslConn{}
	c.SASL = st
	return st
}

func isSASL(c *server.Conn) bool { return c != nil && strings.HasPrefix(c.Protocol, "SASL_") }

// saslGate is Kafka's rule on a SASL listener: until a connection has
// authenticated it may send only ApiVersions, SaslHandshake and
// SaslAuthenticate; anything else, a request after a failed
// authentication or after the session's lifetime (KIP-368) closes it.
func (b *Broker) saslGate(req *server.Request) error {
	c := req.Conn
	if !isSASL(c) {
		return nil
	}
	st := saslState(c)
	if st.failed {
		return fmt.Errorf("%s after a failed SASL authentication", kmsg.NameForKey(req.Key))
	}
	switch req.Key {
	case 17, 18, 36:
		return nil
	}
	id := c.Identity()
	if id == nil {
		return fmt.Errorf("%s before SASL authentication on listener %s", kmsg.NameForKey(req.Key), c.Listener)
	}
	if !id.Expires.IsZero() && time.Now().After(id.Expires) {
		return fmt.Errorf("%s after the SASL session of %s expired (connections.max.reauth.ms) without re-authentication",
			kmsg.NameForKey(req.Key), id.Principal)
	}
	return nil
}

func (b *Broker) saslAuthenticator(c *server.Conn) *auth.Authenticator {
	if b.SASL == nil || !isSASL(c) {
		return nil
	}
	return b.SASL.Listeners[c.Listener]
}

// stepResult is one step of an exchange, as SaslAuthenticate answers it.
type stepResult struct {
	out      []byte
	done     bool
	lifetime time.Duration // the session's lifetime (KIP-368); 0: unlimited
	fail     *auth.Failure // already logged, audited and counted
	delay    time.Duration // hold the answer this long (a failure)
}

// saslStep runs one step of the connection's exchange.
func (b *Broker) saslStep(c *server.Conn, st *saslConn, msg []byte) stepResult {
	s := st.session
	out, done, err := s.Step(msg)
	if err != nil {
		st.session, st.failed = nil, true
		f, _ := err.(*auth.Failure)
		if f == nil {
			f = &auth.Failure{Reason: err.Error()}
		}
		if st.counted {
			return stepResult{fail: f}
		}
		return stepResult{fail: f, delay: b.saslFailed(c, st.mech, f)}
	}
	if ch, ok := s.(auth.Challenged); ok && ch.Pending() != nil {
		// OAUTHBEARER: the error message now, the failure when the
		// client acknowledges it.
		st.counted = true
		return stepResult{out: out, delay: b.saslFailed(c, st.mech, ch.Pending())}
	}
	if !done {
		return stepResult{out: out}
	}
	st.session = nil
	p := s.Principal()
	if old := c.Identity(); old != nil && old.Mechanism != "" && (old.Principal != p || old.Mechanism != st.mech) {
		// KIP-368: a re-authentication keeps the principal and the
		// mechanism of the first.
		st.failed = true
		f := &auth.Failure{User: p.Name, Reason: fmt.Sprintf("re-authentication as %s with %s on a connection of %s with %s: the principal and mechanism may not change",
			p, st.mech, old.Principal, old.Mechanism)}
		return stepResult{fail: f, delay: b.saslFailed(c, st.mech, f)}
	}
	now := time.Now()
	id := server.Identity{Principal: p, Mechanism: st.mech}
	var lifetime time.Duration
	reauth := b.SASL.ReauthMax
	if a := b.saslAuthenticator(c); a != nil {
		if d, ok := a.Reauth[st.mech]; ok {
			reauth = d
		}
	}
	if reauth > 0 {
		lifetime = reauth
		if exp := s.Expires(); !exp.IsZero() && exp.Sub(now) < lifetime {
			lifetime = max(exp.Sub(now), time.Millisecond)
		}
		id.Expires = now.Add(lifetime)
	}
	c.SetIdentity(id)
	b.SASL.Metrics.Success(st.mech)
	b.Auditor.Audit(auth.Event{
		Time: now, Principal: p, Host: c.Remote, Listener: c.Listener,
		Kind: "authentication", Method: st.mech, Allowed: true,
	})
	b.log.Debug("SASL authentication succeeded", "principal", p.String(), "mechanism", st.mech, "remote", c.Remote)
	return stepResult{out: out, done: true, lifetime: lifetime}
}

// saslFailed logs, audits and counts a failed authentication and returns
// how long to hold its answer.
func (b *Broker) saslFailed(c *server.Conn, mech string, f *auth.Failure) time.Duration {
	now := time.Now()
	b.log.Warn("SASL authentication failed", "principal", auth.User(f.User).String(), "mechanism", mech,
		"remote", c.Remote, "listener", c.Listener, "reason", f.Reason)
	b.SASL.Metrics.Failure(mech)
	b.Auditor.Audit(auth.Event{
		Time: now, Principal: auth.User(f.User), Host: c.Remote, Listener: c.Listener,
		Kind: "authentication", Method: mech, Allowed: false, Error: "SASL_AUTHENTICATION_FAILED",
		Detail: map[string]string{"reason": f.Reason},
	})
	if b.SASL.Delay == nil {
		return 0
	}
	d := b.SASL.Delay.Fail(c.Host(), now)
	// The answer waits d, and so does the next request: one pipelined
	// behind the failure would otherwise close the connection at once
	// and let a guesser skip the delay.
	c.Mute(d)
	return d
}

// after answers resp once d has passed (or the connection closes).
func after(ctx context.Context, d time.Duration, resp kmsg.Response) server.Reply {
	if d <= 0 {
		return now(resp)
	}
	return func() kmsg.Response {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return resp
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// rawSASL serves the unwrapped tokens that follow SaslHandshake v0
// (Kafka's oldest SASL framing, which kafka-python 2.0 still uses): the
// same exchange, the answer a bare token, a failure closing the
// connection after the delay.
func (b *Broker) rawSASL(c *server.Conn, st *saslConn) server.RawHandler {
	return func(frame []byte) ([]byte, error) {
		if st.session == nil {
			return nil, fmt.Errorf("SASL token with no exchange in progress")
		}
		r := b.saslStep(c, st, frame)
		if r.fail != nil {
			sleepCtx(c.Context(), r.delay)
			return nil, r.fail
		}
		if r.done {
			c.SetRaw(nil)
		}
		return r.out, nil
	}
}
