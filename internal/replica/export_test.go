package replica

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/peer"
)

// PeerRequest sends one request over a fresh broker-to-broker connection
// (tests in package replica_test).
func PeerRequest(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	c, err := peer.Dial(ctx, addr, "test")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Request(ctx, req, 10*time.Second)
}

// SetFlushHook installs fn, run by the flusher before it writes a
// partition's staged batches (tests in package replica_test hold a write
// round with it); nil removes it.
func (m *Manager) SetFlushHook(fn func(topic string, partition int32)) {
	if fn == nil {
		m.flushHook.Store(nil)
		return
	}
	h := func(p *Partition) { fn(p.Topic, p.Index) }
	m.flushHook.Store(&h)
}
