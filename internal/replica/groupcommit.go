package replica

// The group commit, as docs/DESIGN.md ("Durability and group commit")
// tells it: Partition.append stages a batch (fsync mode) and markDirty
// queues its partition; a write round (flushLoop, flushRound,
// Partition.flush) writes what is staged; an fsync round (syncLoop,
// syncRound) fsyncs it, and advanceIfGen and advance move the high
// watermark and wake the waiters. A failed write drops what is staged
// (dropStaged); a failed fsync fails the partition (fail).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/berthmq/berth/internal/latency"
	blog "github.com/berthmq/berth/internal/log"
)

// writtenGroup is batches the flusher wrote at one time, waiting for the
// syncer (the fsync_wait and fsync stages count each batch).
type writtenGroup struct {
	at time.Time
	n  int
}

// durableGroup is n batches a leader's fsync made durable at at, up to
// offset end, waiting for the high watermark (the isr_wait stage).
type durableGroup struct {
	end int64
	n   int
	at  time.Time
}

// maxReplicating bounds the groups a leader keeps for isr_wait while its
// followers lag; older ones are dropped uncounted.
const maxReplicating = 4096

// replicated queues g for the isr_wait stage.
func (p *Partition) replicated(g durableGroup) {
	p.syncMu.Lock()
	if len(p.replicating) >= maxReplicating {
		p.replicating = p.replicating[1:]
	}
	p.replicating = append(p.replicating, g)
	p.syncMu.Unlock()
}

// observeReplicated counts the isr_wait of the groups the high watermark
// hw now covers.
func (p *Partition) observeReplicated(hw int64) {
	now := time.Now()
	p.syncMu.Lock()
	i := 0
	for ; i < len(p.replicating) && p.replicating[i].end <= hw; i++ {
		g := p.replicating[i]
		p.mgr.Metrics.Stages.ObserveN(latency.ISRWait, now.Sub(g.at), g.n)
	}
	if i > 0 {
		p.replicating = append(p.replicating[:0], p.replicating[i:]...)
	}
	p.syncMu.Unlock()
}

// markDirty queues p for the next group commit.
func (m *Manager) markDirty(p *Partition) {
	if !m.cfg.Fsync {
		// os mode: readable and acknowledged at once; flushed in the background.
		p.advance(p.log.LogEndOffset())
	}
	if p.dirty.Swap(true) {
		return
	}
	m.dirtyMu.Lock()
	m.dirty = append(m.dirty, p)
	m.dirtyMu.Unlock()
	if m.cfg.Fsync {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

// The group commit is a two-stage pipeline (durability.mode=fsync):
//
//   - flushLoop writes every partition's staged batches to its log (a few
//     large writes into the page cache) as soon as there are some, then
//     hands the partition to the syncer;
//   - syncLoop fsyncs the partitions written since its last round and
//     advances their high watermarks, waking producers waiting for acks and
//     consumers waiting for data.
//
// Writing round N+1 overlaps the fsync of round N, so neither the disk nor
// the CPU waits for the other; appends that arrive during a round join the
// next one, so one fsync covers many producers. In os mode there is no
// staging: syncLoop alone fsyncs dirty partitions every
// log.flush.interval.ms.
func (m *Manager) flushLoop(ctx context.Context) {
	defer m.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		}
		if !m.flushRound() {
			continue
		}
		select {
		case m.syncKick <- struct{}{}:
		default:
		}
	}
}

// flushRound writes the staged batches of every partition appended to
// since the last round; false when there were none.
func (m *Manager) flushRound() bool {
	batch := m.takeDirty()
	if len(batch) == 0 {
		return false
	}
	m.forEach(batch, func(p *Partition) {
		if p.closed.Load() {
			return
		}
		if h := m.flushHook.Load(); h != nil {
			(*h)(p)
		}
		if err := p.flush(); err != nil {
			return // producers of the dropped batches get an error
		}
		if !p.toSync.Swap(true) {
			m.dirtyMu.Lock()
			m.written = append(m.written, p)
			m.dirtyMu.Unlock()
		}
	})
	return true
}

