package group

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
)

// Store persists records in partition p of __consumer_offsets. done is
// called once with nil when the records are durable, or with an error
// (then nothing may be assumed written). done may be called inline, from
// inside Write, or later from any goroutine. The coordinator calls Write
// in the order its state changed (see Coordinator.flush) and expects the
// done calls of one partition in the same order.
type Store interface {
	Write(p int32, recs []Record, done func(error))
}

// Appender appends records to partition p of __consumer_offsets, which
// this node leads, at once (in call order), and returns the wait for them
// to be durable (replica.StateLog; the share and transaction coordinators
// write through the same).
type Appender interface {
	Append(p int32, recs []batch.KV) (wait func() error, err error)
}

// AppendStore is the Store that writes through a: each Write appends its
// records at once, so the log has them in the order of the Write calls,
// and calls done from a goroutine once they are durable.
func AppendStore(a Appender) Store { return appendStore{a} }

type appendStore struct{ a Appender }

func (s appendStore) Write(p int32, recs []Record, done func(error)) {
	kvs := make([]batch.KV, len(recs))
	for i, r := range recs {
		kvs[i] = batch.KV{Key: r.Key, Value: r.Value}
	}
	wait, err := s.a.Append(p, kvs)
	if err != nil {
		done(err)
		return
	}
	go func() { done(wait()) }()
}

// TopicResolver answers topic existence and id<->name for commits/fetches
// (v10 uses topic ids), and lists topics for the server-side assignment of
// KIP-848 consumer groups. Its methods are called with group locks held:
// they must not call back into the coordinator.
type TopicResolver interface {
	PartitionExists(topic string, partition int32) bool
	TopicName(id [16]byte) (string, bool)
	TopicID(name string) ([16]byte, bool)
	// Topics lists every topic, internal ones included (Kafka matches
	// regular expression subscriptions against them too), in any order.
	Topics() []TopicInfo
}

// TopicInfo is one topic as consumer group assignment needs it.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// Coordinator is the group coordinator for the classic and the KIP-848
// consumer group protocols: the groups of the __consumer_offsets
// partitions this node owns, their membership and their committed offsets.
//
// Locks (see doc.go): c.mu before g.mu; c.wmu is a leaf. No lock is held
// while calling Store.Write or a respond callback.
type Coordinator struct {
	cfg    Config
	store  Store
	topics TopicResolver
	log    *slog.Logger

	mu        sync.Mutex // guards groups, parts, closed, nextCheck
	groups    map[string]*group
	parts     map[int32]*offsetsPartition
	closed    bool
	nextCheck time.Time

	wmu     sync.Mutex // guards wq, writing; a leaf lock
	wq      []pendingWrite
	writing bool

	runMu  sync.Mutex // guards cancel, done
	cancel context.CancelFunc
	done   chan struct{}
}

// offsetsPartition is one owned partition of __consumer_offsets.
type offsetsPartition struct {
	loading bool
	loaded  map[string]*loadingGroup // records replayed so far, while loading
	shares  *shareLoader             // share group records replayed so far, while loading
	// txnOffsets are the pending transactional offsets (txn_offsets.go),
	// replayed while loading and kept after.
	txnOffsets map[txnOffsetKey]offset
}

type pendingWrite struct {
	p    int32
	recs []Record
	done func(error)
}

// New makes a coordinator that owns no partition yet: BeginLoad,
// LoadRecord and FinishLoad each partition it leads.
func New(cfg Config, store Store, topics TopicResolver) *Coordinator {
	cfg.Defaults()
	return &Coordinator{
		cfg:    cfg,
		store:  store,
		topics: topics,
		log:    cfg.Logger.With("component", "group"),
		groups: make(map[string]*group),
		parts:  make(map[int32]*offsetsPartition),
	}
}

// tickInterval is how often Start's goroutine calls Tick.
const tickInterval = 100 * time.Millisecond

// Start runs a goroutine calling Tick every 100ms until ctx is done or
// Close is called. Calling it twice, or after Close, does nothing.
func (c *Coordinator) Start(ctx context.Context) {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if c.cancel != nil || closed {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c.cancel, c.done = cancel, done
	go func() {
		defer close(done)
		t := time.NewTicker(tickInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.Tick(c.cfg.Now())
			}
		}
	}()
}

// Close stops the Tick goroutine and answers every waiting JoinGroup and
// SyncGroup with COORDINATOR_NOT_AVAILABLE; later requests get the same.
// Writes already handed to the Store still complete through their done
// callbacks.
func (c *Coordinator) Close() {
	c.runMu.Lock()
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	c.runMu.Unlock()

	var f fx
	c.mu.Lock()
	c.closed = true
	for _, g := range c.groups {
		g.mu.Lock()
		c.failWaiters(g, kerr.CoordinatorNotAvailable.Code, &f)
		g.mu.Unlock()
	}
	c.mu.Unlock()
	f.run()
}

// Tick runs the timers as of now: session timeouts, KIP-394 pending
// member ids, the initial rebalance delay, rebalance and sync timeouts,
// consumer group members' session and revocation timeouts, share group
// members' sessions, and (every
// OffsetsRetentionCheckInterval) offset expiry. It is
// deterministic: tests drive it with a fake clock.
func (c *Coordinator) Tick(now time.Time) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	check := !now.Before(c.nextCheck)
	if check {
		c.nextCheck = now.Add(c.cfg.OffsetsRetentionCheckInterval)
	}
	c.mu.Unlock()
	sort.Slice(gs, func(i, j int) bool { return gs[i].id < gs[j].id })

	var f fx
	var dead []*group
	for _, g := range gs {
		g.mu.Lock()
		if !g.removed {
			c.tickGroup(g, now, &f)
			if check {
				c.expireOffsets(g, now, &f)
			}
			if c.finishOp(g) {
				dead = append(dead, g)
			}
		}
		g.mu.Unlock()
	}
	c.reap(dead...)
	c.flush()
	f.run()
}

