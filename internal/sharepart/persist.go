package sharepart

// Loading, persisting and dead-lettering of one share-partition (entry):
// the parts of the registry that talk to the share coordinator (Store)
// and to dead-letter topics (DLQWriter).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/share"
)

// PartitionLog is what a share-partition needs of its partition (a
// *replica.Partition this broker leads).
type PartitionLog interface {
	LeaderEpoch() int32
	LogStartOffset() int64
	HighWatermark() int64
	// LastStableOffset bounds what a read_committed group reads.
	LastStableOffset() int64
	Read(offset int64, maxBytes int32, minOne bool, alloc func(int) []byte) (replica.ReadResult, error)
	// ReadCommitted reads up to the last stable offset and lists the
	// aborted transactions among the batches returned.
	ReadCommitted(offset int64, maxBytes int32, minOne bool, alloc func(int) []byte) (replica.ReadResult, error)
	OffsetForTimestamp(ts int64) (off, recTS int64, found bool, err error)
}

// StateAdmin is the store's side for AlterShareGroupOffsets and
// DeleteShareGroupOffsets (sharestate.Client implements it).
type StateAdmin interface {
	// Initialize restarts k's state at start, with a new state epoch that
	// fences the writes of whoever loaded the old state.
	Initialize(ctx context.Context, k share.Key, start int64) error
	// Delete removes k's state.
	Delete(ctx context.Context, k share.Key) error
	// DeleteStates removes the states of keys, retrying until each is
	// deleted or ctx ends (DeleteGroups of a share group).
	DeleteStates(ctx context.Context, keys []share.Key) error
}

// ErrNoStateAdmin: the registry's store cannot reset or delete state.
var ErrNoStateAdmin = fmt.Errorf("%w: share-partition state cannot be reset here", ErrStateUnavailable)

// ResetState restarts share-partition k at start (AlterShareGroupOffsets:
// the group is empty); a local copy is dropped at once, another broker's
// is fenced by the new state epoch and reloaded.
func (r *Registry) ResetState(ctx context.Context, k share.Key, start int64) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	return r.admin(k, func(a StateAdmin) error { return a.Initialize(ctx, k, start) })
}

// DeleteState removes share-partition k's state (DeleteShareGroupOffsets):
// the next fetch starts at share.auto.offset.reset.
func (r *Registry) DeleteState(ctx context.Context, k share.Key) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	return r.admin(k, func(a StateAdmin) error { return a.Delete(ctx, k) })
}

func (r *Registry) admin(k share.Key, f func(StateAdmin) error) error {
	a, ok := r.cfg.Store.(StateAdmin)
	if !ok {
		return ErrNoStateAdmin
	}
	if err := f(a); err != nil {
		return err
	}
	if e := r.get(k); e != nil {
		e.mu.Lock()
		if e.p != nil {
			e.unload()
		}
		e.mu.Unlock()
	}
	return nil
}

// StateReader is a Store that reads the states of many share-partitions
// at once without fencing anyone (sharestate.Client implements it): keys
// without state are in neither map, keys it could not read are in errs.
type StateReader interface {
	PeekStates(ctx context.Context, keys []share.Key) (states map[share.Key]share.Snapshot, errs map[share.Key]error)
}

