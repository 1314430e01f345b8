// Package peer is Berth's broker-to-broker Kafka client: one connection, one
// request at a time, encoded and decoded with kmsg. Followers fetch from
// leaders with it and a shutting-down broker asks the active controller to
// move its leaderships away.
package peer

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Conn is a connection to another broker's Kafka listener. It is not safe
// for concurrent use.
type Conn struct {
	Addr string
	conn net.Conn
	r    *bufio.Reader
	fmt  *kmsg.RequestFormatter
	corr int32
	buf  []byte

	mech   sasl.Mechanism // DialSASL's; nil: no SASL
	expiry time.Time      // when the SASL session needs renewing; zero: never
}

// maxResponse bounds a response from another broker.
const maxResponse = 256 << 20

// Dialer opens the connection to another broker's listener: over TLS
// with this node's certificate when the inter-broker listener is SSL
// (nil: plain TCP).
type Dialer func(ctx context.Context, addr string) (net.Conn, error)

// Dial connects to addr; clientID names this broker in the peer's logs.
func Dial(ctx context.Context, addr, clientID string) (*Conn, error) {
	return DialWith(ctx, addr, clientID, nil)
}

// DialWith connects to addr through dial (nil: plain TCP).
func DialWith(ctx context.Context, addr, clientID string, dial Dialer) (*Conn, error) {
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &Conn{
		Addr: addr,
		conn: c,
		r:    bufio.NewReaderSize(c, 64<<10),
		fmt:  kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
	}, nil
}

// Close closes the connection.
func (c *Conn) Close() { c.conn.Close() }

// Request sends req (its version already set) and reads the response,
// waiting at most timeout (or until ctx ends). The connection is unusable
// after an error; close it.
func (c *Conn) Request(ctx context.Context, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	if c.mech != nil && !c.expiry.IsZero() && time.Now().After(c.expiry) {
		if err := c.authenticate(ctx); err != nil {
			return nil, err
		}
	}
	return c.request(ctx, req, timeout)
}

func (c *Conn) request(ctx context.Context, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c.corr++
	c.buf = c.fmt.AppendRequest(c.buf[:0], req, c.corr)
	if _, err := c.conn.Write(c.buf); err != nil {
		return nil, fmt.Errorf("sending %s to %s: %w", kmsg.NameForKey(req.Key()), c.Addr, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, fmt.Errorf("reading %s response from %s: %w", kmsg.NameForKey(req.Key()), c.Addr, err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxResponse {
		return nil, fmt.Errorf("%s response from %s: bad size %d", kmsg.NameForKey(req.Key()), c.Addr, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, fmt.Errorf("reading %s response from %s: %w", kmsg.NameForKey(req.Key()), c.Addr, err)
	}
	rd := kbin.Reader{Src: body}
	if corr := rd.Int32(); corr != c.corr {
		return nil, fmt.Errorf("%s response from %s: correlation id %d, want %d", kmsg.NameForKey(req.Key()), c.Addr, corr, c.corr)
	}
	if req.IsFlexible() && req.Key() != 18 { // ApiVersions answers with a v0 header
		for n := rd.Uvarint(); n > 0; n-- {
			rd.Uvarint()
			rd.Span(int(rd.Uvarint()))
		}
	}
	if !rd.Ok() {
		return nil, fmt.Errorf("%s response from %s: truncated header", kmsg.NameForKey(req.Key()), c.Addr)
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("decoding %s response from %s: %w", kmsg.NameForKey(req.Key()), c.Addr, err)
	}
	return resp, nil
}
