// Package replica holds partition replicas: the log, the high watermark,
// idempotent-producer state and the group-committed fsync that makes an
// acknowledged write durable.
package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthmq/berth/internal/batch"
	blog "github.com/berthmq/berth/internal/log"
)

// Errors of the partition API.
var (
	ErrNotLeader     = errors.New("replica: not the leader for this partition") // NOT_LEADER_OR_FOLLOWER
	ErrFencedEpoch   = errors.New("replica: leader epoch is older")             // FENCED_LEADER_EPOCH
	ErrUnknownEpoch  = errors.New("replica: leader epoch is newer")             // UNKNOWN_LEADER_EPOCH
	ErrStorage       = errors.New("replica: storage error")                     // KAFKA_STORAGE_ERROR
	ErrClosed        = errors.New("replica: partition closed")                  // NOT_LEADER_OR_FOLLOWER
	ErrDiskLow       = errors.New("replica: log directory is nearly full")      // KAFKA_STORAGE_ERROR
	ErrAckTimeout    = errors.New("replica: timed out waiting for the write to become durable")
	ErrInvalidOffset = errors.New("replica: offset is beyond the high watermark") // OFFSET_OUT_OF_RANGE
)

// Partition is one replica of a topic partition: the leader, which takes
// produce requests, or a follower copying the leader's log (replication.go,
// fetcher.go).
//
// Locking: flushMu (the flusher's writes, a follower's appends and
// truncations, a demotion dropping staged batches, producer snapshots) →
// appendMu (producer state, offset assignment and the
// staged batches, in order) → genMu → rmu (replication state). The high
// watermark is an atomic moved by the syncer, by follower fetches (leader)
// and by fetch responses (follower). The waiters set has its own small
// mutex, never held while taking another.
//
// With durability.mode=fsync, Append does not write: it assigns offsets and
// stages the batch; the flusher writes everything staged since the last
// round in a few large writes and the syncer then fsyncs (write-behind
// group commit).
// Nobody reads staged data: reads stop at the high watermark, which only
// moves past data that is written and synced.
type Partition struct {
	Topic   string
	TopicID [16]byte
	Index   int32

	log  *blog.Log
	mgr  *Manager
	logg *slog.Logger

	appendMu  sync.Mutex
	producers *producerState
	prodDirty bool
	// txns is what readers need of the transactions (txn.go), published
	// under appendMu; nil until the partition has seen one.
	txns atomic.Pointer[txnView]
	// nextOffset is the offset the next staged record gets (fsync mode).
	nextOffset int64
	// staged holds appended batches not yet written to the log, in order;
	// stagedAt when each was staged (the flush_wait stage).
	staged   [][]byte
	stagedAt []time.Time
	// stagedAborted are the transaction index entries of the ABORT
	// markers among staged, written with them.
	stagedAborted []blog.AbortedTxn
	// unsynced are the flusher's writes (on a follower, the fetcher's)
	// the syncer has not fsynced yet, for the fsync_wait and fsync stages
	// (replica_fsync); guarded by syncMu.
	syncMu   sync.Mutex
	unsynced []writtenGroup
	// durableUnacked is when (Unix ns) a follower's fetched data last
	// became durable with no fetch sent since to tell the leader, for the
	// replica_ack stage; 0 when none.
	durableUnacked atomic.Int64
	// replicating are fsynced batches of this leader that the high
	// watermark has not passed yet, for the isr_wait stage; guarded by
	// syncMu, cleared on a leadership change.
	replicating []durableGroup
	// gen changes when staged batches are dropped after a failed write, so
	// their producers get an error instead of a later record's ack.
	gen atomic.Uint64
	// leaderGen is the generation a leadership change last moved gen to:
	// writes staged before it get NOT_LEADER_OR_FOLLOWER, not a storage
	// error.
	leaderGen atomic.Uint64

	leaderEpoch atomic.Int32
	hw          atomic.Int64 // high watermark: what consumers may read and acks wait for
	synced      atomic.Int64 // offset below which data is fsync'd
	failed      atomic.Pointer[error]
	dirty       atomic.Bool // queued on the flusher (os mode: the syncer)
	toSync      atomic.Bool // written, queued on the syncer
	// genMu makes "the staging generation is unchanged, so advance the
	// high watermark" atomic against a failed write bumping it.
	genMu  sync.Mutex
	closed atomic.Bool

	cfg atomic.Pointer[TopicConfig]

	wmu     sync.Mutex // guards waiters
	waiters map[*Waiter]struct{}

	// Replication (replication.go, fetcher.go).
	leading  atomic.Bool
	adding   atomic.Bool  // a reassignment is adding this replica (throttled)
	leaderHW atomic.Int64 // follower: the leader's high watermark
	// hwCheckpointed is the high watermark last written to the
	// high-watermark checkpoint (hwcheckpoint.go); hwMu serialises its
	// writers (the checkpoint ticker and closing).
	hwCheckpointed atomic.Int64
	hwMu           sync.Mutex
	// flushMu serialises writes to the log that bypass appendMu (the
	// flusher's) with a follower's truncation, and with what needs the
	// producer state to match the log: a demotion dropping staged
	// batches, a producer snapshot.
	flushMu sync.Mutex
	rmu     sync.Mutex // guards repl
	repl    replState
}

