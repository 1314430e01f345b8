package txn

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
)

// Coordinator is the transaction coordinator's running side: one
// Partition per __transaction_state partition this node leads, loaded by
// a replica.Loader (BeginLoad, LoadRecord, FinishLoad, Unload: replay,
// then the pending markers are sent again). Each operation runs under its
// partition's mutex, appends the Result's records through the Log and
// answers once they are durable; the markers of a Result are then written
// by WriteTxnMarkers to each partition's leader (through Peers, to this
// node too) and the transaction completed with MarkersDone. The handlers
// use it through handler.TxnCoordinator.
type Coordinator struct {
	cfg   Config
	state Log
	run   Runtime
	log   *slog.Logger

	mu    sync.Mutex // guards parts
	parts map[int32]*loadedPart

	wg sync.WaitGroup // timers and marker senders
}

// Log is the coordinator's way to the __transaction_state partitions this
// node leads (replica.StateLog). A partition that is not on this node is
// an error wrapping kerr.NotCoordinator.
type Log interface {
	// Append appends recs as one batch to partition p at once (so the log
	// has them in call order) and returns the wait for them to be durable.
	Append(p int32, recs []batch.KV) (wait func() error, err error)
	// LeaderEpoch is p's leader epoch (ok false: p is not on this node).
	LeaderEpoch(p int32) (epoch int32, ok bool)
	// Replay feeds every record of p, in order, to fn, up to its log end.
	Replay(p int32, fn func(key, value []byte)) (int, error)
}

// Requester sends a request to a broker and returns its answer
// (peer.Pool).
type Requester interface {
	Request(ctx context.Context, addr string, req kmsg.Request, timeout time.Duration) (kmsg.Response, error)
}

// Runtime is what a Coordinator needs from its node besides its Log.
type Runtime struct {
	// ProducerIDs hands out producer ids (metadata.ProducerIDs, the node's
	// blocks, the ones InitProducerId without a transactional id uses).
	ProducerIDs interface {
		Next(ctx context.Context) (int64, error)
	}
	// Leader says what the metadata says of a __transaction_state
	// partition this coordinator has not loaded.
	Leader func(p int32) metadata.Leadership
	// Image returns the current metadata image: where the markers go.
	Image func() *metadata.Image
	// Peers carries WriteTxnMarkers to the partitions' leaders.
	Peers  Requester
	Logger *slog.Logger
}

// loadedPart is one loaded __transaction_state partition. mu owns p:
// every call on it, and every append of its records (so the log has them
// in the order they were made).
type loadedPart struct {
	index int32
	stop  chan struct{} // closed on unload: its timers and marker senders end

	mu      sync.Mutex // guards p, loading, epoch, last, changed
	p       *Partition
	changed chan struct{} // closed and replaced at each durable change (Changed)
	loading bool          // replaying: operations answer COORDINATOR_LOAD_IN_PROGRESS
	epoch   int32         // coordinator epoch: the partition's leader epoch when loaded
	// last is the wait of the last append: an operation that writes
	// nothing still answers only once the state it read is durable (Kafka
	// refuses it meanwhile with its pending state). Nil: none yet.
	last func() error
}

// NewCoordinator returns a coordinator that has loaded no partition yet;
// cfg is the partitions' settings, state its log.
func NewCoordinator(cfg Config, state Log, run Runtime) *Coordinator {
	if run.Logger == nil {
		run.Logger = slog.Default()
	}
	return &Coordinator{cfg: cfg, state: state, run: run, log: run.Logger, parts: map[int32]*loadedPart{}}
}

// allocate hands out producer ids from the node's blocks (the ones
// InitProducerId without a transactional id uses).
func (c *Coordinator) allocate() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.run.ProducerIDs.Next(ctx)
}

func (c *Coordinator) get(p int32) *loadedPart {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[p]
}

// BeginLoad implements replica.Coordinator.
func (c *Coordinator) BeginLoad(p int32) {
	tp := &loadedPart{index: p, stop: make(chan struct{}), p: NewPartition(c.cfg, c.allocate), loading: true,
		changed: make(chan struct{})}
	if epoch, ok := c.state.LeaderEpoch(p); ok {
		tp.epoch = epoch
	}
	c.mu.Lock()
	if old := c.parts[p]; old != nil {
		close(old.stop) // not unloaded: a reload of a partition still led
	}
	c.parts[p] = tp
	c.mu.Unlock()
}

// LoadRecord implements replica.Coordinator.
func (c *Coordinator) LoadRecord(p int32, key, value []byte) error {
	tp := c.get(p)
	if tp == nil {
		return nil
	}
	// The partition is loading: no operation touches p until
	// FinishLoad, which takes mu.
	return tp.p.Replay(key, value)
}

// FinishLoad implements replica.Coordinator.
func (c *Coordinator) FinishLoad(p int32) {
	tp := c.get(p)
	if tp == nil {
		return
	}
	tp.mu.Lock()
	tp.loading = false
	pending := tp.p.Pending()
	tp.mu.Unlock()
	for _, m := range pending {
		c.sendMarkers(tp, m)
	}
	c.wg.Add(1)
	go c.timers(tp)
}