// maxFlushChunk bounds one write of staged batches.
const maxFlushChunk = 4 << 20

// flushBufs are the buffers a write round joins small staged batches in,
// shared by all partitions: one per partition kept up to 8 MiB each, and
// 10,000 partitions written once held 3.8 GB.
var flushBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// flush writes the staged batches to the log, a few large writes instead
// of one per produce request. It runs on the flusher, one round at a time,
// so staged batches reach the log in order. On a failed write every staged
// batch is dropped and its producers get an error; offsets and producer
// state are rebuilt from the log.
func (p *Partition) flush() error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.appendMu.Lock()
	staged, aborted, stagedAt := p.staged, p.stagedAborted, p.stagedAt
	p.unstage()
	p.appendMu.Unlock()
	if len(staged) == 0 {
		return nil
	}
	stages := &p.mgr.Metrics.Stages
	took := time.Now()
	for _, at := range stagedAt {
		stages.Observe(latency.FlushWait, took.Sub(at))
	}
	if p.mgr.takenHook != nil {
		p.mgr.takenHook(p)
	}
	defer p.notify() // followers long-poll for written data
	epoch := p.leaderEpoch.Load()
	// write appends b with the index entries of its ABORT markers.
	write := func(b []byte) error {
		res, err := p.log.AppendTxn(b, epoch, aborted)
		for err == nil && len(aborted) > 0 && aborted[0].LastOffset <= res.LastOffset {
			aborted = aborted[1:]
		}
		return err
	}
	limit := int(p.cfg.Load().Log.SegmentBytes)
	if limit > maxFlushChunk || limit <= 0 {
		limit = maxFlushChunk
	}
	var bp *[]byte // from flushBufs, once two batches are joined
	var buf []byte
	start := p.log.LogEndOffset()
	var err error
	for i, b := range staged {
		if len(buf) > 0 && len(buf)+len(b) > limit {
			if err = write(buf); err != nil {
				break
			}
			buf = buf[:0]
		}
		if len(buf) == 0 && (len(b) >= limit || i == len(staged)-1) {
			// Large or last alone: write it without copying.
			if err = write(b); err != nil {
				break
			}
			continue
		}
		if bp == nil {
			bp = flushBufs.Get().(*[]byte)
			buf = (*bp)[:0]
		}
		buf = append(buf, b...)
	}
	if err == nil && len(buf) > 0 {
		err = write(buf)
	}
	if err == nil {
		written := time.Now()
		stages.ObserveN(latency.Write, written.Sub(took), len(staged))
		p.syncMu.Lock()
		p.unsynced = append(p.unsynced, writtenGroup{at: written, n: len(staged)})
		p.syncMu.Unlock()
	}
	if bp != nil && cap(buf) <= 2*maxFlushChunk {
		*bp = buf[:0]
		flushBufs.Put(bp)
	}
	if err != nil {
		// Take back what this round wrote, so no record whose producer is
		// told "failed" stays in the log; but never below the high
		// watermark, which a concurrent fsync may have moved over part of
		// it (consumers may have read those; their producers get an error
		// and an idempotent retry is a duplicate). Bumping the generation
		// first stops an fsync in flight from advancing past the cut.
		p.genMu.Lock()
		p.gen.Add(1)
		hw := p.hw.Load()
		p.genMu.Unlock()
		if terr := p.log.Truncate(max(start, hw)); terr != nil {
			p.fail(fmt.Errorf("undoing a failed write: %w", terr))
		}
		p.dropStaged(err)
	}
	return err
}

// dropStaged forgets staged batches after a failed write.
func (p *Partition) dropStaged(cause error) {
	p.appendMu.Lock()
	p.gen.Add(1)
	p.unstage()
	p.nextOffset = p.log.LogEndOffset()
	p.reloadProducers()
	p.appendMu.Unlock()
	if errors.Is(cause, blog.ErrDiskFull) {
		p.logg.Error("write refused: disk full; unacknowledged records dropped, writes resume when space returns",
			"topic", p.Topic, "partition", p.Index, "err", cause)
	} else {
		p.logg.Error("write failed; unacknowledged records dropped", "topic", p.Topic, "partition", p.Index, "err", cause)
	}
	p.notify()
}