// TopicConfig is the effective configuration of a topic's partitions.
type TopicConfig struct {
	Log               blog.Config
	MaxMessageBytes   int
	LogAppendTime     bool
	TimestampBeforeMs int64
	TimestampAfterMs  int64
	MinInsyncReplicas int
	CleanupPolicy     string
	Compact           blog.CompactConfig
}

// Config returns the partition's current topic configuration.
func (p *Partition) Config() *TopicConfig { return p.cfg.Load() }

// HighWatermark is the offset below which records are committed (durable).
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LogStartOffset is the first readable offset.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the offset the next record gets.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// LeaderEpoch is the current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// Log exposes the underlying log for size and segment queries.
func (p *Partition) Log() *blog.Log { return p.log }

// CheckEpoch validates a client's current leader epoch (-1 = not given).
func (p *Partition) CheckEpoch(e int32) error {
	if e < 0 {
		return nil
	}
	cur := p.leaderEpoch.Load()
	switch {
	case e < cur:
		return ErrFencedEpoch
	case e > cur:
		return ErrUnknownEpoch
	}
	return nil
}

// AppendResult tells a producer what happened to its batch.
type AppendResult struct {
	BaseOffset     int64
	LogAppendTime  int64 // -1 for CreateTime
	LogStartOffset int64
	// Durable is the offset the high watermark must reach before the
	// write may be acknowledged.
	Durable   int64
	Duplicate bool
	Records   int
	// Gen is the staging generation to pass to WaitDurable.
	Gen uint64
}

// stage queues data for the flusher; appendMu is held.
func (p *Partition) stage(data []byte) {
	p.staged = append(p.staged, data)
	p.stagedAt = append(p.stagedAt, time.Now())
}

// unstage forgets the staged batches; appendMu is held.
func (p *Partition) unstage() {
	p.staged, p.stagedAt, p.stagedAborted = nil, nil, nil
}

// Append validates and appends one partition's produce data. It runs in
// request order on the connection's read loop.
func (p *Partition) Append(data []byte, scratch *batch.Scratch) (AppendResult, error) {
	return p.append(data, scratch, nil)
}

// AppendChecked is Append for a transactional batch that the transaction
// coordinator said belongs to an ongoing transaction: it is refused with
// ErrTxnChanged if a marker ended the producer's transaction since g was
// taken (verify.go).
func (p *Partition) AppendChecked(data []byte, scratch *batch.Scratch, g TxnGuard) (AppendResult, error) {
	return p.append(data, scratch, &g)
}

