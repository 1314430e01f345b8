package log

import (
	"errors"
	"fmt"
	"os"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/vfs"
)

// deleteSegmentsLocked removes segs (never the active one) from disk. Their
// files stay open until the last reader releases them. The caller has
// already published a segment list without them. Called with mu held.
func (l *Log) deleteSegmentsLocked(segs []*segment) {
	if len(segs) == 0 {
		return
	}
	gone := make(map[*segment]bool, len(segs))
	for _, s := range segs {
		gone[s] = true
		s.deleted.Store(true)
		for _, p := range []string{s.path, s.indexPath(), s.timeIndexPath(), s.txnPath()} {
			if err := l.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				l.logger.Warn("log: removing segment file", "dir", l.dir, "file", p, "err", err)
			}
		}
		s.release()
	}
	kept := l.unsynced[:0]
	for _, s := range l.unsynced {
		if !gone[s] {
			kept = append(kept, s)
		}
	}
	l.unsynced = kept
	l.dirDirty = true
}

// SetLogStartOffset moves the log start offset up (DeleteRecords), persists
// it and deletes segments wholly below it. Offsets below the current start
// are ignored; above the log end offset are an error.
func (l *Log) SetLogStartOffset(off int64) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if leo := l.leo.Load(); off > leo {
		return fmt.Errorf("%w: log start offset %d above log end offset %d", ErrOffsetOutOfRange, off, leo)
	}
	if off <= l.logStart.Load() {
		return nil
	}
	if err := writeOffsetCheckpoint(l.fs, l.path(logStartFile), off); err != nil {
		return err
	}
	l.logStart.Store(off)
	l.epochs.truncateFromStart(off)
	l.deleteBelowStartLocked()
	return l.persistEpochsLocked()
}

// deleteBelowStartLocked deletes the segments wholly below the log start
// offset, keeping the active one.
func (l *Log) deleteBelowStartLocked() {
	segs := l.segments()
	start := l.logStart.Load()
	n := 0
	for n < len(segs)-1 && segs[n+1].base <= start {
		n++
	}
	if n == 0 {
		return
	}
	l.setSegments(append([]*segment(nil), segs[n:]...))
	l.deleteSegmentsLocked(segs[:n])
}

// persistEpochsLocked writes the leader-epoch checkpoint if it changed.
// Called with ckptMu and mu held.
func (l *Log) persistEpochsLocked() error {
	if !l.epochs.dirty {
		return nil
	}
	if err := replaceFile(l.fs, l.path(leaderEpochFile), l.epochs.encode()); err != nil {
		return err
	}
	l.epochs.dirty = false
	return nil
}

// ApplyRetention deletes the oldest segments, never the active one, while
// one of these holds: its largest timestamp is older than retention.ms (the
// file's modification time if it has no timestamps), the log without it is
// still at least retention.bytes, or it lies wholly below the log start
// offset. The log start offset moves to the new first segment. It returns
// how many segments and bytes it deleted.
func (l *Log) ApplyRetention() (segments int, bytes int64, err error) {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return 0, 0, err
	}
	segs := l.segments()
	now := l.nowMs()
	start := l.logStart.Load()
	var total int64
	for _, s := range segs {
		total += s.size.Load()
	}
	n := 0
	for ; n < len(segs)-1; n++ {
		s := segs[n]
		size := s.size.Load()
		expired := l.cfg.RetentionMs >= 0 && now-l.largestTimestamp(s) > l.cfg.RetentionMs
		tooBig := l.cfg.RetentionBytes >= 0 && total-size >= l.cfg.RetentionBytes
		below := segs[n+1].base <= start
		if !expired && !tooBig && !below {
			break
		}
		total -= size
		bytes += size
	}
	if n == 0 {
		return 0, 0, nil
	}
	if newStart := segs[n].base; newStart > start {
		if err := writeOffsetCheckpoint(l.fs, l.path(logStartFile), newStart); err != nil {
			return 0, 0, err
		}
		l.logStart.Store(newStart)
		l.epochs.truncateFromStart(newStart)
	}
	l.setSegments(append([]*segment(nil), segs[n:]...))
	l.deleteSegmentsLocked(segs[:n])
	l.logger.Info("log: retention deleted segments", "dir", l.dir, "segments", n, "bytes", bytes,
		"log_start_offset", l.logStart.Load())
	return n, bytes, l.persistEpochsLocked()
}

func (l *Log) largestTimestamp(s *segment) int64 {
	if ts := s.maxTS.Load(); ts >= 0 {
		return ts
	}
	if fi, err := s.f.Stat(); err == nil {
		return fi.ModTime().UnixMilli()
	}
	return l.nowMs() // unknown: keep it
}

