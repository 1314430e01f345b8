// Package server accepts Kafka protocol connections: framing, request
// headers, decoding with kmsg, ordered responses and memory bounds. It holds
// no cluster state; every request goes to a Handler.
//
// Each connection has a read loop and a write loop. The read loop reads a
// frame, decodes it and calls the Handler in request order; the Handler does
// the ordered part of the work at once (an append, say) and returns a
// Reply that the write loop resolves, also in order (waiting for an fsync or
// for long-poll Fetch data happens there, so other connections never wait).
package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
)

// Reply produces a response once it is ready. It runs on the connection's
// write loop; nil means no response (Produce with acks=0).
type Reply func() kmsg.Response

// Request is one decoded request.
type Request struct {
	Conn          *Conn
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
	Body          kmsg.Request
	// Received is when the request's last byte was read.
	Received time.Time
}

// Handler serves requests.
type Handler interface {
	// Supported reports the version range served for an API key; ok=false
	// for keys not served.
	Supported(key int16) (min, max int16, ok bool)
	// Handle serves one request. A returned error closes the connection.
	Handle(ctx context.Context, req *Request) (Reply, error)
}

// RequestMaker is implemented by a Handler that serves API keys kmsg
// does not know (Berth's extensions): NewRequest returns an empty request
// for key, nil for an unknown one; ExtensionKeys lists those keys.
type RequestMaker interface {
	NewRequest(key int16) kmsg.Request
	ExtensionKeys() []int16
}

// Config bounds a server.
type Config struct {
	MaxRequestBytes    int32         // socket.request.max.bytes
	QueuedMaxBytes     int64         // queued.max.request.bytes, across connections
	MaxInflightPerConn int           // responses queued on one connection before its reader waits
	IdleTimeout        time.Duration // connections.max.idle.ms
	Logger             *slog.Logger
	// Listener is the listener's name (PLAINTEXT, or a named listener of
	// listeners=) and Protocol its security protocol (PLAINTEXT, SSL,
	// SASL_PLAINTEXT, SASL_SSL; listener.security.protocol.map). Empty:
	// PLAINTEXT.
	Listener string
	Protocol string
	// Accept, when set, is asked about every new connection by its
	// client's IP address (quota.go): a wait before serving it (the
	// broker-wide connection rate) or refuse to close it at once (the
	// ip's connection_creation_rate quota).
	Accept func(host string) (wait time.Duration, refuse bool)
	// UnauthMaxRequestBytes bounds a frame on a SASL listener before the
	// connection authenticated (sasl.server.max.receive.size); 0: no
	// bound beyond MaxRequestBytes.
	UnauthMaxRequestBytes int32

	// TLS, when set, wraps every accepted connection in TLS (SSL and
	// SASL_SSL listeners); the handshake runs on the connection's read
	// goroutine. TLSIdentity, when set, gives a connection whose client
	// sent a certificate its identity (ssl.principal.mapping.rules); an
	// error refuses the connection.
	TLS         *tls.Config
	TLSIdentity func(*x509.Certificate) (Identity, error)

	// Written, when set, is told of every response written: its API key,
	// when its request's last byte was read, when its reply was ready
	// (the handler's deferred part returned) and when its bytes were
	// handed to the socket (the produce stage histograms).
	Written func(key int16, received, replied, written time.Time)
}

// Server accepts connections on one listener.
type Server struct {
	cfg     Config
	h       Handler
	ln      net.Listener
	mem     *byteSem
	log     *slog.Logger
	wg      sync.WaitGroup
	mu      sync.Mutex // guards conns and closed
	conns   map[*Conn]struct{}
	closed  bool
	connSeq atomic.Uint64
	ctx     context.Context
	cancel  context.CancelFunc
	Metrics Metrics
}

// Metrics counts what the server did; read with atomic loads.
type Metrics struct {
	ConnectionsOpen  atomic.Int64
	ConnectionsTotal atomic.Int64
	Requests         atomic.Int64
	BadFrames        atomic.Int64
	// ConnectionsRefused counts connections closed by Config.Accept.
	ConnectionsRefused atomic.Int64

	// TLSHandshakeFailures counts connections closed in the handshake.
	TLSHandshakeFailures atomic.Int64
}

