package log

// The active segment's index on disk. A rolled segment's index files are
// written whole when it rolls; the active segment's live in memory, so
// after a crash (no clean shutdown) its every batch used to be read and
// checked again: with many partitions, each holding all its data in one
// active segment, that is the whole log.
//
// CheckpointIndex appends to the active segment's index files the
// entries of its durable batches (those below the durable offset, whose
// bytes an fsync has already made durable) that are not on disk yet, as
// Kafka's periodic recovery-point checkpoint does for its logs. Every
// entry on disk thus names a durable batch, so recovery trusts the index
// (fastLoad: the batch at the last entry must be the one it names) and
// checks only the batches after its last entry, truncating a torn tail.
// The appends are not fsynced: one lost in a crash only means more to
// check, and a torn one fails the index's validation, which falls back to
// checking every batch.

import (
	"fmt"
	"os"
	"sort"
)

// CheckpointIndex appends the entries of the active segment's durable
// batches to its index files (see above). Called periodically
// (log.flush.offset.checkpoint.interval.ms); cheap when nothing changed.
func (l *Log) CheckpointIndex() error {
	// ckptMu: the sync that made the data durable has written its
	// leader-epoch checkpoint, which recovery trusts below the indexed
	// data.
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() || l.failed.Load() != nil {
		return nil
	}
	s := l.active
	d := l.durable.Load()
	if s == nil || d <= s.base {
		return nil
	}
	// Recovery trusts the leader-epoch checkpoint for the indexed data:
	// write it first if an earlier write of it failed.
	if err := l.persistEpochsLocked(); err != nil {
		return err
	}
	rel := s.rel(d)
	s.idxMu.RLock()
	n := sort.Search(s.idx.len(), func(i int) bool { r, _ := s.idx.entry(i); return r >= rel })
	m := sort.Search(s.tidx.len(), func(i int) bool { _, r := s.tidx.entry(i); return r >= rel })
	idx := append([]byte(nil), s.idx.b[:n*offsetEntrySize]...)
	tidx := append([]byte(nil), s.tidx.b[:m*timeEntrySize]...)
	s.idxMu.RUnlock()
	if err := l.appendIndexFile(s.indexPath(), idx, &s.idxOnDisk); err != nil {
		return err
	}
	return l.appendIndexFile(s.timeIndexPath(), tidx, &s.tidxOnDisk)
}

// appendIndexFile makes the file at path hold want, writing only the
// bytes past *onDisk (the length known to be there; -1 unknown: the
// whole file is written).
func (l *Log) appendIndexFile(path string, want []byte, onDisk *int) error {
	if *onDisk == len(want) {
		return nil
	}
	from := *onDisk
	if from < 0 || from > len(want) {
		from = 0 // unknown, or the index shrank (a truncation): rewrite
	}
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("log: open %s: %w", path, wrapDiskFull(err))
	}
	created := false
	if from == 0 {
		fi, err := f.Stat()
		created = err == nil && fi.Size() == 0
	}
	if _, err := f.WriteAt(want[from:], int64(from)); err != nil {
		f.Close()
		*onDisk = -1
		return fmt.Errorf("log: write %s: %w", path, wrapDiskFull(err))
	}
	if err := f.Truncate(int64(len(want))); err != nil {
		f.Close()
		*onDisk = -1
		return fmt.Errorf("log: truncate %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		*onDisk = -1
		return fmt.Errorf("log: close %s: %w", path, err)
	}
	if created {
		l.dirDirty = true
	}
	*onDisk = len(want)
	return nil
}