func (p *Partition) append(data []byte, scratch *batch.Scratch, g *TxnGuard) (AppendResult, error) {
	res := AppendResult{LogAppendTime: -1}
	if p.closed.Load() {
		return res, ErrClosed
	}
	if errp := p.failed.Load(); errp != nil {
		return res, fmt.Errorf("%w: %v", ErrStorage, *errp)
	}
	if p.mgr.diskLow.Load() {
		return res, ErrDiskLow
	}
	cfg := p.cfg.Load()
	now := p.mgr.now().UnixMilli()
	v, err := batch.Validate(data, batch.Limits{
		MaxBatchBytes: cfg.MaxMessageBytes,
		LogAppendTime: cfg.LogAppendTime,
		Now:           now,
		BeforeMaxMs:   cfg.TimestampBeforeMs,
		AfterMaxMs:    cfg.TimestampAfterMs,
		RequireKeys:   strings.Contains(cfg.CleanupPolicy, "compact"),
	}, scratch)
	if err != nil {
		return res, err
	}
	if cfg.LogAppendTime {
		res.LogAppendTime = now
	}
	res.Records = v.Records
	h := &v.Batches[0]
	idem := h.ProducerID >= 0
	if len(v.Batches) > 1 {
		// An idempotent or transactional batch must come alone, wherever
		// it stands: one behind a plain batch would skip the producer
		// state's checks (and the transactional id's authorization, which
		// looks at the first batch).
		for i := range v.Batches {
			if v.Batches[i].ProducerID >= 0 || v.Batches[i].Transactional() {
				return res, ErrMultipleBatches
			}
		}
	}
	if h.Transactional() && !idem {
		return res, fmt.Errorf("%w: a transactional batch needs a producer id", batch.ErrInvalidRecord)
	}

	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.leading.Load() {
		return res, ErrNotLeader
	}
	res.Gen = p.gen.Load()
	if idem {
		dup, err := p.producers.check(h)
		if err != nil {
			return res, err
		}
		if dup != nil {
			res.BaseOffset = dup.FirstOffset
			res.Durable = dup.LastOffset + 1
			res.Duplicate = true
			res.LogStartOffset = p.log.LogStartOffset()
			return res, nil
		}
		if g != nil && h.Transactional() {
			if err := g.check(p.producers, h.ProducerID); err != nil {
				return res, err
			}
		}
	}
	if p.mgr.cfg.Fsync {
		// Stage: the flusher writes it, and the syncer fsyncs it, with
		// everything else appended in this round.
		base := p.nextOffset
		p.nextOffset += int64(v.Records)
		p.stage(data)
		if idem {
			p.producers.update(h, base, now)
			p.prodDirty = true
			if h.Transactional() {
				p.publishTxns()
			}
		}
		res.BaseOffset = base
		res.Durable = p.nextOffset
		res.LogStartOffset = p.log.LogStartOffset()
		p.mgr.markDirty(p)
		return res, nil
	}
	ar, err := p.log.Append(data, p.leaderEpoch.Load())
	if err != nil {
		if errors.Is(err, blog.ErrDiskFull) {
			p.logg.Error("append refused: disk full; writes resume when space returns",
				"topic", p.Topic, "partition", p.Index, "err", err)
		} else {
			p.logg.Error("append failed", "topic", p.Topic, "partition", p.Index, "err", err)
		}
		return res, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if idem {
		p.producers.update(h, ar.FirstOffset, now)
		p.prodDirty = true
		if h.Transactional() {
			p.publishTxns()
		}
	}
	res.BaseOffset = ar.FirstOffset
	res.Durable = ar.LogEndOffset
	res.LogStartOffset = p.log.LogStartOffset()
	p.nextOffset = ar.LogEndOffset
	p.mgr.markDirty(p)
	return res, nil
}

// WaitDurable blocks until a write ending at off may be acknowledged, the
// partition fails or loses its leadership, the staged write of generation
// gen is dropped, or the deadline passes. With all (acks=all) it waits for
// the high watermark, so for every in-sync replica, and then checks that
// the ISR still meets min.insync.replicas; otherwise (acks=1) for this
// replica's own durable offset.
func (p *Partition) WaitDurable(off int64, gen uint64, deadline time.Time, all bool) error {
	reached := func() bool {
		if all {
			return p.hw.Load() >= off
		}
		return p.synced.Load() >= off
	}
	done := func() error {
		if all {
			return p.minISRCheck()
		}
		return nil
	}
	if !p.leading.Load() {
		return ErrNotLeader
	}
	if err := p.genChanged(gen); err != nil {
		return err
	}
	if reached() {
		return done()
	}
	w := NewWaiter()
	defer w.Done()
	p.Watch(w)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		if !p.leading.Load() {
			return ErrNotLeader
		}
		if err := p.genChanged(gen); err != nil {
			return err
		}
		if reached() {
			return done()
		}
		if errp := p.failed.Load(); errp != nil {
			return fmt.Errorf("%w: %v", ErrStorage, *errp)
		}
		if p.closed.Load() {
			return ErrClosed
		}
		select {
		case <-w.C:
		case <-t.C:
			return ErrAckTimeout
		}
	}
}

