package server

import (
	"net"
	"time"
)

// Mute stops the read loop from reading this connection's next request
// for d from now (KIP-219: a client over its quota is answered at once,
// with throttle_time_ms, and the broker reads nothing more from it until
// the throttle time has passed). A later mute never shortens an earlier
// one. Safe from any goroutine; a read already under way is not stopped.
func (c *Conn) Mute(d time.Duration) {
	if c == nil || d <= 0 {
		return
	}
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.muteUntil.Load()
		if cur >= until || c.muteUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// MutedUntil is when the connection's mute ends (zero: not muted).
func (c *Conn) MutedUntil() time.Time {
	if u := c.muteUntil.Load(); u > 0 {
		return time.Unix(0, u)
	}
	return time.Time{}
}

// waitMuted holds the read loop while the connection is muted; false when
// the connection closed meanwhile. The wait is the read loop's own: no
// goroutine per request, and responses already queued are still written.
func (c *Conn) waitMuted() bool {
	for {
		u := c.muteUntil.Load()
		if u == 0 {
			return true // never muted: no clock read per frame
		}
		d := time.Until(time.Unix(0, u))
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return false
		}
	}
}

// accept runs Config.Accept for a new connection: false when it was
// refused (and closed).
func (s *Server) accept(nc net.Conn) bool {
	if s.cfg.Accept == nil {
		return true
	}
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		host = nc.RemoteAddr().String()
	}
	wait, refuse := s.cfg.Accept(host)
	if refuse {
		s.Metrics.ConnectionsRefused.Add(1)
		s.log.Debug("connection refused: connection_creation_rate quota", "remote", nc.RemoteAddr())
		nc.Close()
		return false
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			nc.Close()
			return false
		}
	}
	return true
}