// New makes a server for an already-bound listener.
func New(ln net.Listener, h Handler, cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxInflightPerConn <= 0 {
		cfg.MaxInflightPerConn = 100
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.QueuedMaxBytes < int64(cfg.MaxRequestBytes) {
		cfg.QueuedMaxBytes = int64(cfg.MaxRequestBytes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg: cfg, h: h, ln: ln, log: cfg.Logger,
		mem:   newByteSem(cfg.QueuedMaxBytes),
		conns: map[*Conn]struct{}{},
		ctx:   ctx, cancel: cancel,
	}
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts until Close. It returns nil after Close.
func (s *Server) Serve() error {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		if !s.accept(nc) {
			continue
		}
		var batch *batchConn
		if s.cfg.TLS != nil {
			batch = &batchConn{Conn: nc}
			nc = tls.Server(batch, s.cfg.TLS) // no I/O until the read loop's handshake
		}
		c := s.newConn(nc)
		c.batch = batch
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(2)
		s.mu.Unlock()
		s.Metrics.ConnectionsOpen.Add(1)
		s.Metrics.ConnectionsTotal.Add(1)
		go c.readLoop()
		go c.writeLoop()
	}
}

// Close stops accepting, closes every connection and waits for their loops.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.cancel()
	s.mem.close()
	for _, c := range conns {
		c.close()
	}
	s.wg.Wait()
	return err
}

// Conn is one client connection.
type Conn struct {
	s      *Server
	nc     net.Conn
	id     uint64
	Remote string
	ctx    context.Context
	cancel context.CancelFunc
	out    chan pending
	once   sync.Once
	// Value is free for the handler to keep per-connection state in; only
	// the read loop touches it.
	Value any
	// Listener and Protocol are the server's (Config.Listener/Protocol).
	Listener string
	Protocol string
	// principal is who the connection acts as; nil until set (Principal
	// answers User:ANONYMOUS).
	principal atomic.Pointer[Identity]
	// afterEncode runs after the current response is encoded; write loop only.
	afterEncode []func()
	// muteUntil (unix nanoseconds) is when the read loop may read the
	// next request (Mute, quota.go).
	muteUntil atomic.Int64

	// batch is under a TLS connection (nil on plain TCP): large responses
	// leave in few writes.
	batch *batchConn

	// SASL is the handler's SASL exchange state; read loop only.
	SASL any
	// raw serves frames that are not Kafka requests (SetRaw); read loop only.
	raw RawHandler
}

// RawHandler serves one frame that is not a Kafka request: a SASL token
// after SaslHandshake v0, which Kafka's oldest clients send unwrapped. It
// returns the token to answer (sent size-prefixed, no header); an error
// closes the connection.
type RawHandler func(frame []byte) ([]byte, error)

// SetRaw makes the connection's next frames raw tokens served by h until
// SetRaw(nil). Called from Handle (the read loop).
func (c *Conn) SetRaw(h RawHandler) { c.raw = h }

type pending struct {
	key, version int16
	corr         int32
	flexible     bool
	reply        Reply
	release      int64
	raw          []byte // a raw token to write (SetRaw), when reply is nil
	received     time.Time
}

func (s *Server) newConn(nc net.Conn) *Conn {
	ctx, cancel := context.WithCancel(s.ctx)
	proto := s.cfg.Protocol
	if proto == "" {
		proto = "PLAINTEXT"
	}
	return &Conn{
		s: s, nc: nc, id: s.connSeq.Add(1), Remote: nc.RemoteAddr().String(),
		Listener: s.cfg.Listener, Protocol: proto,
		ctx: ctx, cancel: cancel,
		out: make(chan pending, s.cfg.MaxInflightPerConn),
	}
}

// Context is cancelled when the connection closes.
func (c *Conn) Context() context.Context { return c.ctx }

// ID is a process-unique connection number.
func (c *Conn) ID() uint64 { return c.id }

// Identity is who a connection acts as once authenticated.
type Identity struct {
	Principal auth.Principal
	// Mechanism is the SASL mechanism that proved it ("" for a TLS
	// certificate or no authentication).
	Mechanism string
	// Expires is when the credential ends (KIP-368 re-authentication);
	// zero: never.
	Expires time.Time
}

// Principal is who the connection acts as: User:ANONYMOUS until
// SetIdentity.
func (c *Conn) Principal() auth.Principal {
	if c == nil {
		return auth.Anonymous
	}
	if id := c.principal.Load(); id != nil {
		return id.Principal
	}
	return auth.Anonymous
}

// Identity is the connection's identity; nil before SetIdentity.
func (c *Conn) Identity() *Identity { return c.principal.Load() }

// SetIdentity records who the connection acts as (after a SASL exchange,
// or from a client certificate).
func (c *Conn) SetIdentity(id Identity) { c.principal.Store(&id) }

// unauthenticated reports a connection on a SASL listener that has not
// authenticated yet.
func (c *Conn) unauthenticated() bool {
	return strings.HasPrefix(c.Protocol, "SASL_") && c.principal.Load() == nil
}

// Host is the client's IP address without the port, as ACLs name hosts.
func (c *Conn) Host() string {
	if c == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(c.Remote); err == nil {
		return h
	}
	return c.Remote
}

func (c *Conn) close() {
	c.once.Do(func() {
		c.cancel()
		c.nc.Close()
	})
}

func (c *Conn) readLoop() {
	s := c.s
	defer s.wg.Done()
	defer close(c.out) // the write loop drains and exits
	defer c.close()
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := c.handshake(tc); err != nil {
			s.Metrics.TLSHandshakeFailures.Add(1)
			s.log.Warn("closing connection: TLS handshake failed", "remote", c.Remote, "err", err) // the logger names the listener
			return
		}
	}
	br := bufio.NewReaderSize(c.nc, 8<<10)
	var sizeBuf [4]byte
	for {
		if !c.waitMuted() {
			return
		}
		if s.cfg.IdleTimeout > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		}
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && c.ctx.Err() == nil {
				s.log.Debug("connection read ended", "remote", c.Remote, "err", err)
			}
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if lim := s.cfg.UnauthMaxRequestBytes; lim > 0 && size > lim && c.unauthenticated() {
			s.Metrics.BadFrames.Add(1)
			s.log.Warn("closing connection: request frame too large before SASL authentication (sasl.server.max.receive.size)",
				"remote", c.Remote, "size", size, "max", lim)
			return
		}
		if (size < 8 && (c.raw == nil || size < 0)) || size > s.cfg.MaxRequestBytes {
			s.Metrics.BadFrames.Add(1)
			s.log.Warn("closing connection: request frame size out of bounds (socket.request.max.bytes)",
				"remote", c.Remote, "size", size, "max", s.cfg.MaxRequestBytes)
			return
		}
		if err := s.mem.acquire(c.ctx, int64(size)); err != nil {
			return
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(br, body); err != nil {
			s.mem.release(int64(size))
			return
		}
		_ = c.nc.SetReadDeadline(time.Time{})
		received := time.Now()
		var p pending
		var ok bool
		if c.raw != nil {
			p, ok = c.serveRaw(body)
		} else {
			p, ok = c.serveOne(body, received)
		}
		p.received = received
		s.mem.release(int64(size))
		if !ok {
			return
		}
		if p.reply == nil && p.corr == 0 && p.key == -1 {
			continue
		}
		select {
		case c.out <- p:
		case <-c.ctx.Done():
			return
		}
	}
}

