// Package sharepart keeps the share-partitions (KIP-932) a broker leads:
// one share.SharePartition per (group, topic id, partition), created on a
// share group's first ShareFetch of the partition, and the share sessions
// of ShareFetch and ShareAcknowledge. It is the outer loop of the pure
// state machine in internal/share: it reads the log, keeps the clock,
// runs each share-partition's lock timer and wakes long-polling fetches
// when records may have become acquirable.
//
// The state lives in memory on the partition leader and is persisted
// through Config.Store (the share coordinator and __share_group_state):
// a share-partition is loaded from the store when first used under a
// leader epoch, and every state change is durable in the store before
// the request that made it is answered. A failed write forgets the
// in-memory state (it is loaded again on next use): work is redelivered,
// never lost. Records that go to a dead-letter topic are handed to
// Config.DLQ after their Archiving state is durable, and archived once
// the DLQ write is.
package sharepart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/share"
)

// ErrUnknownSharePartition: an acknowledgement for a share-partition this
// broker holds no state for (nothing was acquired there).
var ErrUnknownSharePartition = fmt.Errorf("%w: no records acquired in this share-partition", share.ErrInvalidRecordState)

// Config is the registry's settings.
type Config struct {
	// Partition is the broker's default share-partition config.
	Partition share.PartitionConfig
	// Settings returns a group's settings (its group configs over the
	// broker defaults); nil: Partition, no DLQ, latest.
	Settings func(group string) GroupSettings
	// Store persists share-partition state; nil keeps it in memory only
	// (tests).
	Store Store
	// DLQ writes records to dead-letter topics; nil archives them at
	// once with a WARN log.
	DLQ    DLQWriter
	Now    func() time.Time
	Logger *slog.Logger
}

// GroupSettings is what a share group's configs decide.
type GroupSettings struct {
	Partition share.PartitionConfig
	// DLQTopic is the group's dead-letter topic
	// (errors.deadletterqueue.topic.name; "" for none).
	DLQTopic string
	// AutoOffsetReset is share.auto.offset.reset: "latest" (or ""),
	// "earliest" or "by_duration:<ISO-8601 duration>".
	AutoOffsetReset string
	// ReadCommitted is share.isolation.level=read_committed: records are
	// acquired only below the last stable offset, and those of aborted
	// transactions are archived, never delivered.
	ReadCommitted bool
	// SessionTimeout and HeartbeatInterval are the group's membership
	// settings (share.session.timeout.ms, share.heartbeat.interval.ms);
	// zero when the group's configs did not validate: the coordinator
	// then uses the broker's.
	SessionTimeout, HeartbeatInterval time.Duration
}

// Store persists share-partition state (the share coordinator).
type Store interface {
	// Read returns k's state (ok false: none yet). leaderEpoch is the
	// reader's: later writes from older leader epochs are fenced.
	Read(ctx context.Context, k share.Key, leaderEpoch int32) (s share.Snapshot, ok bool, err error)
	// Write makes u durable. A share-partition's first write carries its
	// start offset (u.StartOffset >= 0).
	Write(ctx context.Context, k share.Key, u share.Update) error
}

// DLQWriter parks records in a dead-letter topic.
type DLQWriter interface {
	// Park writes the records [a.First, a.Last] of topic's partition
	// k.Partition to dlqTopic with the context headers
	// (share.DLQHeaders), durably, before returning nil.
	Park(ctx context.Context, k share.Key, topic, dlqTopic string, a share.DLQAction) error
}

// ErrStateUnavailable: the share-partition's state could not be read or
// written (the share coordinator is unavailable); it is retried.
var ErrStateUnavailable = errors.New("share-partition state unavailable")

// storeTimeout bounds one Store call.
const storeTimeout = 10 * time.Second

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Partition == (share.PartitionConfig{}) {
		c.Partition = share.PartitionDefaults()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate checks c.
func (c *Config) Validate() error { return c.Partition.Validate() }

// Registry holds the share-partitions and sessions of one broker.
//
// Lock order: an entry's mu before Registry.mu; Registry.mu guards the
// map, the change signal and closed, and is never held while calling
// into a share-partition.
type Registry struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	parts   map[share.Key]*entry
	changed chan struct{} // closed and replaced by signal
	closed  bool

	ctx    context.Context // cancelled by Close: DLQ writes stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // the DLQ writers and member releases in flight

	Sessions Sessions
}

// entry is one share-partition; mu owns everything but key, topic and r.
type entry struct {
	mu       sync.Mutex
	key      share.Key
	topic    string
	p        *share.SharePartition // nil: not loaded
	epoch    int32                 // the leader epoch p was loaded under
	gen      uint64                // bumped by every load and unload
	dlqTopic string                // the group's DLQ topic p runs with
	cfg      share.PartitionConfig // the config p runs with
	timer    *time.Timer
	r        *Registry
	// removed: the entry left the registry's map (forget: its group or
	// topic was deleted); nothing loads it again, and whoever looked it
	// up before looks again.
	removed bool

	// Writes to the store are pipelined (persist, writeLoop): each change
	// gets a sequence number and waits, mu released, until a write that
	// covers it is durable; one writer at a time sends what is pending,
	// several changes as one write of the whole state.
	written *sync.Cond // on mu: a write ended
	seq     uint64     // last change queued
	durable uint64     // changes up to this one are durable
	failed  uint64     // changes up to this one were dropped (write failed or state unloaded)
	pending []share.Update
	writing bool
	lastErr error // the last failed write's error
}

