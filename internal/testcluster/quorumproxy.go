package testcluster

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"
)

// A quorumProxy sits in front of one node's controller (Raft) listener:
// the other nodes' controller.quorum.voters entry for that node points at
// the proxy, which forwards to the node's real port. It reads the
// transport's handshake (docs/format/metadata.md, "Raft transport (TCP)")
// to learn which node each connection comes from, so that the cluster can
// cut one node off from the quorum, in both directions, while the process
// keeps running: every connection to a cut node and every connection from
// one is closed, and new ones are closed as soon as they are accepted.
type quorumProxy struct {
	to     int32 // the node behind this proxy
	target string
	ln     net.Listener
	cut    func(node int32) bool // shared cut set of the cluster

	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

type proxyConn struct {
	from      int32 // -1 until the handshake is read
	in, out   net.Conn
	closeOnce sync.Once
}

func (c *proxyConn) close() {
	c.closeOnce.Do(func() {
		c.in.Close()
		if c.out != nil {
			c.out.Close()
		}
	})
}

// handshakeMagic and the size of the fixed part of the handshake the
// proxy reads: magic, uint16 version, uint64 from, uint64 to.
var handshakeMagic = []byte("BERTHRFT")

const handshakeFixed = 8 + 2 + 8 + 8

func newQuorumProxy(to int32, target string, cut func(int32) bool) (*quorumProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &quorumProxy{to: to, target: target, ln: ln, cut: cut, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the voters list gives for the node behind the proxy.
func (p *quorumProxy) Addr() string { return p.ln.Addr().String() }

func (p *quorumProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		pc := &proxyConn{from: -1, in: c}
		if !p.track(pc) {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(pc)
	}
}

// track registers a connection unless the proxy is closed or the
// connection involves a cut node; the check and the registration happen
// under one lock, so a concurrent sever never misses a connection.
func (p *quorumProxy) track(pc *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.cut(p.to) || pc.from >= 0 && p.cut(pc.from) {
		return false
	}
	p.conns[pc] = struct{}{}
	return true
}

func (p *quorumProxy) untrack(pc *proxyConn) {
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
	pc.close()
}

func (p *quorumProxy) serve(pc *proxyConn) {
	defer p.wg.Done()
	defer p.untrack(pc)
	hdr := make([]byte, handshakeFixed)
	pc.in.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(pc.in, hdr); err != nil {
		return
	}
	// A TLS record (a controller listener mapped to SSL): the handshake is
	// encrypted, so the sender is unknown and the connection cannot be cut;
	// tests that cut links use plain TCP.
	tlsRecord := hdr[0] == 0x16
	if !tlsRecord && !bytes.Equal(hdr[:8], handshakeMagic) {
		return
	}
	pc.in.SetReadDeadline(time.Time{})
	// from is the sender's Raft id, node.id + 1.
	from := int32(-1)
	if !tlsRecord {
		from = int32(binary.LittleEndian.Uint64(hdr[10:18])) - 1
	}
	p.mu.Lock()
	pc.from = from
	p.mu.Unlock()
	if !p.track(pc) {
		return
	}
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	pc.out = out
	_, live := p.conns[pc]
	p.mu.Unlock()
	if !live { // severed while dialling
		out.Close()
		return
	}
	if _, err := out.Write(hdr); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(out, pc.in); done <- struct{}{} }()
	go func() { io.Copy(pc.in, out); done <- struct{}{} }()
	<-done
	pc.close()
	<-done
}

// sever closes every connection from or to node (now cut).
func (p *quorumProxy) sever(node int32) {
	p.mu.Lock()
	var drop []*proxyConn
	for pc := range p.conns {
		if p.to == node || pc.from == node {
			drop = append(drop, pc)
			delete(p.conns, pc)
		}
	}
	p.mu.Unlock()
	for _, pc := range drop {
		pc.close()
	}
}

func (p *quorumProxy) Close() {
	p.mu.Lock()
	p.closed = true
	var all []*proxyConn
	for pc := range p.conns {
		all = append(all, pc)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, pc := range all {
		pc.close()
	}
	p.wg.Wait()
}