func (m *Manager) syncLoop(ctx context.Context) {
	defer m.wg.Done()
	var tick <-chan time.Time
	if !m.cfg.Fsync {
		t := time.NewTicker(m.cfg.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return // Close flushes and syncs every partition
		case <-m.syncKick:
		case <-tick:
		}
		m.syncRound()
	}
}

// syncRound fsyncs the partitions written since the last round (os mode:
// appended to) and advances their high watermarks.
func (m *Manager) syncRound() {
	var batch []*Partition
	if m.cfg.Fsync {
		m.dirtyMu.Lock()
		batch = m.written
		m.written = nil
		m.dirtyMu.Unlock()
		for _, p := range batch {
			p.toSync.Store(false)
		}
	} else {
		batch = m.takeDirty()
	}
	if len(batch) == 0 {
		return
	}
	m.Metrics.SyncRounds.Add(1)
	if m.fsys != nil && len(batch) >= m.cfg.SyncFilesystemPartitions {
		m.syncFilesystem(batch)
		return
	}
	m.forEach(batch, func(p *Partition) {
		if p.closed.Load() {
			return
		}
		start := time.Now()
		gen, groups := p.takeUnsynced()
		if m.syncHook != nil {
			m.syncHook(p)
		}
		off, err := p.log.Sync()
		took := time.Since(start)
		m.Metrics.Fsyncs.Add(1)
		m.Metrics.FsyncNanos.Add(int64(took))
		m.synced(p, gen, groups, start, took, off, err, m.cfg.Fsync)
	})
}

// takeUnsynced returns the partition's staging generation and the write
// groups an fsync starting now covers.
func (p *Partition) takeUnsynced() (uint64, []writtenGroup) {
	gen := p.gen.Load()
	p.syncMu.Lock()
	groups := p.unsynced
	p.unsynced = nil
	p.syncMu.Unlock()
	return gen, groups
}

// syncFilesystem makes a round's partitions durable with one sync of the
// log directory's filesystem (log.flush.filesystem.partitions): one
// journal commit and one device flush instead of one per partition. If it
// fails, each partition fsyncs its own files, so only the partition whose
// write-back failed is failed.
func (m *Manager) syncFilesystem(batch []*Partition) {
	type pending struct {
		p      *Partition
		gen    uint64
		groups []writtenGroup
		ps     *blog.PendingSync
	}
	pend := make([]pending, 0, len(batch))
	for _, p := range batch {
		if p.closed.Load() {
			continue
		}
		gen, groups := p.takeUnsynced()
		if m.syncHook != nil {
			m.syncHook(p)
		}
		pend = append(pend, pending{p: p, gen: gen, groups: groups, ps: p.log.BeginSync()})
	}
	start := time.Now()
	err := m.fsys.Sync()
	took := time.Since(start)
	m.Metrics.Fsyncs.Add(1)
	m.Metrics.FsyncNanos.Add(int64(took))
	m.Metrics.FilesystemSyncs.Add(1)
	if err != nil {
		m.log.Warn("syncing the log directory's filesystem failed; fsyncing each partition's files to find the one that failed",
			"partitions", len(pend), "err", err)
	}
	// In parallel: End may write checkpoints (the leader-epoch and
	// recovery-point ones after a segment rolled), and after a failed sync
	// it fsyncs the partition's files.
	m.parallel(len(pend), syncParallelism, func(i int) {
		x := pend[i]
		off, serr := x.ps.End(err == nil)
		took := took
		if err != nil {
			m.Metrics.Fsyncs.Add(1)
			took = time.Since(start)
		}
		m.synced(x.p, x.gen, x.groups, start, took, off, serr, false)
	})
}

