package peer

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// DialSASL is Dial followed, when m is not nil, by a SASL exchange with
// m (SaslHandshake v1, SaslAuthenticate), as a broker authenticates to a
// SASL listener of another broker or of itself (Kafka's
// sasl.mechanism.inter.broker.protocol). The connection re-authenticates
// before a request once its session lifetime (KIP-368) is nearly over.
func DialSASL(ctx context.Context, addr, clientID string, dial Dialer, m sasl.Mechanism) (*Conn, error) {
	c, err := DialWith(ctx, addr, clientID, dial)
	if err != nil || m == nil {
		return c, err
	}
	c.mech = m
	if err := c.authenticate(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// saslTimeout bounds one request of a SASL exchange.
const saslTimeout = 10 * time.Second

func (c *Conn) authenticate(ctx context.Context) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, c.mech.Name()
	r, err := c.request(ctx, hs, saslTimeout)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(r.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return fmt.Errorf("SASL handshake with %s (%s): %w", c.Addr, c.mech.Name(), err)
	}
	host, _, _ := net.SplitHostPort(c.Addr)
	session, msg, err := c.mech.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	start := time.Now()
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, msg
		r, err := c.request(ctx, req, saslTimeout)
		if err != nil {
			return err
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			why := ""
			if resp.ErrorMessage != nil {
				why = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("SASL authentication with %s (%s): %w%s", c.Addr, c.mech.Name(), err, why)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			c.expiry = time.Time{}
			if ms := resp.SessionLifetimeMillis; ms > 0 {
				// Re-authenticate a little early: at 90% of the
				// lifetime, less the exchange's own duration.
				life := time.Duration(ms) * time.Millisecond
				c.expiry = start.Add(life * 9 / 10)
			}
			return nil
		}
		msg = next
	}
}