// New returns an empty registry.
func New(cfg Config) (*Registry, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{cfg: cfg, log: cfg.Logger, parts: map[share.Key]*entry{}, changed: make(chan struct{}),
		ctx: ctx, cancel: cancel, Sessions: Sessions{m: map[sessionKey]*session{}}}, nil
}

// settings returns group's settings.
func (r *Registry) settings(group string) GroupSettings {
	if r.cfg.Settings == nil {
		return GroupSettings{Partition: r.cfg.Partition}
	}
	return r.cfg.Settings(group)
}

// LockDuration is the acquisition lock ShareFetch reports to group.
func (r *Registry) LockDuration(group string) time.Duration {
	return r.settings(group).Partition.LockDuration
}

// Changed returns a channel closed the next time records may have
// become acquirable without new data in the log (a release, an expired
// lock, a backoff that ended, a member gone).
func (r *Registry) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *Registry) signal() {
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Close stops every timer.
func (r *Registry) Close() {
	r.cancel()
	defer r.wg.Wait()
	r.mu.Lock()
	r.closed = true
	es := make([]*entry, 0, len(r.parts))
	for _, e := range r.parts {
		es = append(es, e)
	}
	r.mu.Unlock()
	for _, e := range es {
		e.mu.Lock()
		if e.timer != nil {
			e.timer.Stop()
		}
		e.mu.Unlock()
	}
}

func (r *Registry) get(k share.Key) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parts[k]
}

// getOrCreate returns k's entry, made (not loaded) if new.
func (r *Registry) getOrCreate(k share.Key, topic string) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.parts[k]; e != nil {
		return e
	}
	e := &entry{key: k, topic: topic, r: r}
	e.written = sync.NewCond(&e.mu)
	r.parts[k] = e
	return e
}

// Fetched is one partition's answer to a ShareFetch.
type Fetched struct {
	Records  []byte
	Acquired []share.AcquiredRange
}

// Acquire reads the log of p from where the share-partition k hands out
// records next and acquires what it read for member: at most maxRecords
// records, from at most maxBytes of batches (at least one batch). The
// group's share.isolation.level is read at every call, so a change
// applies at the next fetch: read_uncommitted reads up to the high
// watermark, read_committed up to the last stable offset, archiving the
// records of aborted transactions. Control batches (markers) are archived
// either way.
func (r *Registry) Acquire(k share.Key, topic, member string, p PartitionLog, maxBytes int32, maxRecords int, alloc func(int) []byte) (Fetched, error) {
	e := r.getOrCreate(k, topic)
	e.mu.Lock()
	for e.removed { // forgotten after the lookup: take the new entry
		e.mu.Unlock()
		e = r.getOrCreate(k, topic)
		e.mu.Lock()
	}
	defer e.mu.Unlock()
	if err := e.ensure(p, r.cfg.Now()); err != nil {
		return Fetched{}, err
	}
	now := r.cfg.Now() // after the load, which may have taken a while: locks start now
	if ls := p.LogStartOffset(); ls > e.p.StartOffset() {
		gen := e.gen
		if err := e.handle(e.p.AdvanceLogStart(ls), now); err != nil {
			return Fetched{}, err
		}
		if e.gen != gen { // reloaded while the write was in flight
			return Fetched{}, fmt.Errorf("%w: %s was reloaded", ErrStateUnavailable, e)
		}
	}
	off, ok := e.p.NextFetchOffset(now)
	committed := r.settings(k.Group).ReadCommitted
	upto, read := p.HighWatermark(), p.Read
	if committed {
		upto, read = p.LastStableOffset(), p.ReadCommitted
	}
	if !ok || maxRecords <= 0 || off >= upto {
		return Fetched{}, nil
	}
	res, err := read(off, maxBytes, true, alloc)
	if err != nil {
		return Fetched{}, err
	}
	batches := logBatches(res.Records, res.Aborted)
	acq, ch := e.p.Acquire(member, batches, maxRecords, now)
	if err := e.handle(ch, now); err != nil {
		return Fetched{}, err // not durable: hand nothing out
	}
	if len(acq) == 0 {
		return Fetched{}, nil
	}
	return Fetched{Records: keepAcquired(res.Records, acq), Acquired: acq}, nil
}

