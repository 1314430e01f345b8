package log

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/vfs"
)

// Open opens the log in dir, creating dir if missing, and recovers it.
//
// Recovery: without a clean-shutdown marker, every segment that may hold
// data at or past the recovery point, and always the last segment, is
// re-validated batch by batch (size, magic, CRC-32C, increasing offsets)
// and truncated at the first torn or corrupt batch; later segments are then
// deleted. Other segments load their index files, which are checked and
// rebuilt from the data when missing or invalid, and have the batches after
// their last index entry validated. See docs/format/log.md.
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	l := &Log{dir: dir, fs: opts.FS, now: opts.Now, logger: opts.Logger, cfg: cfg, deferMarker: opts.DeferMarkerSync}
	l.prodSnap.Store(-1)
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log: create %s: %w", dir, err)
	}
	l.setSegments(nil)
	if err := l.load(); err != nil {
		for _, s := range l.segments() {
			s.release()
		}
		return nil, err
	}
	return l, nil
}

func (l *Log) remove(name string) {
	if err := l.fs.Remove(l.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.logger.Warn("log: removing file", "dir", l.dir, "file", name, "err", err)
	}
	l.dirDirty = true
}

func (l *Log) removeSegmentFiles(base int64) {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		l.remove(segmentName(base) + suf)
	}
}

// readCheckpointOrWarn reads an offset checkpoint, treating a malformed one
// as missing.
func (l *Log) readCheckpointOrWarn(name string) (int64, bool, error) {
	off, ok, err := readOffsetCheckpoint(l.fs, l.path(name))
	var ce *CorruptionError
	if errors.As(err, &ce) {
		l.logger.Warn("log: ignoring malformed checkpoint", "dir", l.dir, "file", name, "err", err)
		return -1, false, nil
	}
	return off, ok, err
}

// load is Open's crash recovery, in phases, each below in this order:
// listFiles, takeCleanShutdown, findSegments, readCheckpoints,
// dropSegmentsBelowStart, loadSegments, openActive, recoverLogStart,
// loadTxnIndexes, rebuildEpochs, syncRecovered, and last the cleaner
// checkpoint, a stale producer snapshot and the directory fsync.
func (l *Log) load() error {
	names, err := l.listFiles()
	if err != nil {
		return err
	}
	clean, err := l.takeCleanShutdown(names)
	if err != nil {
		return err
	}
	bases := l.findSegments(names)
	ck, err := l.readCheckpoints()
	if err != nil {
		return err
	}
	bases = l.dropSegmentsBelowStart(bases, ck)
	segs, recovered, trans, err := l.loadSegments(bases, clean, ck)
	if err != nil {
		return err
	}
	if segs, err = l.openActive(segs, ck); err != nil {
		return err
	}
	leo := l.active.next.Load()
	start, leo, emptied, err := l.recoverLogStart(segs, ck, leo)
	if err != nil {
		return err
	}
	if emptied {
		recovered = nil
	}
	if err := l.loadTxnIndexes(); err != nil {
		return err
	}
	if err := l.rebuildEpochs(ck, trans, leo, start); err != nil {
		return err
	}
	if err := l.syncRecovered(recovered, ck, leo); err != nil {
		return err
	}
	if err := l.loadCleanerState(leo); err != nil {
		return err
	}
	l.dropStaleProducerSnapshot(leo)
	if l.dirDirty || len(recovered) > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("log: sync %s: %w", l.dir, err)
		}
		l.dirDirty, l.markerPending = false, false
	}
	// Until FinishOpen, any sync of the log fsyncs the directory too.
	l.dirDirty = l.markerPending
	return nil
}

// listFiles lists the directory after finishing what an interrupted
// compaction left (recoverCleanerFiles).
func (l *Log) listFiles() ([]string, error) {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("log: list %s: %w", l.dir, err)
	}
	return l.recoverCleanerFiles(names)
}

