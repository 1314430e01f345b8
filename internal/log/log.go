// Package log is Berth's partition log storage engine: a directory of
// segments holding Kafka v2 record batches exactly as producers sent them,
// with sparse offset and time indexes, a leader-epoch cache, checkpoints, and
// crash recovery that truncates a torn or corrupt tail. The byte layout of
// every file is in docs/format/log.md.
//
// # Concurrency
//
// Log.mu owns the append path and the segment list: Append,
// AppendWithOffsets, roll, Truncate, retention, SetLogStartOffset and
// SetConfig take it. Reads never take it: the segment list is an immutable
// slice behind an atomic pointer, replaced on every change, and each
// segment's size and next offset are atomics published after the bytes are
// written; readers pin a segment with a reference count, so a segment
// deleted under a reader keeps its file open until the reader is done.
//
// Lock order: cleanMu → syncMu → ckptMu → mu → segment.idxMu. syncMu
// serialises Sync (and Close), from BeginSync to End; Sync holds mu only to
// snapshot what to fsync, never during the fsync. ckptMu serialises checkpoint writers so a stale
// snapshot never overwrites a newer one. cleanMu serialises Compact, which
// holds it for a whole round and takes mu only to snapshot the segments and
// to swap each rewritten group in (clean.go, clean_swap.go).
package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/vfs"
)

// Log is one partition's log.
type Log struct {
	dir    string
	fs     vfs.FS
	now    func() time.Time
	logger *slog.Logger

	deferMarker bool // Options.DeferMarkerSync

	syncMu  sync.Mutex
	ckptMu  sync.Mutex
	mu      sync.Mutex // the append path; see the package comment
	cleanMu sync.Mutex // one Compact at a time

	// Owned by cleanMu:
	warnedNullKey bool                     // logged once: compacted records without a key
	cleanHook     func(point string) error // tests: crash points of a clean

	// Read without mu:
	segs     atomic.Pointer[[]*segment] // oldest first; the last is active
	leo      atomic.Int64
	logStart atomic.Int64
	durable  atomic.Int64 // all data below is fsynced
	closed   atomic.Bool
	failed   atomic.Pointer[error] // sticky fsync failure
	truncGen atomic.Int64          // bumped by Truncate; readers and Sync check it
	txnDirty atomic.Bool           // a transaction index was written since its last fsync
	hasTxn   atomic.Bool           // a transaction index entry was ever loaded or written
	prodSnap atomic.Int64          // offset of the producer snapshot last saved or loaded; -1 none

	// Owned by mu:
	cfg      Config
	active   *segment
	unsynced []*segment // rolled segments not yet fsynced
	dirDirty bool       // files created, renamed or removed since the last dir fsync
	// markerPending: Open removed the clean-shutdown marker without a
	// directory fsync (Options.DeferMarkerSync); FinishOpen settles it.
	markerPending bool
	epochs        epochCache
	rp            int64        // last persisted recovery point
	cleaner       cleanerState // compaction progress; written with ckptMu held too
}

// AppendResult describes an append.
type AppendResult struct {
	FirstOffset, LastOffset, LogEndOffset int64
	MaxTimestamp                          int64 // largest batch maxTimestamp appended, -1 if none
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	BaseOffset, NextOffset, Size int64
	MaxTimestamp                 int64 // -1 if no batch carried a timestamp
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// SetConfig changes the configuration for later appends and retention runs.
// An invalid config is logged and ignored.
func (l *Log) SetConfig(cfg Config) {
	if err := cfg.Validate(); err != nil {
		l.logger.Error("log: ignoring invalid config", "dir", l.dir, "err", err)
		return
	}
	l.mu.Lock()
	l.cfg = cfg
	l.mu.Unlock()
}

// LogStartOffset is the first offset readable.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset is the offset the next appended record gets.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

func (l *Log) segments() []*segment { return *l.segs.Load() }

func (l *Log) setSegments(s []*segment) { l.segs.Store(&s) }

// writable reports why the log refuses writes, if it does.
func (l *Log) writable() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if p := l.failed.Load(); p != nil {
		return fmt.Errorf("%w: %w", ErrFailed, *p)
	}
	return nil
}

func (l *Log) fail(err error) {
	l.failed.CompareAndSwap(nil, &err)
	l.logger.Error("log: failing after fsync or truncate error; reopen to recover", "dir", l.dir, "err", err)
}