// Acknowledge applies member's acknowledgements to share-partition k.
func (r *Registry) Acknowledge(k share.Key, member string, acks []share.Ack) error {
	e := r.get(k)
	if e == nil {
		return ErrUnknownSharePartition
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p == nil {
		return ErrUnknownSharePartition
	}
	now := r.cfg.Now()
	ch, err := e.p.Acknowledge(member, acks, now)
	if err != nil {
		return err
	}
	err = e.handle(ch, now)
	r.signal()
	return err
}

// MembersGone releases what the members of group held, as failed
// deliveries (Config.OnShareMembersRemoved of the group coordinator, and
// a closed share session).
func (r *Registry) MembersGone(group string, members []string) {
	r.mu.Lock()
	var es []*entry
	for k, e := range r.parts {
		if k.Group == group {
			es = append(es, e)
		}
	}
	r.mu.Unlock()
	for _, e := range es {
		e.mu.Lock()
		now := r.cfg.Now()
		for _, m := range members {
			if e.p == nil {
				break
			}
			_ = e.handle(e.p.MemberGone(m, now), now) // a failure unloads: the records come back on reload
		}
		e.mu.Unlock()
	}
	if len(es) > 0 {
		r.signal()
	}
}

// Stats returns share-partition k's stats (false if unknown).
func (r *Registry) Stats(k share.Key) (share.PartitionStats, bool) {
	e := r.get(k)
	if e == nil {
		return share.PartitionStats{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p == nil {
		return share.PartitionStats{}, false
	}
	return e.p.Stats(r.cfg.Now()), true
}

// PartitionStats is one share-partition's stats, for metrics.
type PartitionStats struct {
	Key   share.Key
	Topic string
	share.PartitionStats
}

// AllStats returns the stats of every share-partition this broker holds,
// taking each one's lock in turn (never Registry.mu with it).
func (r *Registry) AllStats() []PartitionStats {
	r.mu.Lock()
	es := make([]*entry, 0, len(r.parts))
	for _, e := range r.parts {
		es = append(es, e)
	}
	r.mu.Unlock()
	now := r.cfg.Now()
	out := make([]PartitionStats, 0, len(es))
	for _, e := range es {
		e.mu.Lock()
		if e.p != nil {
			out = append(out, PartitionStats{Key: e.key, Topic: e.topic, PartitionStats: e.p.Stats(now)})
		}
		e.mu.Unlock()
	}
	return out
}

// schedule arms the timer at the share-partition's next deadline (e.mu
// held).
func (e *entry) schedule(now time.Time) {
	at, ok := e.p.NextDeadline(now)
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if !ok {
		return
	}
	e.r.mu.Lock()
	closed := e.r.closed
	e.r.mu.Unlock()
	if closed {
		return
	}
	e.timer = time.AfterFunc(max(at.Sub(now), time.Millisecond), e.fire)
}

// fire runs on the timer: locks expire, backoffs end.
func (e *entry) fire() {
	e.mu.Lock()
	if e.p != nil {
		now := e.r.cfg.Now()
		_ = e.handle(e.p.Expire(now), now) // a failure unloads: the records come back on reload
	}
	e.mu.Unlock()
	e.r.signal()
}

// logBatches lists the batches of a read. Control batches (transaction
// markers) and the transactional batches of the aborted transactions
// given (a read_committed read's) are marked Skip: Acquire archives
// them. A batch belongs to an aborted transaction when its producer's
// transaction began at or before it and was aborted by a marker after it.
func logBatches(b []byte, aborted []replica.AbortedTxn) []share.LogBatch {
	var out []share.LogBatch
	for len(b) >= batch.HeaderSize {
		h := batch.DecodeHeader(b)
		n := h.Size()
		if n > len(b) || n < batch.HeaderSize {
			break
		}
		skip := h.Control()
		if !skip && h.Transactional() {
			for _, t := range aborted {
				if t.ProducerID == h.ProducerID && t.FirstOffset <= h.BaseOffset && h.BaseOffset < t.LastOffset {
					skip = true
					break
				}
			}
		}
		out = append(out, share.LogBatch{First: h.BaseOffset, Last: h.BaseOffset + int64(h.LastOffsetDelta), Skip: skip})
		b = b[n:]
	}
	return out
}

// keepAcquired drops, in place, the batches that hold no acquired record.
func keepAcquired(b []byte, acq []share.AcquiredRange) []byte {
	out := b[:0]
	for len(b) >= batch.HeaderSize {
		h := batch.DecodeHeader(b)
		n := h.Size()
		if n > len(b) || n < batch.HeaderSize {
			break
		}
		first, last := h.BaseOffset, h.BaseOffset+int64(h.LastOffsetDelta)
		for _, a := range acq {
			if a.First <= last && a.Last >= first && !h.Control() {
				out = append(out, b[:n]...)
				break
			}
		}
		b = b[n:]
	}
	return out
}

// MembersRemoved is the group coordinator's Config.OnShareMembersRemoved
// (internal/app passes the members' ids): the members' sessions end and
// their records are released.
func (r *Registry) MembersRemoved(group string, ms []string) {
	r.Sessions.Drop(group, ms)
	// Not on the caller's goroutine (the group coordinator's): releasing
	// writes to the store.
	r.spawn(func() { r.MembersGone(group, ms) })
}

// spawn runs f on a goroutine Close waits for; after Close, not at all
// (false).
func (r *Registry) spawn(f func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
	return true
}
