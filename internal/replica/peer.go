package replica

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
)

// peerConn is a broker-to-broker Kafka connection: one request at a time,
// encoded and decoded with kmsg. The replica fetcher uses it to send Fetch
// and OffsetForLeaderEpoch to partition leaders.
type peerConn struct {
	addr string
	conn net.Conn
	r    *bufio.Reader
	fmt  *kmsg.RequestFormatter
	corr int32
	buf  []byte
}

// maxPeerResponse bounds a response from another broker.
const maxPeerResponse = 256 << 20

func dialPeer(ctx context.Context, addr, clientID string) (*peerConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &peerConn{
		addr: addr,
		conn: c,
		r:    bufio.NewReaderSize(c, 64<<10),
		fmt:  kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
	}, nil
}

func (c *peerConn) close() { c.conn.Close() }

// request sends req (its version already set) and reads the response.
// The connection is unusable after an error; close it.
func (c *peerConn) request(ctx context.Context, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
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
		return nil, fmt.Errorf("sending %s to %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, fmt.Errorf("reading %s response from %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxPeerResponse {
		return nil, fmt.Errorf("%s response from %s: bad size %d", kmsg.NameForKey(req.Key()), c.addr, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, fmt.Errorf("reading %s response from %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	rd := kbin.Reader{Src: body}
	if corr := rd.Int32(); corr != c.corr {
		return nil, fmt.Errorf("%s response from %s: correlation id %d, want %d", kmsg.NameForKey(req.Key()), c.addr, corr, c.corr)
	}
	if req.IsFlexible() && req.Key() != 18 { // ApiVersions answers with a v0 header
		for n := rd.Uvarint(); n > 0; n-- {
			rd.Uvarint()
			rd.Span(int(rd.Uvarint()))
		}
	}
	if !rd.Ok() {
		return nil, fmt.Errorf("%s response from %s: truncated header", kmsg.NameForKey(req.Key()), c.addr)
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("decoding %s response from %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	return resp, nil
}