func wrapDiskFull(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

func (l *Log) nowMs() int64 { return l.now().UnixMilli() }

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

// maxIndexEntries is how many entries segment.index.bytes allows; the time
// index (12-byte entries) fills first.
func (c Config) maxIndexEntries() int { return int(c.SegmentIndexBytes) / timeEntrySize }

// ---- append path ----

// Append assigns offsets to batches, one or more whole v2 record batches back
// to back (already CRC-validated by the caller), and writes them with one
// write call. It rewrites each batch's baseOffset and partitionLeaderEpoch in
// place in the caller's buffer (both fields are outside the CRC). It rolls
// the active segment first when needed. On a write error the segment is
// truncated back, so no partial batch stays; the error wraps ErrDiskFull for
// ENOSPC/EDQUOT. Append does not fsync: see Sync.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendResult, error) {
	return l.appendAssign(batches, leaderEpoch, nil)
}

// appendAssign is Append, writing the transaction index entries of aborted
// (see AppendTxn) with the batches.
func (l *Log) appendAssign(batches []byte, leaderEpoch int32, aborted []AbortedTxn) (AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return AppendResult{}, err
	}
	first := l.leo.Load()
	next := first
	for p := 0; p < len(batches); {
		size, lastDelta, err := checkInputBatch(batches[p:])
		if err != nil {
			return AppendResult{}, fmt.Errorf("batch at byte %d: %w", p, err)
		}
		putHeader(batches[p:], next, leaderEpoch)
		next += lastDelta + 1
		p += size
	}
	if len(batches) == 0 {
		return AppendResult{}, fmt.Errorf("%w: empty append", ErrInvalidBatch)
	}
	res, err := l.appendLocked(batches, first, next-1, aborted)
	if err != nil {
		return res, err
	}
	if leaderEpoch > l.epochs.latest() {
		l.epochs.assign(leaderEpoch, first)
	}
	return res, nil
}

// AppendWithOffsets appends batches that already carry offsets and leader
// epochs (a follower replicating its leader). The first base offset must be
// >= LogEndOffset and offsets must increase; gaps are allowed (compacted
// leaders). The leader-epoch cache learns each new partitionLeaderEpoch.
func (l *Log) AppendWithOffsets(batches []byte) (AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return AppendResult{}, err
	}
	if len(batches) == 0 {
		return AppendResult{}, fmt.Errorf("%w: empty append", ErrInvalidBatch)
	}
	leo := l.leo.Load()
	prevNext, first := leo, int64(-1)
	for p := 0; p < len(batches); {
		size, lastDelta, err := checkInputBatch(batches[p:])
		if err != nil {
			return AppendResult{}, fmt.Errorf("batch at byte %d: %w", p, err)
		}
		base := peekBase(batches[p:])
		if base < prevNext {
			return AppendResult{}, fmt.Errorf("%w: batch base offset %d below %d", ErrOffsetOrder, base, prevNext)
		}
		if first < 0 {
			first = base
		}
		prevNext = base + lastDelta + 1
		p += size
	}
	res, err := l.appendLocked(batches, first, prevNext-1, nil)
	if err != nil {
		return res, err
	}
	for p := 0; p < len(batches); p += int(peekSize(batches[p:])) {
		if e := peekEpoch(batches[p:]); e > l.epochs.latest() {
			l.epochs.assign(e, peekBase(batches[p:]))
		}
	}
	return res, nil
}

// checkInputBatch checks the header fields the append path relies on: the
// rest (CRC, records) is the caller's job.
func checkInputBatch(b []byte) (size int, lastDelta int64, err error) {
	if len(b) < batch.HeaderSize {
		return 0, 0, fmt.Errorf("%w: %d trailing bytes", ErrInvalidBatch, len(b))
	}
	if b[offMagic] != 2 {
		return 0, 0, fmt.Errorf("%w: magic %d", ErrInvalidBatch, int8(b[offMagic]))
	}
	sz := peekSize(b)
	if sz < batch.HeaderSize || sz > int64(len(b)) {
		return 0, 0, fmt.Errorf("%w: batch size %d, %d bytes left", ErrInvalidBatch, sz, len(b))
	}
	lastDelta = peekLastDelta(b)
	if lastDelta < 0 {
		return 0, 0, fmt.Errorf("%w: negative lastOffsetDelta", ErrInvalidBatch)
	}
	return int(sz), lastDelta, nil
}

