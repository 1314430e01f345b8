package worker

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// memberID learns the share-group member ID that kgo made up for the
// worker's client from the ShareGroupHeartbeat requests the client
// writes: kgo does not expose a share member's ID, and the broker needs
// it to accept an annotation (BerthAnnotateShareRecords names the
// member, as ShareAcknowledge does).
type memberID struct {
	group string
	mu    sync.Mutex
	id    string
}

func (m *memberID) get() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id
}

// dialer wraps dial (nil: a plain TCP dial) so that every connection's
// writes pass through inspect.
func (m *memberID) dialer(dial func(ctx context.Context, network, host string) (net.Conn, error)) func(ctx context.Context, network, host string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := dial(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &sniffConn{Conn: c, m: m}, nil
	}
}

type sniffConn struct {
	net.Conn
	m *memberID
}

// Write passes b on after a look at it: kgo writes each request frame
// whole in one call (over TLS, this is the plaintext).
func (c *sniffConn) Write(b []byte) (int, error) {
	c.m.inspect(b)
	return c.Conn.Write(b)
}

const shareGroupHeartbeatKey = 76

// inspect reads a ShareGroupHeartbeat request frame (v1+: flexible, so a
// v2 request header): size, key, version, correlation id, client id
// (int16-length, nullable), header tags, then GroupId and MemberId
// (compact strings).
func (m *memberID) inspect(b []byte) {
	if len(b) < 14 || binary.BigEndian.Uint16(b[4:]) != shareGroupHeartbeatKey {
		return
	}
	b = b[12:]
	if n := int16(binary.BigEndian.Uint16(b)); n > 0 {
		if int(n)+2 > len(b) {
			return
		}
		b = b[2+int(n):]
	} else {
		b = b[2:]
	}
	tags, n := binary.Uvarint(b)
	if n <= 0 || tags != 0 { // kgo sends no header tags
		return
	}
	b = b[n:]
	str := func() (string, bool) {
		l, n := binary.Uvarint(b)
		if n <= 0 || l == 0 || uint64(len(b)-n) < l-1 {
			return "", false
		}
		s := string(b[n : n+int(l-1)])
		b = b[n+int(l-1):]
		return s, true
	}
	group, ok := str()
	if !ok || group != m.group {
		return
	}
	id, ok := str()
	if !ok || id == "" {
		return
	}
	m.mu.Lock()
	m.id = id
	m.mu.Unlock()
}
