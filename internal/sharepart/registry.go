// Package sharepart keeps the share-partitions (KIP-932) a broker leads:
// one share.SharePartition per (group, topic id, partition), created on a
// share group's first ShareFetch of the partition, and the share sessions
// of ShareFetch and ShareAcknowledge. It is the outer loop of the pure
// state machine in internal/share: it reads the log, keeps the clock,
// runs each share-partition's lock timer and wakes long-polling fetches
// when records may have become acquirable.
//
// The state is in memory only, on the partition leader: a broker restart
// or a leader change forgets acquisitions and delivery counts and starts
// the share-partition again (at the start offset it had, while this
// broker stays leader; at share.auto.offset.reset otherwise). Persisting
// it in __share_group_state is the next step (docs/compatibility.md,
// "Known gaps").
package sharepart

import (
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
	// Partition is every share-partition's config (broker defaults:
	// group configs are not settable yet).
	Partition share.PartitionConfig
	// DLQTopic is the dead-letter topic of every group ("" for none).
	// Writing it is not implemented yet: records that would go there are
	// archived with a WARN log.
	DLQTopic string
	Now      func() time.Time
	Logger   *slog.Logger
}

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

// Key names a share-partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// Registry holds the share-partitions and sessions of one broker.
//
// Lock order: an entry's mu before Registry.mu; Registry.mu guards the
// map, the change signal and closed, and is never held while calling
// into a share-partition.
type Registry struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	parts   map[Key]*entry
	changed chan struct{} // closed and replaced by signal
	closed  bool

	Sessions Sessions
}

// entry is one share-partition; mu owns p and timer.
type entry struct {
	mu    sync.Mutex
	key   Key
	topic string
	p     *share.SharePartition
	epoch int32 // the leader epoch p was created under
	timer *time.Timer
	r     *Registry
}

// New returns an empty registry.
func New(cfg Config) (*Registry, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Registry{cfg: cfg, log: cfg.Logger, parts: map[Key]*entry{}, changed: make(chan struct{}),
		Sessions: Sessions{m: map[sessionKey]*session{}}}, nil
}

// LockDuration is the acquisition lock ShareFetch reports.
func (r *Registry) LockDuration() time.Duration { return r.cfg.Partition.LockDuration }

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

func (r *Registry) get(k Key) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parts[k]
}

// getOrCreate returns k's entry, made at the high watermark
// (share.auto.offset.reset=latest, Kafka's default) if new.
func (r *Registry) getOrCreate(k Key, topic string, p *replica.Partition) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.parts[k]; e != nil {
		return e
	}
	e := &entry{key: k, topic: topic, r: r, epoch: p.LeaderEpoch(),
		p: share.NewPartition(r.cfg.Partition, p.HighWatermark(), nil)}
	e.p.SetLeaderEpoch(e.epoch)
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
// records, from at most maxBytes of batches (at least one batch).
func (r *Registry) Acquire(k Key, topic, member string, p *replica.Partition, maxBytes int32, maxRecords int, alloc func(int) []byte) (Fetched, error) {
	e := r.getOrCreate(k, topic, p)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := r.cfg.Now()
	if ep := p.LeaderEpoch(); ep != e.epoch {
		// Leadership moved away and back: what this broker remembers may
		// be stale. Start again at the old start offset (at least once).
		e.p = share.NewPartition(r.cfg.Partition, e.p.StartOffset(), nil)
		e.epoch = ep
		e.p.SetLeaderEpoch(ep)
	}
	if ls := p.LogStartOffset(); ls > e.p.StartOffset() {
		e.handle(e.p.AdvanceLogStart(ls), now)
	}
	off, ok := e.p.NextFetchOffset(now)
	if !ok || maxRecords <= 0 || off >= p.HighWatermark() {
		return Fetched{}, nil
	}
	res, err := p.Read(off, maxBytes, true, alloc)
	if err != nil {
		return Fetched{}, err
	}
	batches := logBatches(res.Records)
	acq, ch := e.p.Acquire(member, batches, maxRecords, now)
	e.handle(ch, now)
	if len(acq) == 0 {
		return Fetched{}, nil
	}
	return Fetched{Records: keepAcquired(res.Records, acq), Acquired: acq}, nil
}

// Acknowledge applies member's acknowledgements to share-partition k.
func (r *Registry) Acknowledge(k Key, member string, acks []share.Ack) error {
	e := r.get(k)
	if e == nil {
		return ErrUnknownSharePartition
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := r.cfg.Now()
	ch, err := e.p.Acknowledge(member, acks, now)
	if err != nil {
		return err
	}
	e.handle(ch, now)
	r.signal()
	return nil
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
			e.handle(e.p.MemberGone(m, now), now)
		}
		e.mu.Unlock()
	}
	if len(es) > 0 {
		r.signal()
	}
}

// Stats returns share-partition k's stats (false if unknown).
func (r *Registry) Stats(k Key) (share.PartitionStats, bool) {
	e := r.get(k)
	if e == nil {
		return share.PartitionStats{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.p.Stats(r.cfg.Now()), true
}

// PartitionStats is one share-partition's stats, for metrics.
type PartitionStats struct {
	Key   Key
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
		out = append(out, PartitionStats{Key: e.key, Topic: e.topic, PartitionStats: e.p.Stats(now)})
		e.mu.Unlock()
	}
	return out
}

// handle executes a state change (e.mu held): the update would be
// persisted here (next step); DLQ actions are archived at once, since no
// DLQ is written yet; then the timer is set to the next deadline.
func (e *entry) handle(ch share.StateChange, now time.Time) {
	for _, a := range ch.DLQ {
		if e.r.cfg.DLQTopic != "" {
			e.r.log.Warn("share: dead-letter writing not implemented; archiving records without parking them",
				"group", e.key.Group, "topic", e.topic, "partition", e.key.Partition,
				"first", a.First, "last", a.Last, "reason", a.Reason.String(), "dlq", e.r.cfg.DLQTopic)
		}
		if _, err := e.p.CompleteArchive(a.First, a.Last); err != nil {
			e.r.log.Error("share: archiving records failed", "group", e.key.Group, "topic", e.topic,
				"partition", e.key.Partition, "first", a.First, "last", a.Last, "err", err)
		}
	}
	e.schedule(now)
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
	now := e.r.cfg.Now()
	e.handle(e.p.Expire(now), now)
	e.mu.Unlock()
	e.r.signal()
}

// logBatches lists the data batches of a read (control batches are left
// out: Acquire archives their offsets as gaps).
func logBatches(b []byte) []share.LogBatch {
	var out []share.LogBatch
	for len(b) >= batch.HeaderSize {
		h := batch.DecodeHeader(b)
		n := h.Size()
		if n > len(b) || n < batch.HeaderSize {
			break
		}
		if !h.Control() {
			out = append(out, share.LogBatch{First: h.BaseOffset, Last: h.BaseOffset + int64(h.LastOffsetDelta)})
		}
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

// MembersRemoved is the group coordinator's Config.OnShareMembersRemoved:
// the members' sessions end and their records are released.
func (r *Registry) MembersRemoved(group string, removed []share.GroupRemoval) {
	ms := make([]string, len(removed))
	for i, m := range removed {
		ms[i] = m.MemberID
	}
	r.Sessions.Drop(group, ms)
	r.MembersGone(group, ms)
}