// takeCleanShutdown reports whether the last close was clean (the
// clean-shutdown marker is there) and removes the marker durably, so that a
// crash from here on triggers recovery.
func (l *Log) takeCleanShutdown(names []string) (bool, error) {
	clean := slices.Contains(names, cleanShutdownFile)
	if clean {
		// From here on a crash must trigger recovery.
		if err := l.fs.Remove(l.path(cleanShutdownFile)); err != nil {
			return false, fmt.Errorf("log: remove clean-shutdown marker: %w", err)
		}
		if l.deferMarker {
			// The caller makes it durable (FinishOpen), unless load
			// fsyncs the directory anyway.
			l.markerPending = true
			return true, nil
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return false, fmt.Errorf("log: sync %s: %w", l.dir, err)
		}
	}
	return clean, nil
}

// FinishOpen settles the clean-shutdown marker Open removed with
// Options.DeferMarkerSync: fsSynced says the caller has synced the
// filesystem holding the log since (syncfs), which made the removal
// durable; otherwise the log fsyncs its directory. A crash after
// FinishOpen returns nil recovers the log.
func (l *Log) FinishOpen(fsSynced bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.markerPending {
		return nil
	}
	if !fsSynced {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("log: sync %s: %w", l.dir, err)
		}
	}
	// Durable now, and nothing else has dirtied the directory: the log
	// has taken no write yet.
	l.markerPending, l.dirDirty = false, false
	return nil
}

// MarkerPending reports whether FinishOpen has a marker removal to settle.
func (l *Log) MarkerPending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.markerPending
}

// findSegments returns the base offsets of the segment files among names,
// in order, and removes the leftovers of interrupted atomic writes and the
// index files whose segment is gone.
func (l *Log) findSegments(names []string) []int64 {
	have := make(map[string]bool, len(names))
	for _, n := range names {
		have[n] = true
	}
	var bases []int64
	for _, n := range names {
		if base, ok := parseSegmentName(n); ok {
			bases = append(bases, base)
			continue
		}
		if strings.HasSuffix(n, tmpSuffix) {
			l.remove(n) // an interrupted atomic write
			continue
		}
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if stem, ok := strings.CutSuffix(n, suf); ok && !have[stem+logSuffix] {
				l.remove(n) // index without its segment
			}
		}
	}
	return bases
}

// checkpoints are the checkpoint files as Open found them; a missing or
// malformed one has its ok false.
type checkpoints struct {
	logStart   int64
	logStartOK bool
	rp         int64 // recovery point
	rpOK       bool
	epochs     []epochEntry
	epochsOK   bool
}

// readCheckpoints reads the log-start, recovery-point and leader-epoch
// checkpoints.
func (l *Log) readCheckpoints() (ck checkpoints, err error) {
	if ck.logStart, ck.logStartOK, err = l.readCheckpointOrWarn(logStartFile); err != nil {
		return ck, err
	}
	if ck.rp, ck.rpOK, err = l.readCheckpointOrWarn(recoveryPointFile); err != nil {
		return ck, err
	}
	if ck.epochs, ck.epochsOK, err = l.readEpochs(); err != nil {
		return ck, err
	}
	return ck, nil
}

// dropSegmentsBelowStart removes the segments wholly below the log start
// offset, which were being deleted, and returns the bases left.
func (l *Log) dropSegmentsBelowStart(bases []int64, ck checkpoints) []int64 {
	for ck.logStartOK && len(bases) > 1 && bases[1] <= ck.logStart {
		l.removeSegmentFiles(bases[0])
		bases = bases[1:]
	}
	return bases
}

