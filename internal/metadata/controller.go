package metadata

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Controller runs the metadata Raft node: Open replays storage, Start runs
// the Ready loop, Propose appends records, Image reads the applied state.
type Controller struct {
	cfg   Config
	image atomic.Pointer[Image]

	subMu sync.Mutex
	subs  map[*subscription]struct{}
}

type subscription struct{ ch chan struct{} }

// Open replays the snapshot and WAL in cfg.Dir (creating it on first use)
// and applies every committed entry, so Image is current when Open returns.
// It starts no goroutines.
func Open(cfg Config) (*Controller, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, subs: map[*subscription]struct{}{}}
	c.image.Store(emptyImage())
	return c, errors.New("metadata: not implemented yet")
}

// Start runs the Raft loop. With one voter it campaigns, and returns once
// this node is leader, every entry of the log is applied and the cluster id
// is set. It returns ctx's error if that takes longer than ctx allows (the
// loop keeps running; call Close).
func (c *Controller) Start(ctx context.Context) error {
	return errors.New("metadata: not implemented yet")
}

// Close stops the loop, takes a snapshot, syncs and closes the files. It
// is idempotent.
func (c *Controller) Close() error { return nil }

// Image returns the current image; never nil after Open. Do not modify it.
func (c *Controller) Image() *Image { return c.image.Load() }

// Propose appends recs as one Raft entry and waits until it is applied.
// The batch applies atomically; the returned error is the apply error (e.g.
// ErrTopicExists), ErrNotLeader, ErrClosed or ctx's error. After a ctx
// error or ErrNotLeader the outcome is unknown: the entry may still apply.
func (c *Controller) Propose(ctx context.Context, recs ...Record) error {
	_, err := c.propose(ctx, recs)
	return err
}

func (c *Controller) propose(ctx context.Context, recs []Record) (Result, error) {
	return Result{}, errors.New("metadata: not implemented yet")
}

// AllocateProducerIDs reserves count producer ids through a ProducerIDBlock
// record and returns the first; the block is [first, first+count). Ids are
// never handed out twice, across restarts too.
func (c *Controller) AllocateProducerIDs(ctx context.Context, count int64) (first int64, err error) {
	res, err := c.propose(ctx, []Record{{ProducerIDBlock: &ProducerIDBlock{Count: count}}})
	if err != nil {
		return 0, err
	}
	return res.ProducerIDs[0], nil
}

// Subscribe returns a channel that receives after each image change. Sends
// never block and coalesce (buffer 1): after a receive, read Image for the
// latest state. cancel unsubscribes; it is idempotent.
func (c *Controller) Subscribe() (<-chan struct{}, func()) {
	s := &subscription{ch: make(chan struct{}, 1)}
	c.subMu.Lock()
	c.subs[s] = struct{}{}
	c.subMu.Unlock()
	return s.ch, func() {
		c.subMu.Lock()
		delete(c.subs, s)
		c.subMu.Unlock()
	}
}

func (c *Controller) notify() {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	for s := range c.subs {
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
}