// appendLocked writes b (batches with final offsets first..last) to the
// active segment, rolling first if needed, and indexes it. The entries of
// aborted whose marker lies in [first, last] go to the segment's
// transaction index first, so no reader or Sync sees a marker without its
// entry; a failed data write takes them back.
func (l *Log) appendLocked(b []byte, first, last int64, aborted []AbortedTxn) (AppendResult, error) {
	if int64(len(b)) > MaxSegmentBytes {
		return AppendResult{}, fmt.Errorf("%w: append of %d bytes exceeds the largest segment", ErrInvalidBatch, len(b))
	}
	now := l.nowMs()
	s := l.active
	if l.shouldRoll(s, b, last, now) {
		if err := l.rollLocked(first); err != nil {
			return AppendResult{}, err
		}
		s = l.active
	}
	var es []AbortedTxn
	for _, t := range aborted {
		if t.LastOffset >= first && t.LastOffset <= last && (len(es) == 0 || t.LastOffset > es[len(es)-1].LastOffset) {
			es = append(es, t)
		}
	}
	n0 := 0
	if len(es) > 0 {
		n0 = s.txnCount()
		if err := l.appendTxnLocked(s, es); err != nil {
			return AppendResult{}, err
		}
	}
	pos := s.size.Load()
	if _, err := s.f.WriteAt(b, pos); err != nil {
		if terr := s.f.Truncate(pos); terr != nil {
			l.fail(fmt.Errorf("truncate %s after failed write: %w", s.name(), terr))
		}
		s.phys.Store(pos)
		if len(es) > 0 {
			if terr := s.cutTxn(n0); terr != nil {
				l.fail(terr)
			}
		}
		return AppendResult{}, fmt.Errorf("log: append to %s: %w", s.name(), wrapDiskFull(err))
	}
	if pos == 0 {
		s.rollStartMs = now
	}
	interval, maxEntries := int64(l.cfg.IndexIntervalBytes), l.cfg.maxIndexEntries()
	maxTS := int64(-1)
	for p := 0; p < len(b); {
		size := peekSize(b[p:])
		ts := peekMaxTimestamp(b[p:])
		maxTS = max(maxTS, ts)
		s.indexBatch(pos+int64(p), peekBase(b[p:]), size, ts, interval, maxEntries)
		p += int(size)
	}
	s.size.Store(pos + int64(len(b)))
	s.phys.Store(max(s.phys.Load(), pos+int64(len(b))))
	s.next.Store(last + 1)
	l.leo.Store(last + 1)
	return AppendResult{FirstOffset: first, LastOffset: last, LogEndOffset: last + 1, MaxTimestamp: maxTS}, nil
}

// shouldRoll reports whether b must go to a new segment: the active one is
// not empty and would pass segment.bytes, is older than segment.ms, would
// overflow its index, or cannot express last as a relative offset.
func (l *Log) shouldRoll(s *segment, b []byte, last, now int64) bool {
	size := s.size.Load()
	if size == 0 {
		return false
	}
	if size+int64(len(b)) > l.cfg.SegmentBytes || now-s.rollStartMs >= l.cfg.SegmentMs ||
		last-s.base > math.MaxUint32 {
		return true
	}
	// Count the index entries b would add.
	interval, add := int64(l.cfg.IndexIntervalBytes), 0
	bsi := s.bytesSinceIndex
	for p := 0; p < len(b); {
		if bsi >= interval {
			add++
			bsi = 0
		}
		sz := peekSize(b[p:])
		bsi += sz
		p += int(sz)
	}
	if add == 0 {
		return false
	}
	s.idxMu.RLock()
	n := max(s.idx.len(), s.tidx.len())
	s.idxMu.RUnlock()
	return n+add+1 > l.cfg.maxIndexEntries() // +1: the time entry added at roll
}

// rollLocked closes the active segment and starts a new one at base. The old
// segment's index files are written now, durably (replaceFile: a few
// fsyncs once per roll, under mu); its data is fsynced by the next Sync.
func (l *Log) rollLocked(base int64) error {
	old := l.active
	// A rolled segment ends at its last batch: its preallocated zeros go
	// now (made durable by the Sync that fsyncs it, before anything in the
	// new segment can be acknowledged).
	if err := l.trimLocked(old); err != nil {
		return fmt.Errorf("log: roll to %d: %w", base, err)
	}
	f, err := l.fs.OpenFile(l.path(segmentName(base)+logSuffix), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("log: roll to %d: %w", base, wrapDiskFull(err))
	}
	old.finishIndex()
	old.dropTxnMem()
	if err := old.writeIndexes(l.fs); err != nil {
		// Not fatal: an index is a cache, and Open rebuilds a missing one.
		l.logger.Warn("log: writing segment index", "dir", l.dir, "segment", old.name(), "err", err)
	}
	s := newSegment(l.dir, base, f)
	s.rollStartMs = l.nowMs()
	s.txn.mem = []byte{}
	l.unsynced = append(l.unsynced, old)
	l.dirDirty = true
	segs := l.segments()
	ns := make([]*segment, len(segs), len(segs)+1)
	copy(ns, segs)
	l.setSegments(append(ns, s))
	l.active = s
	return nil
}

// Sync fsyncs everything appended so far (rolled segments too, and the
// directory after a roll) and returns the offset below which
// all data is durable. Concurrent callers share one fsync (group commit).
// Appends and reads go on during the fsync. After an fsync error the log is
// failed (ErrFailed): it must be reopened, which recovers from disk.
func (l *Log) Sync() (int64, error) {
	return l.BeginSync().End(false)
}