// Truncate removes every batch at and above offset (a follower diverging
// from its leader). Batches are whole: if offset falls inside a batch, that
// batch goes too and the log end offset becomes its base offset; otherwise
// it becomes offset. An offset below the log start offset empties the log
// and starts it at offset. The truncation and checkpoints are fsynced
// before Truncate returns.
func (l *Log) Truncate(offset int64) error { return l.cut(offset, false) }

// Reset deletes every segment and starts an empty log at offset, which
// may be beyond the log end offset (a follower that fell behind its
// leader's log start). Like Truncate, it is durable when it returns.
func (l *Log) Reset(offset int64) error { return l.cut(offset, true) }

// cut is Truncate, or Reset when reset is set.
func (l *Log) cut(offset int64, reset bool) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: cut the log at %d", ErrOffsetOutOfRange, offset)
	}
	if !reset && offset >= l.leo.Load() {
		return nil
	}
	l.truncGen.Add(1) // odd: readers wait or retry
	defer l.truncGen.Add(1)

	var err error
	if reset || offset < l.logStart.Load() {
		err = l.truncateFullyLocked(offset)
	} else {
		err = l.truncateLocked(offset)
	}
	if err != nil {
		l.fail(err)
		return err
	}
	leo := l.leo.Load()
	if reset || l.durable.Load() > leo {
		l.durable.Store(leo) // after a reset, the empty log is durable
	}
	if err := l.cleanerTruncatedLocked(leo); err != nil {
		return err
	}
	// Only a truncation that dropped epochs rewrites the checkpoint now:
	// one that dropped none leaves a newer epoch not yet checkpointed (see
	// PendingSync.End) for later, so undoing a write that failed for a
	// full disk needs no write.
	if l.epochs.truncateFromEnd(leo) {
		if err := l.persistEpochsLocked(); err != nil {
			return err
		}
	}
	if l.rp > leo || l.rp < l.logStart.Load() {
		if err := writeOffsetCheckpoint(l.fs, l.path(recoveryPointFile), leo); err != nil {
			return err
		}
		l.rp = leo
	}
	l.dropStaleProducerSnapshot(leo)
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	l.dirDirty = false
	return nil
}

func (l *Log) truncateLocked(offset int64) error {
	segs := l.segments()
	k := findSegment(segs, offset)
	s := segs[k]
	r := newHeaderReader(s.f, s.size.Load())
	pos, h, found, err := r.seek(s.lookup(offset), offset)
	r.close()
	if err != nil {
		return s.readErr(pos, err)
	}
	leo := offset
	if found {
		leo = min(offset, peekBase(h))
	}
	if err := s.f.Truncate(pos); err != nil {
		return fmt.Errorf("log: truncate %s: %w", s.name(), err)
	}
	s.phys.Store(pos)
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("log: fsync %s: %w", s.name(), err)
	}
	// Rebuild the indexes of the kept part; drop the now stale files.
	s.resetIndex()
	interval, maxEntries := int64(l.cfg.IndexIntervalBytes), l.cfg.maxIndexEntries()
	if err := s.scanHeaders(0, pos, func(p int64, h batch.Header) error {
		s.indexBatch(p, h.BaseOffset, int64(h.Size()), h.MaxTimestamp, interval, maxEntries)
		return nil
	}); err != nil {
		return err
	}
	s.removeIndexFiles(l.fs)
	// The transaction index is not a cache: cut it to the kept markers.
	if err := s.truncateTxn(max(leo, s.base)); err != nil {
		return err
	}
	if err := s.syncTxn(); err != nil {
		return err
	}
	if err := s.keepTxnMem(); err != nil {
		return err
	}
	s.size.Store(pos)
	s.next.Store(max(leo, s.base))
	l.setSegments(append([]*segment(nil), segs[:k+1]...))
	l.deleteSegmentsLocked(segs[k+1:])
	l.unsynced = removeSegment(l.unsynced, s)
	l.active = s
	l.leo.Store(s.next.Load())
	if start := l.logStart.Load(); start > l.leo.Load() {
		// The batch holding offset started below the log start.
		if err := writeOffsetCheckpoint(l.fs, l.path(logStartFile), l.leo.Load()); err != nil {
			return err
		}
		l.logStart.Store(l.leo.Load())
	}
	return nil
}