// loadSegments opens the segments (loadSegment): without a clean shutdown,
// those that may hold data at or past the recovery point, and always the
// last, are re-validated in full (recovered), and trans collects the epoch
// changes those full scans saw. The segments after one truncated at a
// corrupt batch are deleted. The log's segment list is set, also on error.
func (l *Log) loadSegments(bases []int64, clean bool, ck checkpoints) (segs, recovered []*segment, trans []epochEntry, err error) {
	prevNext := int64(0)
	for i, base := range bases {
		last := i == len(bases)-1
		// The active segment's index files hold only durable batches
		// (activeindex.go): after a crash it is loaded from them too, and
		// only the batches after their last entry are checked.
		full := !clean && !last && (!ck.rpOK || bases[i+1] > ck.rp)
		s, scanned, corrupted, err := l.loadSegment(base, full, !clean && last, prevNext, &trans)
		if err != nil {
			l.setSegments(segs)
			return nil, nil, nil, err
		}
		segs = append(segs, s)
		if scanned {
			recovered = append(recovered, s)
		}
		prevNext = s.next.Load()
		if corrupted && !last {
			for _, b := range bases[i+1:] {
				l.logger.Warn("log: deleting segment after a corrupt one", "dir", l.dir, "segment", segmentName(b)+logSuffix)
				l.removeSegmentFiles(b)
			}
			break
		}
	}
	l.setSegments(segs)
	return segs, recovered, trans, nil
}

// openActive makes the last segment the active one, first creating an empty
// segment at the log start (or 0) when there is none, and sets the log end
// offset and the roll clock.
func (l *Log) openActive(segs []*segment, ck checkpoints) ([]*segment, error) {
	if len(segs) == 0 {
		start := int64(0)
		if ck.logStartOK {
			start = ck.logStart
		}
		f, err := l.fs.OpenFile(l.path(segmentName(start)+logSuffix), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, fmt.Errorf("log: create segment: %w", err)
		}
		segs = []*segment{newSegment(l.dir, start, f)}
		l.setSegments(segs)
		l.dirDirty = true
	}
	l.active = segs[len(segs)-1]
	fi, err := l.active.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("log: stat %s: %w", l.active.name(), err)
	}
	l.active.phys.Store(max(fi.Size(), l.active.size.Load()))
	l.leo.Store(l.active.next.Load())
	l.active.rollStartMs = l.firstTimestamp(l.active)
	return segs, nil
}

// recoverLogStart sets the log start offset: the checkpoint's, but not below
// the first segment. If the recovered data end below it, the log is emptied
// at it (emptied; leo then is the start). The checkpoint is rewritten when it
// was missing or changed.
func (l *Log) recoverLogStart(segs []*segment, ck checkpoints, leo int64) (start, newLEO int64, emptied bool, err error) {
	start = segs[0].base
	if ck.logStartOK {
		start = max(start, ck.logStart)
	}
	if start > leo {
		l.logger.Warn("log: recovered data end below the log start offset; emptying the log",
			"dir", l.dir, "log_end_offset", leo, "log_start_offset", start)
		if err := l.truncateFullyLocked(start); err != nil {
			return 0, 0, false, err
		}
		leo = start
		emptied = true
	}
	if !ck.logStartOK || start != ck.logStart {
		if err := writeOffsetCheckpoint(l.fs, l.path(logStartFile), start); err != nil {
			return 0, 0, false, err
		}
	}
	l.logStart.Store(start)
	return start, leo, emptied, nil
}

// loadTxnIndexes opens each segment's transaction index, keeping the valid
// entries whose marker is still in the data. The owner's replay from its
// producer snapshot adds back the entries a crash kept from being written.
func (l *Log) loadTxnIndexes() error {
	for _, s := range l.segments() {
		dropped, damage, err := s.openTxn(l.fs, s.txnPath(), s.next.Load())
		if err != nil {
			return err
		}
		if damage != nil {
			l.logger.Warn("log: dropping invalid transaction index entries", "dir", l.dir,
				"segment", s.name(), "err", damage)
		}
		if dropped {
			l.dirDirty = true
		}
		if s.txnCount() > 0 {
			l.hasTxn.Store(true)
		}
	}
	return l.active.keepTxnMem()
}