// genChanged reports why a write staged at generation gen will never be
// acknowledged, or nil while it may be: the leadership changed (the new
// leader's log decides), or a write failed.
func (p *Partition) genChanged(gen uint64) error {
	if p.gen.Load() == gen {
		return nil
	}
	if p.leaderGen.Load() > gen {
		return fmt.Errorf("%w: the leadership changed before the write was replicated", ErrNotLeader)
	}
	return fmt.Errorf("%w: the write failed before it was durable", ErrStorage)
}

// ReadResult is what a fetch of one partition returns.
type ReadResult struct {
	Records          []byte
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	LogEndOffset     int64
	// Aborted lists, for a read_committed read, the aborted transactions
	// that overlap the records returned (from the fetch offset to the end
	// of the last batch).
	Aborted []AbortedTxn
}

// Read returns committed batches from offset (read_uncommitted: up to the
// high watermark). alloc, when not nil, provides the result buffer (see
// log.ReadWith).
func (p *Partition) Read(offset int64, maxBytes int32, minOne bool, alloc func(int) []byte) (ReadResult, error) {
	return p.read(offset, maxBytes, minOne, alloc, false)
}

// ReadCommitted is Read for isolation.level=read_committed: batches up to
// the last stable offset, with the aborted transactions among them.
func (p *Partition) ReadCommitted(offset int64, maxBytes int32, minOne bool, alloc func(int) []byte) (ReadResult, error) {
	return p.read(offset, maxBytes, minOne, alloc, true)
}