func removeSegment(segs []*segment, s *segment) []*segment {
	out := segs[:0]
	for _, x := range segs {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// truncateFullyLocked deletes every segment and starts an empty log at offset.
func (l *Log) truncateFullyLocked(offset int64) error {
	segs := l.segments()
	// The active segment is deleted too; open the new one after removing
	// any file with its name.
	l.setSegments(nil)
	l.deleteSegmentsLocked(segs)
	f, err := l.fs.OpenFile(l.path(segmentName(offset)+logSuffix), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("log: new segment at %d: %w", offset, err)
	}
	s := newSegment(l.dir, offset, f)
	s.rollStartMs = l.nowMs()
	s.txn.mem = []byte{}
	l.setSegments([]*segment{s})
	l.active = s
	l.unsynced = nil
	if err := writeOffsetCheckpoint(l.fs, l.path(logStartFile), offset); err != nil {
		return err
	}
	l.logStart.Store(offset)
	l.leo.Store(offset)
	l.epochs.truncateFromStart(offset)
	return nil
}

// dropStaleProducerSnapshot removes a producer snapshot taken past leo.
func (l *Log) dropStaleProducerSnapshot(leo int64) {
	b, err := vfs.ReadFile(l.fs, l.path(producerSnapshotFile))
	if err != nil {
		return
	}
	if off, _, err := decodeProducerSnapshot(b); err != nil || off > leo {
		l.fs.Remove(l.path(producerSnapshotFile))
		l.dirDirty = true
		l.prodSnap.Store(-1)
	}
}

// SaveProducerSnapshot stores an opaque snapshot of producer state covering
// the log up to offset, atomically (write tmp, fsync, rename, fsync dir). A
// later Truncate below offset deletes it.
func (l *Log) SaveProducerSnapshot(offset int64, data []byte) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	// The snapshot stands for the transaction index entries of the
	// markers below offset (the owner's replay starts at it), so those
	// must be durable first.
	if err := l.syncTxnIndexes(); err != nil {
		l.fail(err)
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	if err := keepOrReplaceFile(l.fs, l.path(producerSnapshotFile), encodeProducerSnapshot(offset, data), false); err != nil {
		return err
	}
	l.prodSnap.Store(offset)
	return nil
}

// LoadProducerSnapshot returns the last saved snapshot; offset -1 and nil
// data when there is none. A damaged snapshot returns a *CorruptionError
// (the caller rebuilds from the log).
func (l *Log) LoadProducerSnapshot() (offset int64, data []byte, err error) {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	if l.closed.Load() {
		return -1, nil, ErrClosed
	}
	b, err := vfs.ReadFile(l.fs, l.path(producerSnapshotFile))
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil, nil
	}
	if err != nil {
		return -1, nil, err
	}
	off, data, err := decodeProducerSnapshot(b)
	if err != nil {
		return -1, nil, &CorruptionError{Segment: producerSnapshotFile, Err: err}
	}
	l.prodSnap.Store(off)
	return off, data, nil
}

// Close fsyncs everything, writes the active segment's indexes and the
// checkpoints, then the clean-shutdown marker that lets the next Open skip
// recovery. Readers in flight finish; later calls return ErrClosed. Closing
// twice returns nil.
func (l *Log) Close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil
	}
	err := l.writable()
	if err == nil {
		err = l.shutdownLocked()
	}
	l.closed.Store(true)
	for _, s := range l.segments() {
		s.release()
	}
	return err
}

func (l *Log) shutdownLocked() error {
	s := l.active
	if err := l.trimLocked(s); err != nil {
		return err
	}
	s.finishIndex()
	if err := l.syncSegments(append(l.unsynced, s)); err != nil {
		return err
	}
	l.unsynced = nil
	if err := l.syncTxnIndexes(); err != nil {
		return err
	}
	// Files that already hold what they would be replaced with are kept
	// (keepOrReplaceFile): the marker's directory fsync, last, covers
	// their names.
	if err := s.writeIndexes(l.fs); err != nil {
		return err
	}
	leo := l.leo.Load()
	l.durable.Store(leo)
	if err := keepOrReplaceFile(l.fs, l.path(leaderEpochFile), l.epochs.encode(), false); err != nil {
		return err
	}
	l.epochs.dirty = false
	if err := keepOffsetCheckpoint(l.fs, l.path(logStartFile), l.logStart.Load()); err != nil {
		return err
	}
	if err := keepOffsetCheckpoint(l.fs, l.path(recoveryPointFile), leo); err != nil {
		return err
	}
	l.rp = leo
	return replaceFile(l.fs, l.path(cleanShutdownFile), nil)
}

// Delete closes the log without a clean-shutdown marker and removes its
// directory.
func (l *Log) Delete() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed.Swap(true) {
		for _, s := range l.segments() {
			s.deleted.Store(true)
			s.release()
		}
	}
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("log: delete %s: %w", l.dir, err)
	}
	return nil
}