// rebuildEpochs rebuilds the leader-epoch cache: the checkpoint covers
// epochs starting below the recovery point, and the full scans saw the rest
// (trans); without a checkpoint, every batch header of the log's segments
// is read (after recoverLogStart: an emptied log has released the
// segments it loaded).
func (l *Log) rebuildEpochs(ck checkpoints, trans []epochEntry, leo, start int64) error {
	if ck.epochsOK {
		l.epochs.entries = ck.epochs
		l.epochs.truncateFromEnd(leo)
		for _, t := range trans {
			if t.Start < leo {
				l.epochs.assign(t.Epoch, t.Start)
			}
		}
	} else {
		l.epochs.dirty = true
		for _, s := range l.segments() {
			if err := s.scanHeaders(0, s.size.Load(), func(_ int64, h batch.Header) error {
				l.epochs.assign(h.LeaderEpoch, h.BaseOffset)
				return nil
			}); err != nil {
				return err
			}
		}
	}
	l.epochs.truncateFromStart(start)
	return nil
}

// syncRecovered makes what recovery validated durable before calling it
// recovered: it may still sit only in the page cache (a process crash). It
// fsyncs the re-validated segments and writes the indexes of the closed
// ones, then records leo as durable and writes the leader-epoch checkpoint
// and, after it, the recovery point.
func (l *Log) syncRecovered(recovered []*segment, ck checkpoints, leo int64) error {
	for _, s := range recovered {
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("log: fsync %s: %w", s.name(), err)
		}
		if s != l.active {
			if err := s.writeIndexes(l.fs); err != nil {
				return err
			}
		}
	}
	l.durable.Store(leo)
	if err := l.persistEpochsLocked(); err != nil {
		return err
	}
	if !ck.rpOK || ck.rp != leo {
		if err := writeOffsetCheckpoint(l.fs, l.path(recoveryPointFile), leo); err != nil {
			return err
		}
	}
	l.rp = leo
	return nil
}