// PeekMany is Peek for many share-partitions: the stats of those of keys
// that have state, from memory where this broker has loaded them, else
// from the store (in one batch when it is a StateReader), and the keys
// whose state could not be read.
func (r *Registry) PeekMany(ctx context.Context, keys []share.Key) (map[share.Key]share.PartitionStats, map[share.Key]error) {
	stats, errs := map[share.Key]share.PartitionStats{}, map[share.Key]error{}
	var rest []share.Key
	for _, k := range keys {
		if st, ok := r.Stats(k); ok {
			stats[k] = st
		} else {
			rest = append(rest, k)
		}
	}
	if len(rest) == 0 || r.cfg.Store == nil {
		return stats, errs
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	sr, ok := r.cfg.Store.(StateReader)
	if !ok {
		for _, k := range rest {
			if st, ok, err := r.Peek(ctx, k); err != nil {
				errs[k] = err
			} else if ok {
				stats[k] = st
			}
		}
		return stats, errs
	}
	snaps, rerrs := sr.PeekStates(ctx, rest)
	for k, err := range rerrs {
		errs[k] = fmt.Errorf("%w: reading the state of %s/%d: %v", ErrStateUnavailable, k.Group, k.Partition, err)
	}
	for k, snap := range snaps {
		p, err := share.LoadPartition(r.settings(k.Group).Partition, snap, nil)
		if err != nil {
			errs[k] = err
			continue
		}
		stats[k] = p.Stats(r.cfg.Now())
	}
	return stats, errs
}

// Peek returns share-partition k's stats: from memory when this broker has
// loaded it, else from the store without loading it or fencing anyone
// (ok false: no state anywhere).
func (r *Registry) Peek(ctx context.Context, k share.Key) (share.PartitionStats, bool, error) {
	if st, ok := r.Stats(k); ok || r.cfg.Store == nil {
		return st, ok, nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	snap, ok, err := r.cfg.Store.Read(ctx, k, -1)
	if err != nil {
		return share.PartitionStats{}, false, fmt.Errorf("%w: reading the state of %s/%d: %v", ErrStateUnavailable, k.Group, k.Partition, err)
	}
	if !ok {
		return share.PartitionStats{}, false, nil
	}
	p, err := share.LoadPartition(r.settings(k.Group).Partition, snap, nil)
	if err != nil {
		return share.PartitionStats{}, false, err
	}
	return p.Stats(r.cfg.Now()), true, nil
}

// ensure loads the share-partition if it is not loaded under the
// partition's current leader epoch (e.mu held): from the store, or, when
// the store has nothing, fresh at share.auto.offset.reset, written to the
// store at once so that a new leader starts where this one did. Archiving
// records found in the state are handed to the DLQ writer again.
func (e *entry) ensure(part PartitionLog, now time.Time) error {
	ep := part.LeaderEpoch()
	if e.p != nil && e.epoch == ep {
		e.refresh()
		return nil
	}
	if e.p != nil {
		// Leadership moved away and back: what this broker remembers may
		// be stale; the store has the truth.
		e.unload()
	}
	gs := e.r.settings(e.key.Group)
	cfg := partitionConfig(gs)
	var (
		p    *share.SharePartition
		snap share.Snapshot // with no state: its state epoch
	)
	if st := e.r.cfg.Store; st != nil {
		ctx, cancel := context.WithTimeout(e.r.ctx, storeTimeout)
		var (
			ok  bool
			err error
		)
		snap, ok, err = st.Read(ctx, e.key, ep)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: reading the state of %s: %v", ErrStateUnavailable, e, err)
		}
		if ok {
			if p, err = share.LoadPartition(cfg, snap, rand.Float64); err != nil {
				return fmt.Errorf("%w: loading the state of %s: %v", ErrStateUnavailable, e, err)
			}
		}
	}
	fresh := p == nil
	if fresh {
		start, err := resetOffset(gs.AutoOffsetReset, part, now)
		if err != nil {
			return err
		}
		if p, err = share.LoadPartition(cfg, share.Snapshot{StartOffset: start, StateEpoch: snap.StateEpoch}, rand.Float64); err != nil {
			return err
		}
	}
	p.SetLeaderEpoch(ep)
	e.p, e.epoch, e.dlqTopic, e.cfg = p, ep, gs.DLQTopic, cfg
	e.gen++
	gen := e.gen
	if fresh {
		if err := e.persist(share.Update{LeaderEpoch: ep, StateEpoch: p.StateEpoch(), StartOffset: p.StartOffset()}); err != nil {
			return err
		}
		if e.gen != gen {
			return fmt.Errorf("%w: %s was reloaded", ErrStateUnavailable, e)
		}
		e.r.log.Info("share-partition initialized", "share_partition", e.String(), "start_offset", p.StartOffset(),
			"auto_offset_reset", cmpOr(gs.AutoOffsetReset, "latest"))
	} else {
		e.r.log.Info("share-partition loaded", "share_partition", e.String(), "start_offset", p.StartOffset(),
			"leader_epoch", ep)
	}
	for _, a := range p.PendingDLQ() {
		e.park(a, now)
	}
	e.schedule(now)
	return nil
}

// partitionConfig is the state machine's config for a group's settings.
func partitionConfig(gs GroupSettings) share.PartitionConfig {
	cfg := gs.Partition
	cfg.DeadLetter = gs.DLQTopic != ""
	return cfg
}

// refresh applies the group's settings if they changed since the load
// (e.mu held): a new lock duration, delivery limit, backoff or DLQ topic
// governs what happens from now on.
func (e *entry) refresh() {
	gs := e.r.settings(e.key.Group)
	if cfg := partitionConfig(gs); cfg != e.cfg || gs.DLQTopic != e.dlqTopic {
		e.p.Reconfigure(cfg)
		e.cfg, e.dlqTopic = cfg, gs.DLQTopic
		e.r.log.Info("share-partition reconfigured", "share_partition", e.String(), "dlq", gs.DLQTopic)
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// unload forgets the in-memory state (e.mu held); the next use loads it
// from the store again. Changes not yet written are dropped: their
// requests fail.
func (e *entry) unload() {
	e.p = nil
	e.gen++
	e.failed, e.pending = e.seq, nil
	if e.lastErr == nil {
		e.lastErr = errors.New("share-partition state reloaded")
	}
	e.written.Broadcast()
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
}

func (e *entry) String() string {
	return e.key.Group + ":" + e.topic + "/" + strconv.Itoa(int(e.key.Partition))
}

// persist makes u, a change of the state in memory, durable in the store
// and returns once it is (e.mu held, released while waiting: other
// requests may change the state meanwhile, and the state may have been
// unloaded or reloaded by the time persist returns). Changes are written
// in order; when several wait, one write of the whole state covers them.
// On failure the in-memory state, ahead of the store, is dropped, and so
// are the changes queued behind the failed one.
func (e *entry) persist(u share.Update) error {
	if e.r.cfg.Store == nil || u.Empty() {
		return nil
	}
	e.seq++
	my := e.seq
	e.pending = append(e.pending, u)
	if !e.writing {
		e.writing = true
		go e.writeLoop()
	}
	for e.durable < my && e.failed < my {
		e.written.Wait()
	}
	if e.durable >= my {
		return nil
	}
	return fmt.Errorf("%w: writing the state of %s: %v", ErrStateUnavailable, e, e.lastErr)
}

// writeLoop writes what is pending until nothing is.
func (e *entry) writeLoop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.pending) > 0 {
		u := e.pending[0]
		if len(e.pending) > 1 {
			// The state in memory holds every pending change (and maybe
			// newer ones, not yet queued: harmless to write early).
			s := e.p.Snapshot()
			u = share.Update{LeaderEpoch: s.LeaderEpoch, StateEpoch: s.StateEpoch, StartOffset: s.StartOffset,
				DeliveryCompleteCount: s.DeliveryCompleteCount, StateBatches: s.StateBatches}
		}
		upto, gen := e.seq, e.gen
		e.pending = nil
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(e.r.ctx, storeTimeout)
		err := e.r.cfg.Store.Write(ctx, e.key, u)
		cancel()
		e.mu.Lock()
		switch {
		case err == nil:
			e.durable = max(e.durable, upto)
		case e.gen == gen: // the state the write came from: drop it
			e.r.log.Warn("share-partition state not written; reloading it on next use (unacknowledged work is redelivered)",
				"share_partition", e.String(), "err", err)
			e.lastErr = err
			e.unload()
		default: // already unloaded
			e.lastErr = err
			e.failed = max(e.failed, upto)
		}
		e.written.Broadcast()
	}
	e.writing = false
}

// handle executes a state change (e.mu held): the update is made durable,
// then the DLQ actions start and the timer is set to the next deadline
// (unless the state was reloaded meanwhile: the load does both).
func (e *entry) handle(ch share.StateChange, now time.Time) error {
	gen := e.gen
	if err := e.persist(ch.Update); err != nil {
		return err
	}
	if e.gen != gen {
		return nil
	}
	for _, a := range ch.DLQ {
		e.park(a, now)
	}
	e.schedule(now)
	return nil
}

// park starts the DLQ write of a (e.mu held). Its Archiving state is
// durable already; the records are archived once the write is, and a
// write cut short by a reload is done again by the next load.
func (e *entry) park(a share.DLQAction, now time.Time) {
	if e.r.cfg.DLQ == nil || e.dlqTopic == "" {
		if e.dlqTopic != "" {
			e.r.log.Warn("share: no dead-letter writer; archiving records without parking them",
				"share_partition", e.String(), "first", a.First, "last", a.Last, "dlq", e.dlqTopic)
		}
		e.completeArchive(a, now)
		return
	}
	gen := e.gen
	e.r.spawn(func() { e.parkLoop(gen, a) })
}

// parkLoop writes a's records to the group's DLQ topic until it succeeds,
// the registry closes or the entry is reloaded, then archives them. The
// topic is read again before each try: an operator who fixes a failing
// DLQ by naming another topic, or by clearing it (the records are then
// archived without a copy), unblocks the share-partition at once.
func (e *entry) parkLoop(gen uint64, a share.DLQAction) {
	r := e.r
	backoff := 100 * time.Millisecond
	for {
		e.mu.Lock()
		stale, dlqTopic := e.gen != gen, e.dlqTopic
		if !stale && dlqTopic == "" {
			r.log.Warn("share: the group no longer has a dead-letter topic; archiving records without parking them",
				"share_partition", e.String(), "first", a.First, "last", a.Last)
			e.completeArchive(a, r.cfg.Now())
			stale = true
		}
		e.mu.Unlock()
		if stale || r.ctx.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		err := r.cfg.DLQ.Park(ctx, e.key, e.topic, dlqTopic, a)
		cancel()
		if err == nil {
			break
		}
		if errors.Is(err, context.Canceled) && r.ctx.Err() != nil {
			return
		}
		r.log.Warn("share: dead-letter write failed; retrying", "share_partition", e.String(),
			"first", a.First, "last", a.Last, "dlq", dlqTopic, "retry_in", backoff, "err", err)
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gen != gen || e.p == nil {
		return // reloaded: the load parks the records again (at least once)
	}
	e.completeArchive(a, r.cfg.Now())
}

// completeArchive archives a's records (e.mu held).
func (e *entry) completeArchive(a share.DLQAction, now time.Time) {
	ch, err := e.p.CompleteArchive(a.First, a.Last)
	if err != nil {
		e.r.log.Error("share: archiving records failed", "share_partition", e.String(),
			"first", a.First, "last", a.Last, "err", err)
		return
	}
	_ = e.handle(ch, now) // a failure unloads; the load parks the records again
}

// resetOffset is where a share-partition without state starts
// (share.auto.offset.reset): the high watermark (latest, Kafka's
// default), the log start (earliest), or the first record at or after
// now minus a duration (by_duration:<ISO-8601 duration>).
func resetOffset(policy string, part PartitionLog, now time.Time) (int64, error) {
	switch {
	case policy == "" || policy == "latest":
		return part.HighWatermark(), nil
	case policy == "earliest":
		return part.LogStartOffset(), nil
	case strings.HasPrefix(policy, "by_duration:"):
		d, err := ParseISODuration(strings.TrimPrefix(policy, "by_duration:"))
		if err != nil {
			return 0, err
		}
		off, _, found, err := part.OffsetForTimestamp(now.Add(-d).UnixMilli())
		if err != nil {
			return 0, err
		}
		if !found {
			return part.HighWatermark(), nil
		}
		return min(off, part.HighWatermark()), nil
	}
	return 0, fmt.Errorf("%w: share.auto.offset.reset %q is not latest, earliest or by_duration:<duration>", share.ErrInvalidPartitionConfig, policy)
}

// ParseISODuration parses the ISO-8601 durations of Java's
// Duration.parse that share.auto.offset.reset's by_duration takes:
// PnDTnHnMn.nS, each part optional (P1D, PT30M, PT1.5S).
func ParseISODuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%w: %q is not an ISO-8601 duration such as P1D, PT2H or PT30M", share.ErrInvalidPartitionConfig, s)
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "P")
	if !ok || rest == "" {
		return 0, bad
	}
	var d time.Duration
	inTime := false
	any := false
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return 0, bad
			}
			inTime, rest = true, rest[1:]
			continue
		}
		i := strings.IndexAny(rest, "DHMS")
		if i <= 0 {
			return 0, bad
		}
		v, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil || v < 0 {
			return 0, bad
		}
		unit := map[byte]time.Duration{'D': 24 * time.Hour, 'H': time.Hour, 'M': time.Minute, 'S': time.Second}[rest[i]]
		if (rest[i] == 'D') == inTime {
			return 0, bad
		}
		d += time.Duration(v * float64(unit))
		rest, any = rest[i+1:], true
	}
	if !any {
		return 0, bad
	}
	return d, nil
}
