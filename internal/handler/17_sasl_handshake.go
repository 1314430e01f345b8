package handler

// SaslHandshake, versions 0-1. The mechanism must be enabled on the
// connection's listener (listener.name.<l>.sasl.enabled.mechanisms, else
// sasl.enabled.mechanisms). v1 is followed by SaslAuthenticate requests;
// after v0 the client sends the mechanism's tokens unwrapped
// (server.Conn.SetRaw). A re-authentication (KIP-368) must use the
// mechanism the connection authenticated with. On a listener without
// SASL the answer is ILLEGAL_SASL_STATE.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(17, 0, 1, (*Broker).saslHandshake) }

func (b *Broker) saslHandshake(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.SASLHandshakeRequest)
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	a := b.saslAuthenticator(req.Conn)
	if a == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return now(resp), nil
	}
	resp.SupportedMechanisms = append([]string(nil), a.Enabled...)
	st := saslState(req.Conn)
	if st.session != nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		st.failed = true
		return now(resp), nil
	}
	if id := req.Conn.Identity(); id != nil && id.Mechanism != "" && id.Mechanism != r.Mechanism {
		resp.ErrorCode = kerr.IllegalSaslState.Code // Kafka: re-authentication must keep the mechanism
		st.failed = true
		return now(resp), nil
	}
	s, ok := a.Start(r.Mechanism)
	if !ok {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		st.failed = true
		b.log.Warn("SASL handshake with a mechanism not enabled", "mechanism", r.Mechanism,
			"remote", req.Conn.Remote, "listener", req.Conn.Listener, "enabled", a.Enabled)
		return now(resp), nil
	}
	st.mech, st.session, st.handshake, st.counted = r.Mechanism, s, r.Version, false
	if r.Version == 0 {
		req.Conn.SetRaw(b.rawSASL(req.Conn, st))
	}
	return now(resp), nil
}