func (l *Log) readEpochs() ([]epochEntry, bool, error) {
	b, err := vfs.ReadFile(l.fs, l.path(leaderEpochFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("log: read %s: %w", leaderEpochFile, err)
	}
	es, err := decodeEpochs(b)
	if err != nil {
		l.logger.Warn("log: rebuilding malformed leader-epoch checkpoint", "dir", l.dir, "err", err)
		return nil, false, nil
	}
	return es, true, nil
}

// firstTimestamp is the roll clock start of a loaded segment: its first
// batch's max timestamp if that is not in the future, else now.
func (l *Log) firstTimestamp(s *segment) int64 {
	now := l.nowMs()
	if s.size.Load() < batch.HeaderSize {
		return now
	}
	b := make([]byte, batch.HeaderSize)
	if _, err := s.f.ReadAt(b, 0); err != nil {
		return now
	}
	if ts := peekMaxTimestamp(b); ts >= 0 && ts <= now {
		return ts
	}
	return now
}

// loadSegment opens one segment. With full it re-validates every batch;
// otherwise it trusts the index files if they check out and validates only
// the batches after the last index entry. scanned reports a full scan;
// corrupted that the file was truncated at a bad batch.
//
// crashed marks the last segment after a crash: its tail past the index
// is new since the index was written, so a torn batch there is cut off
// (as a full scan would) rather than failing the index, the epochs it
// starts are collected, and the segment counts as scanned.
func (l *Log) loadSegment(base int64, full, crashed bool, prevNext int64, trans *[]epochEntry) (s *segment, scanned, corrupted bool, err error) {
	f, err := l.fs.OpenFile(l.path(segmentName(base)+logSuffix), os.O_RDWR, 0)
	if err != nil {
		return nil, false, false, fmt.Errorf("log: open segment: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, false, fmt.Errorf("log: stat segment: %w", err)
	}
	s = newSegment(l.dir, base, f)
	if !full {
		var tail *[]epochEntry
		if crashed {
			tail = trans
		}
		ok, cut, err := l.fastLoad(s, fi.Size(), prevNext, tail)
		if err != nil {
			s.release()
			return nil, false, false, err
		}
		if ok {
			return s, crashed, cut, nil
		}
	}
	s.idxOnDisk, s.tidxOnDisk = -1, -1 // the files on disk do not match
	// fastLoad may have cut a torn tail before it gave up: scan the file
	// as it is now.
	if fi, err = f.Stat(); err != nil {
		s.release()
		return nil, false, false, fmt.Errorf("log: stat segment: %w", err)
	}
	corrupted, err = l.fullScan(s, fi.Size(), prevNext, trans)
	if err != nil {
		s.release()
		return nil, false, false, err
	}
	return s, true, corrupted, nil
}

// fullScan validates every batch of s, rebuilding its indexes, and truncates
// the file at the first torn or corrupt batch.
func (l *Log) fullScan(s *segment, fileSize, prevNext int64, trans *[]epochEntry) (corrupted bool, err error) {
	s.resetIndex()
	interval, maxEntries := int64(l.cfg.IndexIntervalBytes), l.cfg.maxIndexEntries()
	sc := newScanner(s.f, s.name(), 0, fileSize, s.base, prevNext)
	end, next := int64(0), max(s.base, prevNext)
	for {
		h, pos, err := sc.next()
		if err == io.EOF {
			break
		}
		var ce *CorruptionError
		if errors.As(err, &ce) {
			// Zeros to the end are a preallocated runway (runway.go), not
			// a torn write: the segment ends cleanly there, and the
			// segments after it, if any, are kept.
			zeros := zeroTail(s.f, ce.Offset, fileSize)
			if zeros {
				l.logger.Debug("log: removing the preallocated zeros after the last batch", "dir", l.dir,
					"segment", ce.Segment, "position", ce.Offset, "bytes", fileSize-ce.Offset)
			} else {
				l.logger.Warn("log: truncating torn or corrupt segment tail", "dir", l.dir,
					"segment", ce.Segment, "position", ce.Offset, "dropped_bytes", fileSize-ce.Offset, "err", ce.Err)
			}
			if err := s.f.Truncate(ce.Offset); err != nil {
				return false, fmt.Errorf("log: truncate %s: %w", s.name(), err)
			}
			corrupted = !zeros
			break
		}
		if err != nil {
			return false, err
		}
		size := int64(h.Size())
		s.indexBatch(pos, h.BaseOffset, size, h.MaxTimestamp, interval, maxEntries)
		if n := len(*trans); h.LeaderEpoch >= 0 && (n == 0 || h.LeaderEpoch > (*trans)[n-1].Epoch) {
			*trans = append(*trans, epochEntry{h.LeaderEpoch, h.BaseOffset})
		}
		end, next = pos+size, h.LastOffset()+1
	}
	s.size.Store(end)
	s.next.Store(next)
	return corrupted, nil
}

// fastLoad loads s's index files and validates the batches after the last
// index entry. ok is false when the indexes are missing or do not match the
// data, or the tail is damaged: the caller then does a full scan.
//
// With tail (the last segment after a crash), a torn or corrupt batch
// after the first one checked is cut off as fullScan does (cut reports
// it, unless it was a preallocated runway of zeros), and the epochs the
// checked batches start are added to *tail.
func (l *Log) fastLoad(s *segment, fileSize, prevNext int64, tail *[]epochEntry) (ok, cut bool, err error) {
	idx, err := vfs.ReadFile(l.fs, s.indexPath())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			l.logger.Info("log: rebuilding missing index", "dir", l.dir, "segment", s.name())
			return false, false, nil
		}
		return false, false, err
	}
	tidx, err := vfs.ReadFile(l.fs, s.timeIndexPath())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			l.logger.Info("log: rebuilding missing time index", "dir", l.dir, "segment", s.name())
			return false, false, nil
		}
		return false, false, err
	}
	s.idx.b, s.tidx.b = idx, tidx
	bad := func(why error) (bool, bool, error) {
		l.logger.Warn("log: rebuilding invalid index", "dir", l.dir, "segment", s.name(), "err", why)
		s.resetIndex()
		return false, false, nil
	}
	if err := s.idx.check(fileSize); err != nil {
		return bad(err)
	}
	if err := s.tidx.check(); err != nil {
		return bad(err)
	}
	pos, entryBase := int64(0), int64(-1)
	if n := s.idx.len(); n > 0 {
		rel, p := s.idx.entry(n - 1)
		pos, entryBase = int64(p), s.base+int64(rel)
		prevNext = entryBase
	}
	if ts, rel, ok := s.tidx.last(); ok {
		s.maxTS.Store(ts)
		s.maxTSOff.Store(s.base + int64(rel))
	}
	interval, maxEntries := int64(l.cfg.IndexIntervalBytes), l.cfg.maxIndexEntries()
	sc := newScanner(s.f, s.name(), pos, fileSize, s.base, prevNext)
	end, next := pos, max(s.base, prevNext)
	// The epochs the checked batches start, added to *tail only when the
	// load succeeds: a failed one is followed by a full scan that adds
	// them itself.
	var starts []epochEntry
	lastEpoch := int32(-1)
	if tail != nil && len(*tail) > 0 {
		lastEpoch = (*tail)[len(*tail)-1].Epoch
	}
	for first := true; ; first = false {
		h, bpos, err := sc.next()
		if err == io.EOF {
			break
		}
		var ce *CorruptionError
		if errors.As(err, &ce) {
			if tail == nil || first {
				return bad(err)
			}
			// The torn tail of a crash, past what the index holds.
			zeros := zeroTail(s.f, ce.Offset, fileSize)
			if !zeros {
				l.logger.Warn("log: truncating torn or corrupt segment tail", "dir", l.dir,
					"segment", ce.Segment, "position", ce.Offset, "dropped_bytes", fileSize-ce.Offset, "err", ce.Err)
			}
			if err := s.f.Truncate(ce.Offset); err != nil {
				return false, false, fmt.Errorf("log: truncate %s: %w", s.name(), err)
			}
			cut = !zeros
			break
		}
		if err != nil {
			return false, false, err
		}
		size := int64(h.Size())
		if tail != nil && h.LeaderEpoch >= 0 && h.LeaderEpoch > lastEpoch {
			starts = append(starts, epochEntry{h.LeaderEpoch, h.BaseOffset})
			lastEpoch = h.LeaderEpoch
		}
		if first && entryBase >= 0 {
			if h.BaseOffset != entryBase {
				return bad(fmt.Errorf("last index entry names offset %d, batch there has %d", entryBase, h.BaseOffset))
			}
			if h.MaxTimestamp > s.maxTS.Load() {
				s.maxTS.Store(h.MaxTimestamp)
				s.maxTSOff.Store(h.BaseOffset)
			}
			s.bytesSinceIndex = size
		} else {
			s.indexBatch(bpos, h.BaseOffset, size, h.MaxTimestamp, interval, maxEntries)
		}
		end, next = bpos+size, h.LastOffset()+1
	}
	if _, rel, ok := s.tidx.last(); ok && s.base+int64(rel) >= next {
		return bad(fmt.Errorf("time index entry at offset %d past the data end %d", s.base+int64(rel), next))
	}
	if n := s.idx.len(); n > 0 {
		if rel, _ := s.idx.entry(n - 1); s.base+int64(rel) >= next {
			return bad(errBadIndex)
		}
	}
	s.size.Store(end)
	s.next.Store(next)
	s.idxOnDisk, s.tidxOnDisk = len(idx), len(tidx)
	if tail != nil {
		*tail = append(*tail, starts...)
	}
	return true, cut, nil
}
