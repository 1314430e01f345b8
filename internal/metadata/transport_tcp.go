package metadata

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TCPTransport carries Raft messages over TCP (docs/format/metadata.md
// "Raft transport"). Every node listens on its controller address; for
// each peer it keeps one outgoing connection, written by one goroutine from
// a bounded queue, so traffic between two nodes flows over two
// connections, one per direction. Incoming connections are only read.
//
// Send never blocks: a full queue drops the message (Raft retries). A
// connection that fails is redialled with exponential backoff; the
// messages queued meanwhile are dropped and the peer reported unreachable,
// so Raft slows down probing it. A MsgSnap is reported finished once it is
// written to the socket, failed if it is dropped or the write fails.
//
// Ownership: t.mu guards peers and conns; each peer's queue is drained by
// its own writer goroutine, which alone owns that peer's connection.
type TCPTransport struct {
	cfg TCPConfig
	log *slog.Logger
	ln  net.Listener

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	recv      atomic.Pointer[receiverBox]
	clusterID atomic.Pointer[string]
	drop      atomic.Pointer[func(to uint64) bool]

	mu     sync.Mutex
	peers  map[uint64]*tcpPeer
	conns  map[net.Conn]struct{} // accepted connections
	closed bool
}

type receiverBox struct{ r Receiver }

// TCPConfig configures a TCPTransport.
type TCPConfig struct {
	// NodeID is this node's Raft id; it is sent in the handshake, and a
	// connection meant for another id is refused.
	NodeID uint64
	// Listener, when set, is used as is; otherwise Addr is listened on.
	Listener net.Listener
	// Addr is the host:port to listen on when Listener is nil (port 0
	// picks a free port).
	Addr string
	// ClusterID is the cluster id sent in the handshake; "" until known
	// (see SetClusterID). Two nodes that both know a cluster id refuse to
	// talk when the ids differ.
	ClusterID string
	// QueueLen bounds the messages waiting for one peer (default 1024).
	QueueLen int
	// DialTimeout bounds a connection attempt and its handshake (default
	// 2s); WriteTimeout bounds one frame's write (default 10s).
	DialTimeout  time.Duration
	WriteTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts (defaults 50ms and 2s).
	MinBackoff, MaxBackoff time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger

	// ServerTLS, when set, makes the controller listener TLS: an incoming
	// connection must finish a TLS handshake (with a client certificate
	// when ServerTLS requires one: mutual TLS) before the Raft handshake.
	// ClientTLS, when set, gives the TLS config to dial a peer's address
	// with (this node's certificate, the trust store).
	ServerTLS *tls.Config
	ClientTLS func(addr string) *tls.Config
}

// Wire constants of the Raft transport.
const (
	tcpMagic   = "BERTHRFT"
	tcpVersion = 1

	frameRaft = 1 // payload: raftpb.Message (protobuf)
	frameJoin = 2 // payload: uint64 id, uint16 length, address

	// maxIncomingConns bounds the connections a node accepts at once
	// (each peer keeps one).
	maxIncomingConns = 1024

	// MaxFrameBytes bounds one transport frame, so one MsgSnap carries a
	// metadata image of at most this size.
	MaxFrameBytes = 256 << 20
)

// ErrTransportClosed is returned by a closed TCPTransport.
var ErrTransportClosed = errors.New("metadata: raft transport closed")

// NewTCPTransport listens on cfg.Addr (or takes cfg.Listener). Nothing is
// accepted or sent until Start.
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	if cfg.NodeID == 0 {
		return nil, errors.New("metadata: TCPConfig.NodeID must be > 0")
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 1024
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(2*time.Second, cfg.MinBackoff)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("metadata: controller listener %s: %w (is another node using this address?)", cfg.Addr, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCPTransport{
		cfg: cfg, log: cfg.Logger, ln: ln, ctx: ctx, cancel: cancel,
		peers: map[uint64]*tcpPeer{}, conns: map[net.Conn]struct{}{},
	}
	t.SetClusterID(cfg.ClusterID)
	return t, nil
}

// Addr is the bound listener address.
func (t *TCPTransport) Addr() net.Addr { return t.ln.Addr() }

// SetClusterID sets the cluster id sent and checked in handshakes.
func (t *TCPTransport) SetClusterID(id string) { t.clusterID.Store(&id) }

// SetDropFilter makes Send silently drop every message (and join request)
// for which drop(to) is true, as a cut network link would; nil restores
// delivery. A dropped MsgSnap is reported failed. For tests.
func (t *TCPTransport) SetDropFilter(drop func(to uint64) bool) {
	if drop == nil {
		t.drop.Store(nil)
		return
	}
	t.drop.Store(&drop)
}

// Start accepts connections and delivers what arrives to r.
func (t *TCPTransport) Start(r Receiver) {
	t.recv.Store(&receiverBox{r})
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.wg.Go(t.accept)
}

func (t *TCPTransport) receiver() Receiver {
	if b := t.recv.Load(); b != nil {
		return b.r
	}
	return nil
}

func (t *TCPTransport) reportUnreachable(id uint64) {
	if r := t.receiver(); r != nil {
		r.ReportUnreachable(id)
	}
}

func (t *TCPTransport) reportSnapshot(id uint64, st raft.SnapshotStatus) {
	if r := t.receiver(); r != nil {
		r.ReportSnapshot(id, st)
	}
}

// Close stops accepting, closes every connection and waits for the
// transport's goroutines. Idempotent.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.cancel()
	err := t.ln.Close()
	for c := range t.conns {
		c.Close()
	}
	for id, p := range t.peers {
		p.stop()
		delete(t.peers, id)
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

// SetPeers implements Transport.
func (t *TCPTransport) SetPeers(peers map[uint64]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for id, p := range t.peers {
		if addr, ok := peers[id]; !ok || addr != p.addr {
			p.stop()
			delete(t.peers, id)
		}
	}
	for id, addr := range peers {
		if id == t.cfg.NodeID || addr == "" || t.peers[id] != nil {
			continue
		}
		p := &tcpPeer{id: id, addr: addr, q: make(chan outItem, t.cfg.QueueLen), stopc: make(chan struct{})}
		t.peers[id] = p
		t.wg.Go(func() { t.runPeer(p) })
	}
}

// Send implements Transport.
func (t *TCPTransport) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		t.enqueue(m.GetTo(), outItem{m: m})
	}
}

// SendJoin implements Transport.
func (t *TCPTransport) SendJoin(to uint64, req JoinRequest) {
	t.enqueue(to, outItem{join: &req})
}

func (t *TCPTransport) enqueue(to uint64, it outItem) {
	isSnap := it.m != nil && it.m.GetType() == pb.MsgSnap
	if d := t.drop.Load(); d != nil && (*d)(to) {
		if isSnap {
			t.reportSnapshot(to, raft.SnapshotFailure)
		}
		return
	}
	t.mu.Lock()
	p := t.peers[to]
	t.mu.Unlock()
	if p != nil {
		select {
		case p.q <- it:
			return
		default: // full: drop, Raft retries
		}
	}
	if it.m != nil {
		t.reportUnreachable(to)
	}
	if isSnap {
		t.reportSnapshot(to, raft.SnapshotFailure)
	}
}

// tcpPeer is the sending side towards one peer.
type tcpPeer struct {
	id    uint64
	addr  string
	q     chan outItem
	stopc chan struct{}
	once  sync.Once

	mu   sync.Mutex
	conn net.Conn // current connection, closed by stop
}

type outItem struct {
	m    *pb.Message
	join *JoinRequest
}

func (p *tcpPeer) stop() {
	p.once.Do(func() {
		close(p.stopc)
		p.mu.Lock()
		if p.conn != nil {
			p.conn.Close()
		}
		p.mu.Unlock()
	})
}

func (p *tcpPeer) stopped() bool {
	select {
	case <-p.stopc:
		return true
	default:
		return false
	}
}

// runPeer writes p's queue until p is stopped. It connects when there is
// something to send, so an idle or departed peer costs no connection
// attempts.
func (t *TCPTransport) runPeer(p *tcpPeer) {
	backoff := t.cfg.MinBackoff
	failing := false
	for {
		var first outItem
		select {
		case <-p.stopc:
			t.failQueued(p)
			return
		case first = <-p.q:
		}
		conn, err := t.dial(p)
		if err == nil {
			if failing {
				t.log.Info("metadata: raft peer reachable again", "node", NodeID(p.id), "addr", p.addr)
			}
			failing = false
			backoff = t.cfg.MinBackoff
			err = t.writeLoop(p, conn, first)
			conn.Close()
		} else {
			t.failItem(p.id, first)
		}
		if p.stopped() {
			t.failQueued(p)
			return
		}
		if !failing {
			t.log.Warn("metadata: cannot reach raft peer; retrying", "node", NodeID(p.id), "addr", p.addr, "err", err)
			failing = true
		} else {
			t.log.Debug("metadata: raft peer still unreachable", "node", NodeID(p.id), "addr", p.addr, "err", err)
		}
		t.reportUnreachable(p.id)
		t.failQueued(p)
		select {
		case <-p.stopc:
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, t.cfg.MaxBackoff)
	}
}

func (t *TCPTransport) failItem(id uint64, it outItem) {
	if it.m != nil && it.m.GetType() == pb.MsgSnap {
		t.reportSnapshot(id, raft.SnapshotFailure)
	}
}

// failQueued drops what is queued for p, reporting any MsgSnap failed.
func (t *TCPTransport) failQueued(p *tcpPeer) {
	for {
		select {
		case it := <-p.q:
			t.failItem(p.id, it)
		default:
			return
		}
	}
}

// dial connects to p and runs the handshake.
func (t *TCPTransport) dial(p *tcpPeer) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.stopped() {
		p.mu.Unlock()
		conn.Close()
		return nil, ErrTransportClosed
	}
	p.conn = conn // closed raw: a TLS close could wait on a stuck write
	p.mu.Unlock()
	conn.SetDeadline(time.Now().Add(t.cfg.DialTimeout))
	if t.cfg.ClientTLS != nil {
		tc := tls.Client(conn, t.cfg.ClientTLS(p.addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		conn = tc
	}
	hs := handshake{From: t.cfg.NodeID, To: p.id, ClusterID: *t.clusterID.Load(), Addr: t.Addr().String()}
	if _, err := conn.Write(hs.encode()); err != nil {
		conn.Close()
		return nil, err
	}
	var st [1]byte
	if _, err := io.ReadFull(conn, st[:]); err != nil {
		conn.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	if st[0] != 0 {
		reason, _ := readString(bufio.NewReader(conn))
		conn.Close()
		return nil, fmt.Errorf("peer refused the connection: %s", reason)
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// writeLoop writes first and then queued items to conn, batching what is
// queued into one flush, until p stops or a write fails.
func (t *TCPTransport) writeLoop(p *tcpPeer, conn net.Conn, first outItem) error {
	bw := bufio.NewWriterSize(conn, 64<<10)
	var buf []byte
	it, have := first, true
	for {
		if !have {
			select {
			case <-p.stopc:
				return ErrTransportClosed
			case it = <-p.q:
			}
		}
		have = false
		var snaps int
		var err error
		for {
			conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
			if buf, err = appendTCPFrame(buf[:0], it); err == nil {
				_, err = bw.Write(buf)
			}
			if it.m != nil && it.m.GetType() == pb.MsgSnap {
				snaps++
			}
			if err != nil {
				break
			}
			select {
			case it = <-p.q:
				continue
			default:
			}
			break
		}
		if err == nil {
			err = bw.Flush()
		}
		st := raft.SnapshotFinish
		if err != nil {
			st = raft.SnapshotFailure
		}
		for range snaps {
			t.reportSnapshot(p.id, st)
		}
		if cap(buf) > 1<<20 {
			buf = nil // do not keep a snapshot-sized buffer
		}
		if err != nil {
			return err
		}
	}
}

// appendTCPFrame appends one frame: uint32 length of kind+payload, uint8
// kind, payload.
func appendTCPFrame(b []byte, it outItem) ([]byte, error) {
	b = append(b, 0, 0, 0, 0)
	var err error
	if it.m != nil {
		b = append(b, frameRaft)
		b, err = proto.MarshalOptions{}.MarshalAppend(b, it.m)
		if err != nil {
			return b, err
		}
	} else {
		b = append(b, frameJoin)
		b = binary.LittleEndian.AppendUint64(b, it.join.ID)
		b = appendString(b, it.join.Addr)
	}
	n := len(b) - 4
	if n > MaxFrameBytes {
		return b, fmt.Errorf("metadata: raft frame of %d bytes exceeds %d", n, MaxFrameBytes)
	}
	binary.LittleEndian.PutUint32(b, uint32(n))
	return b, nil
}

func (t *TCPTransport) accept() {
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() == nil {
				t.log.Error("metadata: controller listener stopped", "err", err)
			}
			return
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			conn.Close()
			return
		}
		if len(t.conns) >= maxIncomingConns {
			t.mu.Unlock()
			t.log.Warn("metadata: too many incoming raft connections; refusing one", "remote", conn.RemoteAddr(), "limit", maxIncomingConns)
			conn.Close()
			continue
		}
		t.conns[conn] = struct{}{}
		t.mu.Unlock()
		t.wg.Go(func() {
			t.serveConn(conn)
			t.mu.Lock()
			delete(t.conns, conn)
			t.mu.Unlock()
			conn.Close()
		})
	}
}

// serveConn reads one incoming connection: the handshake, then frames.
func (t *TCPTransport) serveConn(conn net.Conn) {
	conn.SetDeadline(time.Now().Add(t.cfg.DialTimeout))
	if t.cfg.ServerTLS != nil {
		tc := tls.Server(conn, t.cfg.ServerTLS)
		if err := tc.HandshakeContext(t.ctx); err != nil {
			t.log.Warn("metadata: refused raft connection: TLS handshake failed (a node must present a certificate the trust store signed)",
				"remote", conn.RemoteAddr(), "err", err)
			return
		}
		conn = tc
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	hs, err := readHandshake(br)
	if err != nil {
		t.log.Debug("metadata: bad raft handshake", "remote", conn.RemoteAddr(), "err", err)
		return
	}
	if reason := t.checkHandshake(hs); reason != "" {
		t.log.Warn("metadata: refused raft connection", "remote", conn.RemoteAddr(), "from", NodeID(hs.From), "reason", reason)
		conn.Write(appendString([]byte{1}, reason))
		return
	}
	if _, err := conn.Write([]byte{0}); err != nil {
		return
	}
	conn.SetDeadline(time.Time{})
	r := t.receiver()
	var buf []byte
	for {
		var kind byte
		kind, buf, err = readTCPFrame(br, buf)
		if err != nil {
			if t.ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.log.Debug("metadata: raft connection ended", "from", NodeID(hs.From), "err", err)
			}
			return
		}
		switch kind {
		case frameRaft:
			m := &pb.Message{}
			if err := proto.Unmarshal(buf, m); err != nil {
				t.log.Warn("metadata: undecodable raft message; closing connection", "from", NodeID(hs.From), "err", err)
				return
			}
			if err := r.Step(t.ctx, m); err != nil {
				return
			}
		case frameJoin:
			req, ok := decodeJoin(buf)
			if !ok {
				t.log.Warn("metadata: bad join request; closing connection", "from", NodeID(hs.From))
				return
			}
			r.Join(req)
		default:
			t.log.Warn("metadata: unknown raft frame kind; closing connection", "from", NodeID(hs.From), "kind", kind)
			return
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

func (t *TCPTransport) checkHandshake(hs handshake) string {
	if hs.To != t.cfg.NodeID {
		return fmt.Sprintf("this is Raft node %d (node.id %d), not %d (node.id %d): check the addresses in controller.quorum.voters",
			t.cfg.NodeID, int64(t.cfg.NodeID)-1, hs.To, int64(hs.To)-1)
	}
	if mine := *t.clusterID.Load(); mine != "" && hs.ClusterID != "" && mine != hs.ClusterID {
		return fmt.Sprintf("cluster id %q differs from this node's %q: the nodes belong to different clusters", hs.ClusterID, mine)
	}
	return ""
}

// handshake opens every connection (dialer to acceptor):
//
//	[8]byte magic "BERTHRFT", uint16 version, uint64 from, uint64 to,
//	string cluster id, string sender address (string = uint16 length + bytes)
//
// The acceptor answers one byte, 0 = accepted, or 1 followed by a string
// saying why not, and closes.
type handshake struct {
	From, To  uint64
	ClusterID string
	Addr      string
}

func (h handshake) encode() []byte {
	b := append([]byte(tcpMagic), 0, 0)
	binary.LittleEndian.PutUint16(b[8:], tcpVersion)
	b = binary.LittleEndian.AppendUint64(b, h.From)
	b = binary.LittleEndian.AppendUint64(b, h.To)
	b = appendString(b, h.ClusterID)
	return appendString(b, h.Addr)
}

func readHandshake(r *bufio.Reader) (handshake, error) {
	var h handshake
	var fixed [26]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return h, err
	}
	if string(fixed[:8]) != tcpMagic {
		return h, errors.New("not a Berth raft connection")
	}
	if v := binary.LittleEndian.Uint16(fixed[8:]); v != tcpVersion {
		return h, fmt.Errorf("raft transport version %d, want %d", v, tcpVersion)
	}
	h.From = binary.LittleEndian.Uint64(fixed[10:])
	h.To = binary.LittleEndian.Uint64(fixed[18:])
	var err error
	if h.ClusterID, err = readString(r); err != nil {
		return h, err
	}
	h.Addr, err = readString(r)
	return h, err
}

func appendString(b []byte, s string) []byte {
	if len(s) > 1<<16-1 {
		s = s[:1<<16-1]
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func readString(r *bufio.Reader) (string, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return "", err
	}
	b := make([]byte, binary.LittleEndian.Uint16(l[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// readTCPFrame reads one frame into buf (grown as needed) and returns its
// kind and payload.
func readTCPFrame(r *bufio.Reader, buf []byte) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, buf, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n < 1 || n > MaxFrameBytes {
		return 0, buf, fmt.Errorf("frame length %d out of range", n)
	}
	// Grow with the data that actually arrives, so a bad length costs at
	// most one chunk beyond what the peer sent.
	need := int(n - 1)
	buf = buf[:0]
	for len(buf) < need {
		chunk := min(need-len(buf), 1<<20)
		buf = slices.Grow(buf, chunk)
		got, err := io.ReadFull(r, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+got]
		if err != nil {
			return 0, buf, err
		}
	}
	return hdr[4], buf, nil
}

// decodeJoin parses a join frame's payload: uint64 id, string address.
func decodeJoin(b []byte) (JoinRequest, bool) {
	if len(b) < 10 {
		return JoinRequest{}, false
	}
	n := int(binary.LittleEndian.Uint16(b[8:]))
	if len(b) != 10+n {
		return JoinRequest{}, false
	}
	return JoinRequest{ID: binary.LittleEndian.Uint64(b), Addr: string(b[10:])}, true
}