// fx collects what to do once locks are released: respond callbacks.
type fx []func()

func (f *fx) add(fn func()) { *f = append(*f, fn) }

func (f fx) run() {
	for _, fn := range f {
		fn()
	}
}

// write queues records for the Store. It may be called with a group lock
// held: the queue keeps Store.Write calls in the order of the state
// changes they record, which a compacted log needs (latest wins). flush,
// called once locks are released, hands them to the Store.
func (c *Coordinator) write(p int32, recs []Record, done func(error)) {
	c.wmu.Lock()
	c.wq = append(c.wq, pendingWrite{p, recs, done})
	c.wmu.Unlock()
}

// flush calls Store.Write for queued writes, in order. One caller drains
// at a time; a done called inline that queues more is drained by the same
// loop.
func (c *Coordinator) flush() {
	c.wmu.Lock()
	if c.writing {
		c.wmu.Unlock()
		return
	}
	c.writing = true
	for len(c.wq) > 0 {
		w := c.wq[0]
		c.wq[0] = pendingWrite{}
		c.wq = c.wq[1:]
		c.wmu.Unlock()
		c.store.Write(w.p, w.recs, once(w.done))
		c.wmu.Lock()
	}
	c.wq = nil
	c.writing = false
	c.wmu.Unlock()
}

// once guards against a Store calling done twice.
func once(done func(error)) func(error) {
	var o sync.Once
	return func(err error) { o.Do(func() { done(err) }) }
}

// acquire returns the group locked, after checking that its partition of
// __consumer_offsets is owned and loaded. With create, a missing group is
// made (Empty). A zero code and a nil group means no such group.
func (c *Coordinator) acquire(id string, create bool) (*group, int16) {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	p := metadata.PartitionForKey(id, c.cfg.OffsetsTopicPartitions)
	ps, ok := c.parts[p]
	switch {
	case !ok:
		return nil, c.notOwned(p).Code
	case ps.loading:
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	g := c.groups[id]
	if g == nil {
		if !create {
			return nil, 0
		}
		g = newGroup(id, p, now)
		c.groups[id] = g
	}
	g.mu.Lock()
	return g, 0
}

// NotOwnedError is the error of a request for a partition a coordinator
// neither owns nor loads, given what the metadata says of it: Kafka's
// COORDINATOR_LOAD_IN_PROGRESS while the partition's leader has yet to
// load it, COORDINATOR_NOT_AVAILABLE while it has no leader (or the topic
// is still being created), NOT_COORDINATOR when another node leads it.
// The group, share and transaction coordinators all answer this way.
func NotOwnedError(l metadata.Leadership) *kerr.Error {
	switch l {
	case metadata.LeaderSelf:
		return kerr.CoordinatorLoadInProgress
	case metadata.LeaderNone:
		return kerr.CoordinatorNotAvailable
	}
	return kerr.NotCoordinator
}

// notOwned is the error for partition p, which c does not own; c.mu is
// held.
func (c *Coordinator) notOwned(p int32) *kerr.Error {
	if c.cfg.Leader == nil {
		return kerr.NotCoordinator
	}
	return NotOwnedError(c.cfg.Leader(p))
}

// release unlocks g after an operation, removes it from the map if it
// died or was a throwaway, then issues queued writes and runs f.
func (c *Coordinator) release(g *group, f *fx) {
	dead := c.finishOp(g)
	g.mu.Unlock()
	if dead {
		c.reap(g)
	}
	c.flush()
	f.run()
}

// finishOp reports whether g, locked, should leave the map: it is Dead,
// or it is an Empty group that never held anything (created by a request
// that then failed validation, or whose KIP-394 member id expired).
func (c *Coordinator) finishOp(g *group) bool {
	if g.removed {
		return false
	}
	if g.blank() {
		g.state = stateDead
	}
	return g.state == stateDead && !g.deleting
}

// reap removes dead groups from the map. Lock order: c.mu, then g.mu.
func (c *Coordinator) reap(gs ...*group) {
	if len(gs) == 0 {
		return
	}
	c.mu.Lock()
	for _, g := range gs {
		g.mu.Lock()
		if g.state == stateDead && !g.deleting && !g.removed && c.groups[g.id] == g {
			delete(c.groups, g.id)
			g.removed = true
		}
		g.mu.Unlock()
	}
	c.mu.Unlock()
}

// failWaiters answers g's waiting joins and syncs with code.
func (c *Coordinator) failWaiters(g *group, code int16, f *fx) {
	for _, m := range g.ordered() {
		if m.joinReply != nil {
			c.answerJoinError(m, code, f)
		}
		if m.syncReply != nil {
			c.answerSyncError(m, code, f)
		}
	}
}

// Owns reports whether this node coordinates groupID (for FindCoordinator)
// and whether its partition is still loading.
func (c *Coordinator) Owns(groupID string) (ok bool, loading bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.parts[metadata.PartitionForKey(groupID, c.cfg.OffsetsTopicPartitions)]
	if !ok {
		return false, false
	}
	return true, ps.loading
}

// Partitions is a debugging aid: the owned __consumer_offsets partitions
// and whether each is loading.
func (c *Coordinator) Partitions() map[int32]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int32]bool, len(c.parts))
	for p, ps := range c.parts {
		out[p] = ps.loading
	}
	return out
}

// nowMillis is a time as Kafka's epoch milliseconds.
func nowMillis(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}
