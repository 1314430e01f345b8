package handler

// SaslAuthenticate, versions 0-2: one step of the exchange SaslHandshake
// v1 began. A failure answers SASL_AUTHENTICATION_FAILED with a message
// after a delay that grows with failures from the client's address
// (connection.failed.authentication.delay.ms), and the connection's next
// request closes it. An OAUTHBEARER token that does not validate is first
// answered with RFC 7628's error message ({"status":"invalid_token"}),
// then, when the client acknowledges it, with the failure. v1+ answers
// SessionLifetimeMs (KIP-368): connections.max.reauth.ms, or less when
// the token expires sooner; 0 when sessions do not end.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(36, 0, 2, (*Broker).saslAuthenticate) }

func (b *Broker) saslAuthenticate(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.SASLAuthenticateRequest)
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	st := saslState(req.Conn)
	if b.saslAuthenticator(req.Conn) == nil || st.session == nil || st.handshake == 0 {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake v1 before it"
		resp.ErrorMessage = &msg
		st.failed = true
		return now(resp), nil
	}
	res := b.saslStep(req.Conn, st, r.SASLAuthBytes)
	if res.fail != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed: " + res.fail.Reason
		resp.ErrorMessage = &msg
		return after(ctx, res.delay, resp), nil
	}
	resp.SASLAuthBytes = res.out
	resp.SessionLifetimeMillis = res.lifetime.Milliseconds()
	return after(ctx, res.delay, resp), nil
}
