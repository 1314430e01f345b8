package peer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Pool keeps a few idle connections per address for request/response
// traffic between brokers (share-state and transaction RPCs), so that a
// request does not pay for a dial. The zero value is ready; ClientID names
// this broker in the peers' logs. It is safe for concurrent use.
type Pool struct {
	ClientID string
	// Dial opens new connections (nil: plain TCP).
	Dial Dialer
	// SASL authenticates the pool's connections (DialSASL); nil: none.
	SASL sasl.Mechanism

	mu   sync.Mutex
	idle map[string][]*Conn // by address
}

// maxIdle bounds the idle connections kept per address.
const maxIdle = 4

// dialTimeout bounds the dial of a new connection.
const dialTimeout = 5 * time.Second

// Request sends req to addr on an idle or new connection and waits at
// most timeout for the answer. A connection that answered (a Kafka error
// in the body included) goes back to the pool; one that failed is closed.
func (p *Pool) Request(ctx context.Context, addr string, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	conn, err := p.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	resp, err := conn.Request(ctx, req, timeout)
	if err != nil {
		conn.Close()
		return nil, err
	}
	p.put(conn)
	return resp, nil
}

// Do runs fn on an idle or new connection to addr. The connection goes
// back to the pool when fn returns nil or a Kafka error (*kerr.Error: the
// peer answered), and is closed otherwise.
func (p *Pool) Do(ctx context.Context, addr string, fn func(*Conn) error) error {
	conn, err := p.get(ctx, addr)
	if err != nil {
		return err
	}
	err = fn(conn)
	var ke *kerr.Error
	if err == nil || errors.As(err, &ke) {
		p.put(conn)
	} else {
		conn.Close()
	}
	return err
}

func (p *Pool) get(ctx context.Context, addr string) (*Conn, error) {
	p.mu.Lock()
	if cs := p.idle[addr]; len(cs) > 0 {
		conn := cs[len(cs)-1]
		p.idle[addr] = cs[:len(cs)-1]
		p.mu.Unlock()
		return conn, nil
	}
	p.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	return DialSASL(dctx, addr, p.ClientID, p.Dial, p.SASL)
}

func (p *Pool) put(conn *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle == nil {
		p.idle = map[string][]*Conn{}
	}
	if len(p.idle[conn.Addr]) >= maxIdle {
		conn.Close()
		return
	}
	p.idle[conn.Addr] = append(p.idle[conn.Addr], conn)
}

// Close closes the idle connections.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cs := range p.idle {
		for _, conn := range cs {
			conn.Close()
		}
	}
	p.idle = nil
}