func (p *Partition) read(offset int64, maxBytes int32, minOne bool, alloc func(int) []byte, committed bool) (ReadResult, error) {
	hw := p.hw.Load()
	lso := p.lastStable(hw)
	r := ReadResult{HighWatermark: hw, LastStableOffset: lso, LogStartOffset: p.log.LogStartOffset(), LogEndOffset: p.log.LogEndOffset()}
	upto := hw
	if committed {
		upto = lso
	}
	if offset > upto && offset <= r.LogEndOffset {
		// Written but not yet durable (or stable): nothing to read yet,
		// not an error.
		return r, nil
	}
	data, err := p.log.ReadWith(alloc, offset, maxBytes, upto, minOne)
	if err != nil {
		return r, err
	}
	r.Records = data
	if committed && len(data) > 0 {
		// The aborted transactions that overlap the batches returned, as
		// Kafka bounds them: not every one up to the LSO.
		end := offset
		for b := data; len(b) >= batch.HeaderSize; {
			h := batch.DecodeHeader(b)
			if h.Size() <= 0 || h.Size() > len(b) {
				break
			}
			end = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			b = b[h.Size():]
		}
		if r.Aborted, err = p.abortedIn(offset, min(max(end, offset+1), upto)); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Waiter is woken when a watched partition's high watermark moves.
type Waiter struct {
	C     chan struct{}
	parts []*Partition
}

// NewWaiter makes a waiter; call Done when finished.
func NewWaiter() *Waiter { return &Waiter{C: make(chan struct{}, 1)} }

// Watch registers w on p.
func (p *Partition) Watch(w *Waiter) {
	p.wmu.Lock()
	if p.waiters == nil {
		p.waiters = map[*Waiter]struct{}{}
	}
	p.waiters[w] = struct{}{}
	p.wmu.Unlock()
	w.parts = append(w.parts, p)
}

// Done unregisters w everywhere.
func (w *Waiter) Done() {
	for _, p := range w.parts {
		p.wmu.Lock()
		delete(p.waiters, w)
		p.wmu.Unlock()
	}
	w.parts = nil
}

func (p *Partition) notify() {
	p.wmu.Lock()
	for w := range p.waiters {
		select {
		case w.C <- struct{}{}:
		default:
		}
	}
	p.wmu.Unlock()
}

// DeleteRecordsBefore moves the log start offset (DeleteRecords). off=-1
// means the high watermark.
func (p *Partition) DeleteRecordsBefore(off int64) (int64, error) {
	hw := p.hw.Load()
	if off == -1 {
		off = hw
	}
	if off < 0 || off > hw {
		return 0, ErrInvalidOffset
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if off <= p.log.LogStartOffset() {
		return p.log.LogStartOffset(), nil
	}
	if err := p.log.SetLogStartOffset(off); err != nil {
		return 0, err
	}
	return p.log.LogStartOffset(), nil
}

// snapshotProducers saves idempotence state so a restart need not rescan
// the whole log. The state must not be ahead of the log: not while
// batches are staged, nor while a write round has taken them and not yet
// written them (it holds flushMu), or the snapshot would stand at the
// log end for batches the log may never get (a crash, a failed write, a
// follower's truncation). The periodic snapshot (force unset) skips a
// partition whose write round is in progress rather than hold up the
// flusher; the next one takes it.
func (p *Partition) snapshotProducers(force bool) {
	if force {
		p.flushMu.Lock()
	} else if !p.flushMu.TryLock() {
		return
	}
	defer p.flushMu.Unlock()
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	cutoff := p.mgr.now().Add(-p.mgr.producerExpiry).UnixMilli()
	if p.producers.expire(cutoff) {
		p.prodDirty = true
	}
	if !p.prodDirty && !force {
		return
	}
	if len(p.staged) > 0 {
		// The state covers batches not in the log yet; a snapshot of it
		// could make a retry look like a duplicate of a lost batch.
		return
	}
	b, err := p.producers.marshal()
	if err == nil {
		err = p.log.SaveProducerSnapshot(p.log.LogEndOffset(), b)
	}
	if err != nil {
		p.logg.Warn("producer snapshot failed", "topic", p.Topic, "partition", p.Index, "err", err)
		return
	}
	p.prodDirty = false
}

// reloadProducers replaces the producer state with one rebuilt from the
// log (loadProducers): what staged batches that never reached the log put
// in it, or what a truncation cut, is gone. Called with appendMu held.
func (p *Partition) reloadProducers() {
	p.producers = newProducerState()
	if err := p.loadProducers(); err != nil {
		p.logg.Warn("rebuilding producer state", "topic", p.Topic, "partition", p.Index, "err", err)
	}
}

// loadProducers rebuilds idempotence state: the snapshot, then every batch
// after it. The replay also writes the transaction index entries of the
// ABORT markers it meets, which the log skips when it has them already:
// so a crash between a marker and its entry, or a truncation, loses none
// (the snapshot is saved only once the entries below it are durable).
// The aborted transactions of a version 2 snapshot go to the indexes too.
func (p *Partition) loadProducers() error {
	off, data, err := p.log.LoadProducerSnapshot()
	if err != nil {
		p.logg.Warn("producer snapshot unreadable; rebuilding from the log", "topic", p.Topic, "partition", p.Index, "err", err)
		off, data = -1, nil
	}
	from := p.log.LogStartOffset()
	if off >= 0 && data != nil && off <= p.log.LogEndOffset() {
		if err := p.producers.unmarshal(data); err == nil {
			from = off
		} else {
			p.producers = newProducerState()
		}
	}
	if off > p.log.LogEndOffset() {
		p.producers = newProducerState()
		from = p.log.LogStartOffset()
	}
	var aborted []blog.AbortedTxn
	if len(p.producers.legacyAborted) > 0 {
		aborted = p.producers.legacyEntries(from)
		p.producers.legacyAborted = nil
		p.prodDirty = true // rewrite the snapshot without them
	}
	err = p.log.ScanBatches(from, func(bh batch.Header) error {
		if bh.ProducerID < 0 {
			return nil
		}
		if bh.Attributes&batch.AttrControl != 0 {
			data, err := p.log.Read(bh.BaseOffset, 1, bh.LastOffset()+1, true)
			if err != nil {
				return err
			}
			mk, err := batch.ParseMarker(data)
			if err != nil {
				p.logg.Warn("skipping a malformed control batch", "topic", p.Topic, "partition", p.Index, "offset", bh.BaseOffset, "err", err)
				return nil
			}
			if mk.Type == batch.ControlAbort {
				if t, ok := p.producers.abortEntry(bh.ProducerID, bh.BaseOffset); ok {
					aborted = append(aborted, t)
				}
			}
			p.producers.endTxn(bh.ProducerID, bh.ProducerEpoch, mk.CoordinatorEpoch, bh.BaseOffset, bh.MaxTimestamp)
			return nil
		}
		h := batch.Header{
			Attributes: bh.Attributes,
			ProducerID: bh.ProducerID, ProducerEpoch: bh.ProducerEpoch,
			BaseSequence: bh.BaseSequence, LastOffsetDelta: bh.LastOffsetDelta, MaxTimestamp: bh.MaxTimestamp,
		}
		if e := p.producers.m[bh.ProducerID]; e != nil {
			for _, b := range e.Batches {
				if b.FirstOffset == bh.BaseOffset {
					return nil // already in the snapshot
				}
			}
		}
		p.producers.update(&h, bh.BaseOffset, bh.MaxTimestamp)
		return nil
	})
	if ierr := p.log.AppendAbortedTxns(aborted); err == nil {
		err = ierr
	}
	p.publishTxns()
	return err
}

// TimestampAt returns the timestamp of the committed record at off (for
// the age of the oldest unconsumed record); ok is false when off is not
// below the high watermark or the record is gone.
func (p *Partition) TimestampAt(off int64) (ts int64, ok bool) {
	if off >= p.hw.Load() || off < p.log.LogStartOffset() {
		return 0, false
	}
	res, err := p.Read(off, 1, true, nil)
	if err != nil || len(res.Records) == 0 {
		return 0, false
	}
	h, err := batch.ParseHeader(res.Records)
	if err != nil {
		return 0, false
	}
	if h.Attributes&batch.AttrLogAppendTime != 0 {
		return h.MaxTimestamp, true
	}
	scratch := batch.GetScratch()
	defer batch.PutScratch(scratch)
	recs, _, err := batch.Records(res.Records[:min(h.Size(), len(res.Records))], scratch)
	if err != nil {
		return 0, false
	}
	for _, r := range recs {
		if h.BaseOffset+r.OffsetDelta >= off {
			return h.BaseTimestamp + r.TimestampDelta, true
		}
	}
	return 0, false
}

// OffsetForTimestamp returns the first committed record whose timestamp is
// at or after ts (ListOffsets by time). The log's time index finds the
// batch; for a compressed batch this looks inside it, so the answer is the
// record, as Kafka gives it, not the batch.
func (p *Partition) OffsetForTimestamp(ts int64) (off, recTS int64, found bool, err error) {
	off, recTS, found, err = p.log.OffsetForTimestamp(ts)
	if err != nil || !found {
		return off, recTS, found, err
	}
	p.eachRecordOfBatch(off, func(o, rts int64) bool {
		if o >= off && rts >= ts {
			off, recTS = o, rts
			return false
		}
		return true
	})
	return off, recTS, found, nil
}

// MaxTimestamp returns the largest record timestamp and the offset of the
// first record carrying it.
func (p *Partition) MaxTimestamp() (ts, off int64) {
	ts, off = p.log.MaxTimestamp()
	if off < 0 {
		return ts, off
	}
	p.eachRecordOfBatch(off, func(o, rts int64) bool {
		if rts == ts {
			off = o
			return false
		}
		return true
	})
	return ts, off
}

// eachRecordOfBatch calls fn with the offset and timestamp of each record
// of the committed batch holding off, until fn returns false.
func (p *Partition) eachRecordOfBatch(off int64, fn func(off, ts int64) bool) {
	res, err := p.Read(off, 1, true, nil)
	if err != nil || len(res.Records) == 0 {
		return
	}
	h, err := batch.ParseHeader(res.Records)
	if err != nil || h.Size() > len(res.Records) {
		return
	}
	scratch := batch.GetScratch()
	defer batch.PutScratch(scratch)
	recs, _, err := batch.Records(res.Records[:h.Size()], scratch)
	if err != nil {
		return
	}
	for _, r := range recs {
		ts := h.BaseTimestamp + r.TimestampDelta
		if h.Attributes&batch.AttrLogAppendTime != 0 {
			ts = h.MaxTimestamp
		}
		if !fn(h.BaseOffset+r.OffsetDelta, ts) {
			return
		}
	}
}