// serveOne decodes and handles one frame. ok=false closes the connection.
func (c *Conn) serveOne(body []byte, received time.Time) (pending, bool) {
	s := c.s
	key := int16(binary.BigEndian.Uint16(body[0:]))
	version := int16(binary.BigEndian.Uint16(body[2:]))
	corr := int32(binary.BigEndian.Uint32(body[4:]))
	p := pending{key: key, version: version, corr: corr}
	s.Metrics.Requests.Add(1)

	min, max, served := s.h.Supported(key)
	kreq := kmsg.RequestForKey(key)
	if rm, ok := s.h.(RequestMaker); ok && kreq == nil { // Berth's own API keys, which kmsg does not know
		kreq = rm.NewRequest(key)
	}
	if !served || kreq == nil {
		s.Metrics.BadFrames.Add(1)
		s.log.Warn("closing connection: unknown or unserved API key", "remote", c.Remote, "key", key, "version", version)
		return p, false
	}
	if version < min || version > max {
		if key == 18 { // ApiVersions: answer v0 with UNSUPPORTED_VERSION and our ranges (KIP-511)
			p.version = 0
			p.reply = func() kmsg.Response { return s.unsupportedApiVersions() }
			return p, true
		}
		s.Metrics.BadFrames.Add(1)
		s.log.Warn("closing connection: unsupported API version", "remote", c.Remote,
			"key", key, "api", kmsg.NameForKey(key), "version", version, "min", min, "max", max)
		return p, false
	}
	kreq.SetVersion(version)
	p.flexible = kreq.IsFlexible()
	rest := body[8:]
	// client id: nullable int16-length string
	if len(rest) < 2 {
		return c.bad(p, "truncated header")
	}
	cl := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	var clientID string
	if cl > 0 {
		if int(cl) > len(rest) {
			return c.bad(p, "client id overruns frame")
		}
		clientID = string(rest[:cl])
		rest = rest[cl:]
	}
	if p.flexible {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return c.bad(p, "bad header tags")
		}
	}
	if err := kreq.ReadFrom(rest); err != nil {
		if key == 18 {
			// A newer client's ApiVersions we cannot parse still gets our ranges.
			p.reply = func() kmsg.Response { return s.unsupportedApiVersions() }
			p.version, p.flexible = 0, false
			return p, true
		}
		return c.bad(p, "cannot decode "+kmsg.NameForKey(key)+": "+err.Error())
	}
	req := &Request{Conn: c, Key: key, Version: version, CorrelationID: corr, ClientID: clientID, Body: kreq, Received: received}
	reply, err := s.h.Handle(c.ctx, req)
	if err != nil {
		s.log.Warn("closing connection", "remote", c.Remote, "api", kmsg.NameForKey(key), "err", err)
		return p, false
	}
	if reply == nil { // no response at all (acks=0)
		return pending{key: -1}, true
	}
	p.reply = reply
	return p, true
}