// PendingSync is a Sync split in two, so that many logs can be made
// durable by one sync of the filesystem that holds them (syncfs(2))
// instead of one fsync per file: BeginSync on each, sync the filesystem,
// then End(true) on each; if that sync failed, End(false) on each, which
// fsyncs the log's own files and so finds the log whose write failed.
// Between the two the log's Syncs and Close wait.
type PendingSync struct {
	l        *Log
	done     bool // nothing to sync, or the log is unusable (err)
	d        int64
	err      error
	gen      int64
	upto     int64
	rolled   []*segment
	todo     []*segment
	dirDirty bool
	txn      bool
}

// BeginSync notes what the log holds now (everything appended before the
// call) for End, which must be called once.
func (l *Log) BeginSync() *PendingSync {
	target := l.leo.Load()
	l.syncMu.Lock()
	ps := &PendingSync{l: l}
	if err := l.writable(); err != nil {
		ps.done, ps.d, ps.err = true, l.durable.Load(), err
		return ps
	}
	if d := l.durable.Load(); d >= target {
		ps.done, ps.d = true, d
		return ps
	}
	l.mu.Lock()
	ps.gen = l.truncGen.Load()
	ps.upto = l.leo.Load()
	ps.rolled = l.unsynced
	l.unsynced = nil
	ps.dirDirty = l.dirDirty
	l.dirDirty = false
	ps.todo = make([]*segment, 0, len(ps.rolled)+1)
	for _, s := range append(ps.rolled, l.active) {
		if s.acquire() {
			ps.todo = append(ps.todo, s)
		}
	}
	l.mu.Unlock()
	ps.txn = l.txnDirty.Swap(false)
	return ps
}

// End finishes the sync and returns what Sync would. durable says the
// caller made every file of the log's filesystem durable since
// BeginSync; otherwise End fsyncs the log's files itself.
func (ps *PendingSync) End(durable bool) (int64, error) {
	l := ps.l
	defer l.syncMu.Unlock()
	if ps.done {
		return ps.d, ps.err
	}
	var err error
	if !durable {
		err = l.syncSegments(ps.todo)
		if err == nil && ps.txn {
			err = l.syncTxnFiles()
		}
		if err == nil && ps.dirDirty {
			err = l.fs.SyncDir(l.dir)
		}
	}
	for _, s := range ps.todo {
		s.release()
	}
	if err != nil {
		if ps.txn {
			l.txnDirty.Store(true)
		}
		l.fail(err)
		return l.durable.Load(), fmt.Errorf("%w: %w", ErrFailed, err)
	}

	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	if ps.gen == l.truncGen.Load() && ps.upto > l.durable.Load() {
		l.durable.Store(ps.upto)
	}
	d := l.durable.Load()
	writeRP := len(ps.rolled) > 0 && d > l.rp
	// The leader-epoch checkpoint is written only ahead of the recovery
	// point here: recovery trusts it for the data below the recovery point
	// and below the active segment's index checkpoint (CheckpointIndex and
	// Close write it first too) and rebuilds the epochs of the data above
	// from the batches. Written on every new epoch's first sync, its
	// fsyncs would delay that sync's acknowledgements: after a restart or
	// a leader change, that of every partition's first produce.
	var epochs []byte
	if writeRP && l.epochs.dirty {
		epochs = l.epochs.encode()
		l.epochs.dirty = false
	}
	l.mu.Unlock()
	if err := l.persist(epochs, writeRP, d); err != nil {
		// The data are durable all the same. A checkpoint left behind
		// only means more re-validation on recovery (the recovery point is
		// never written ahead of the epoch checkpoint), and the next Sync
		// retries it.
		l.logger.Warn("log: writing checkpoint after sync", "dir", l.dir, "err", err)
	}
	return d, nil
}

// syncSegments fsyncs segs' data. (Their index files were made durable
// when they were written, at roll.)
func (l *Log) syncSegments(segs []*segment) error {
	for _, s := range segs {
		if s.deleted.Load() {
			continue
		}
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("log: fsync %s: %w", s.name(), err)
		}
	}
	return nil
}

// persist writes the leader-epoch checkpoint (if epochs is not nil) and then
// the recovery point (if writeRP). The epoch checkpoint goes first: recovery
// trusts that it covers every epoch starting below the recovery point.
// Called with ckptMu held.
func (l *Log) persist(epochs []byte, writeRP bool, rp int64) error {
	if epochs != nil {
		if err := replaceFile(l.fs, l.path(leaderEpochFile), epochs); err != nil {
			l.mu.Lock()
			l.epochs.dirty = true
			l.mu.Unlock()
			return err
		}
	}
	if writeRP {
		if err := writeOffsetCheckpoint(l.fs, l.path(recoveryPointFile), rp); err != nil {
			return err
		}
		l.mu.Lock()
		l.rp = rp
		l.mu.Unlock()
	}
	return nil
}