// synced finishes a partition's part of a sync round: the fsync that
// started at start and took took made its log durable up to off (or failed
// with err), covering groups, at staging generation gen. runway asks for
// preallocated zeros (prealloc.go): only for a partition fsynced on its
// own, whose fdatasync they spare a journal commit. A filesystem sync
// commits the journal anyway, and runways spread over many partitions
// make it slower (500 partitions: 21 ms against 5 ms appending).
func (m *Manager) synced(p *Partition, gen uint64, groups []writtenGroup, start time.Time, took time.Duration, off int64, err error, runway bool) {
	n := 0
	leading := p.leading.Load()
	done := start.Add(took)
	for _, g := range groups {
		if leading {
			m.Metrics.Stages.ObserveN(latency.FsyncWait, start.Sub(g.at), g.n)
			m.Metrics.Stages.ObserveN(latency.Fsync, took, g.n)
		} else if err == nil {
			m.Metrics.Stages.ObserveN(latency.ReplicaFsync, done.Sub(g.at), g.n)
		}
		n += g.n
	}
	if n > 0 && err == nil && !leading {
		p.durableUnacked.CompareAndSwap(0, done.UnixNano())
	}
	if n > 0 && err == nil && leading {
		p.replicated(durableGroup{end: off, n: n, at: done})
	}
	if err != nil {
		if errors.Is(err, blog.ErrClosed) {
			return
		}
		p.fail(err)
		return
	}
	p.advanceIfGen(off, gen)
	if n > 0 && p.leading.Load() {
		// An earlier round may have covered these batches already (they
		// were written after it took its groups but before its sync
		// began): the high watermark did not move now, so count them here.
		p.observeReplicated(p.hw.Load())
	}
	if runway {
		m.wantRunway(p)
	}
}

// advanceIfGen advances the high watermark after an fsync that started
// at staging generation gen, unless the generation changed since (a
// failed write dropped batches, a follower cut its log, a leader was
// demoted): then the log may have been truncated below off. The partition
// is then queued for another round, which fsyncs the log as it is now:
// nothing else may come to sync what the log holds (a follower appends
// again only once that is durable, see waitSynced).
func (p *Partition) advanceIfGen(off int64, gen uint64) {
	p.genMu.Lock()
	same := p.gen.Load() == gen
	if same {
		p.advance(off)
	}
	p.genMu.Unlock()
	if !same {
		p.mgr.markDirty(p)
	}
}

// advance is called after an fsync up to off (os mode: after a write).
// The high watermark follows: on a leader up to the in-sync followers'
// progress, on a follower up to the leader's high watermark.
func (p *Partition) advance(off int64) {
	moved := off > p.synced.Load()
	if moved {
		p.synced.Store(off)
	}
	if p.leading.Load() {
		p.updateHW()
	} else {
		p.followerHW()
	}
	if moved {
		p.notify() // acks=1 waits for synced (a moved high watermark notified already)
	}
}

// fail marks the partition as unable to take writes after an fsync error:
// the OS may have dropped the dirty pages, so nothing past the last good
// sync can be promised.
func (p *Partition) fail(err error) {
	p.failed.Store(&err)
	p.logg.Error("fsync failed: partition refuses writes until restart", "topic", p.Topic, "partition", p.Index, "err", err)
	p.notify()
}

// takeDirty returns the partitions appended to since the last call.
func (m *Manager) takeDirty() []*Partition {
	m.dirtyMu.Lock()
	batch := m.dirty
	m.dirty = nil
	m.dirtyMu.Unlock()
	// Clear the flag before writing so an append meanwhile queues the
	// partition again.
	for _, p := range batch {
		p.dirty.Store(false)
	}
	return batch
}

// forEach runs fn on every partition, in parallel when there are several:
// writes and fsyncs of different files proceed in parallel on the device.
func (m *Manager) forEach(batch []*Partition, fn func(*Partition)) {
	if len(batch) == 1 {
		fn(batch[0])
		return
	}
	m.parallel(len(batch), syncParallelism, func(i int) { fn(batch[i]) })
}

// syncParallelism is how many partitions a round writes or fsyncs at once.
const syncParallelism = 8

// flushAndSync runs a write round and then an fsync round inline.
func (m *Manager) flushAndSync() {
	if m.cfg.Fsync {
		m.flushRound()
	}
	m.syncRound()
}