// serveRaw answers one raw token (SetRaw). ok=false closes the connection.
func (c *Conn) serveRaw(body []byte) (pending, bool) {
	out, err := c.raw(body)
	if err != nil {
		c.s.log.Warn("closing connection", "remote", c.Remote, "err", err)
		return pending{}, false
	}
	if out == nil {
		out = []byte{}
	}
	return pending{key: -2, raw: out}, true
}

func (c *Conn) bad(p pending, why string) (pending, bool) {
	c.s.Metrics.BadFrames.Add(1)
	c.s.log.Warn("closing connection: malformed request", "remote", c.Remote,
		"api", kmsg.NameForKey(p.key), "version", p.version, "why", why)
	return p, false
}

func (s *Server) unsupportedApiVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = 35 // UNSUPPORTED_VERSION
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		if min, max, ok := s.h.Supported(k); ok {
			resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: min, MaxVersion: max})
		}
	}
	if rm, ok := s.h.(RequestMaker); ok { // kgo takes this list as the broker's, extensions included
		for _, k := range rm.ExtensionKeys() {
			if min, max, ok := s.h.Supported(k); ok {
				resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: min, MaxVersion: max})
			}
		}
	}
	return resp
}

func skipTags(b []byte) ([]byte, error) {
	n, ln := binary.Uvarint(b)
	if ln <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[ln:]
	for i := uint64(0); i < n; i++ {
		_, l1 := binary.Uvarint(b)
		if l1 <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[l1:]
		sz, l2 := binary.Uvarint(b)
		if l2 <= 0 || uint64(len(b)-l2) < sz {
			return nil, errors.New("bad tag size")
		}
		b = b[l2+int(sz):]
	}
	return b, nil
}