// Unload implements replica.Coordinator.
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	tp := c.parts[p]
	delete(c.parts, p)
	c.mu.Unlock()
	if tp != nil {
		close(tp.stop)
	}
}

// Close stops the timers and marker senders of the partitions loaded.
// Call it once the loader's replays have ended (replica.Loaders.Close).
func (c *Coordinator) Close() {
	c.mu.Lock()
	for p, tp := range c.parts {
		close(tp.stop)
		delete(c.parts, p)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Loaded implements handler.TxnCoordinator.
func (c *Coordinator) Loaded() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int32, 0, len(c.parts))
	for p := range c.parts {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// View implements handler.TxnCoordinator.
func (c *Coordinator) View(p int32, fn func(*Partition)) error {
	tp := c.get(p)
	if tp == nil {
		return c.notLoaded(p)
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.loading {
		return kerr.CoordinatorLoadInProgress
	}
	fn(tp.p)
	return nil
}

// Changed implements handler.TxnCoordinator.
func (c *Coordinator) Changed(p int32) <-chan struct{} {
	tp := c.get(p)
	if tp == nil {
		return nil
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.changed
}

// Do implements handler.TxnCoordinator.
func (c *Coordinator) Do(ctx context.Context, p int32, op func(*Partition, time.Time) Result) Result {
	tp := c.get(p)
	if tp == nil {
		return fail(c.notLoaded(p))
	}
	tp.mu.Lock()
	if tp.loading {
		tp.mu.Unlock()
		return fail(kerr.CoordinatorLoadInProgress)
	}
	res := op(tp.p, time.Now())
	wait, err := c.append(tp, res.Records)
	tp.mu.Unlock()
	if err == nil {
		err = wait()
	}
	if err != nil {
		c.log.Warn("writing __transaction_state", "partition", p, "err", err)
		c.rebuild(tp)
		return fail(kerr.NotCoordinator)
	}
	if len(res.Records) > 0 {
		tp.mu.Lock()
		close(tp.changed)
		tp.changed = make(chan struct{})
		tp.mu.Unlock()
	}
	for _, m := range res.Markers {
		c.sendMarkers(tp, m)
	}
	return res
}

// notLoaded is the error for partition p, which this coordinator has not
// loaded: NOT_COORDINATOR only when another node leads it, as
// group.NotOwnedError answers for the group coordinator.
func (c *Coordinator) notLoaded(p int32) error {
	switch c.run.Leader(p) {
	case metadata.LeaderSelf:
		return kerr.CoordinatorLoadInProgress
	case metadata.LeaderNone:
		return kerr.CoordinatorNotAvailable
	}
	return kerr.NotCoordinator
}

// append appends records to the partition (tp.mu held); the returned wait
// ends once every in-sync replica has them.
func (c *Coordinator) append(tp *loadedPart, recs []Record) (func() error, error) {
	if len(recs) == 0 {
		if _, ok := c.state.LeaderEpoch(tp.index); !ok {
			return nil, kerr.NotCoordinator
		}
		if tp.last == nil {
			return func() error { return nil }, nil
		}
		return tp.last, nil
	}
	kvs := make([]batch.KV, len(recs))
	for i, r := range recs {
		kvs[i] = batch.KV{Key: r.Key, Value: r.Value}
	}
	wait, err := c.state.Append(tp.index, kvs)
	if err != nil {
		return nil, err
	}
	tp.last = wait
	return wait, nil
}

// rebuild drops tp's state after a failed write and replays the
// partition's log, as the txn contract asks, then sends the pending
// markers again. A partition no longer led is left to the loader.
func (c *Coordinator) rebuild(tp *loadedPart) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if c.get(tp.index) != tp {
		return
	}
	fresh := NewPartition(c.cfg, c.allocate)
	_, err := c.state.Replay(tp.index, func(key, value []byte) { _ = fresh.Replay(key, value) })
	switch {
	case errors.Is(err, kerr.NotCoordinator):
		return // not on this node any more
	case err != nil:
		c.log.Error("replaying __transaction_state", "partition", tp.index, "err", err)
	}
	tp.p = fresh
	for _, m := range fresh.Pending() {
		c.sendMarkers(tp, m)
	}
}

// timers aborts timed-out transactions and expires idle ids on tp until
// it is unloaded.
func (c *Coordinator) timers(tp *loadedPart) {
	defer c.wg.Done()
	abort := time.NewTicker(c.cfg.AbortInterval)
	defer abort.Stop()
	expire := time.NewTicker(c.cfg.ExpireInterval)
	defer expire.Stop()
	for {
		var op func(*Partition, time.Time) Result
		select {
		case <-tp.stop:
			return
		case <-abort.C:
			op = (*Partition).AbortTimedOut
		case <-expire.C:
			op = (*Partition).ExpireIDs
		}
		if res := c.Do(context.Background(), tp.index, op); res.Err != nil && !errors.Is(res.Err, kerr.NotCoordinator) {
			c.log.Warn("transaction coordinator timer", "partition", tp.index, "err", res.Err)
		}
	}
}