func (c *Conn) writeLoop() {
	s := c.s
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.Metrics.ConnectionsOpen.Add(-1)
	}()
	bw := bufio.NewWriterSize(c.nc, 8<<10)
	broken := false
	for p := range c.out {
		if broken {
			continue
		}
		if p.raw != nil {
			buf := binary.BigEndian.AppendUint32(nil, uint32(len(p.raw)))
			if _, err := bw.Write(append(buf, p.raw...)); err != nil || (len(c.out) == 0 && bw.Flush() != nil) {
				broken = true
				c.close()
			}
			continue
		}
		if bw.Buffered() > 0 {
			// The reply may block (a produce waiting for its fsync, a
			// long-polling fetch): a response already encoded must not
			// wait behind it (a pipelining producer's previous ack would
			// otherwise wait for the next request's fsync).
			if err := bw.Flush(); err != nil {
				broken = true
				c.close()
				continue
			}
		}
		resp := p.reply()
		if resp == nil {
			c.runAfterEncode()
			continue
		}
		var replied time.Time
		if s.cfg.Written != nil {
			replied = time.Now()
		}
		resp.SetVersion(p.version)
		bp := respBufs.Get().(*[]byte)
		buf := (*bp)[:0]
		buf = append(buf, 0, 0, 0, 0)
		buf = binary.BigEndian.AppendUint32(buf, uint32(p.corr))
		if p.flexible && p.key != 18 { // ApiVersions responses always use header v0
			buf = append(buf, 0)
		}
		var err error
		if vr, ok := resp.(Vectored); ok {
			if vec, ok := vr.AppendVector(buf); ok {
				err = c.writeVector(bw, vec)
				c.runAfterEncode()
				respBufs.Put(bp) // written: its bytes may be reused now
				if err != nil {
					broken = true
					c.close()
				} else if s.cfg.Written != nil {
					s.cfg.Written(p.key, p.received, replied, time.Now())
				}
				continue
			}
		}
		buf = resp.AppendTo(buf)
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		c.runAfterEncode()
		_, err = bw.Write(buf)
		if cap(buf) <= maxPooledResp {
			*bp = buf
			respBufs.Put(bp)
		}
		if err != nil {
			broken = true
			c.close()
			continue
		}
		if len(c.out) == 0 {
			if err := bw.Flush(); err != nil {
				broken = true
				c.close()
				continue
			}
		}
		if s.cfg.Written != nil {
			s.cfg.Written(p.key, p.received, replied, time.Now())
		}
	}
	_ = bw.Flush()
	c.close()
}

// respBufs holds response encoding buffers shared by all connections, so
// an idle connection holds none and a busy one does not regrow a large
// buffer for every Fetch response.
var respBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxPooledResp is the largest buffer returned to respBufs.
const maxPooledResp = 32 << 20

// Vectored is a response that can encode itself as several buffers, so
// large byte fields (Fetch record batches) are written with writev
// instead of being copied into one buffer. AppendVector returns false to
// fall back to AppendTo.
type Vectored interface {
	AppendVector(hdr []byte) (net.Buffers, bool)
}

// writeVector writes a response given as buffers, the first of which
// starts with the 4-byte size placeholder.
func (c *Conn) writeVector(bw *bufio.Writer, vec net.Buffers) error {
	n := 0
	for _, b := range vec {
		n += len(b)
	}
	binary.BigEndian.PutUint32(vec[0], uint32(n-4))
	if n < 64<<10 {
		for _, b := range vec {
			if _, err := bw.Write(b); err != nil {
				return err
			}
		}
		if len(c.out) == 0 {
			return bw.Flush()
		}
		return nil
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if c.batch != nil {
		c.batch.begin()
		_, err := vec.WriteTo(c.nc)
		if e := c.batch.end(); err == nil {
			err = e
		}
		return err
	}
	_, err := vec.WriteTo(c.nc)
	return err
}

func (c *Conn) runAfterEncode() {
	for _, fn := range c.afterEncode {
		fn()
	}
	clear(c.afterEncode)
	c.afterEncode = c.afterEncode[:0]
}

// byteSem bounds bytes held across connections.
type byteSem struct {
	mu     sync.Mutex
	cond   *sync.Cond
	avail  int64
	closed bool
}

func newByteSem(n int64) *byteSem {
	b := &byteSem{avail: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *byteSem) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.avail >= n {
		b.avail -= n
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	for b.avail < n {
		if b.closed || ctx.Err() != nil {
			return fmt.Errorf("server closing")
		}
		b.cond.Wait()
	}
	b.avail -= n
	return nil
}

func (b *byteSem) release(n int64) {
	b.mu.Lock()
	b.avail += n
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *byteSem) close() {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
}
