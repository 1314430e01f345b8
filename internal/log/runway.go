package log

// The runway: zeros written and fsynced past the active segment's last
// batch, so that an append lands on blocks the file already has and the
// fdatasync that makes it durable writes data only. An append past the
// end of the file also changes its size, and fdatasync must then commit
// the filesystem's journal as well: on ext4 here that is 405-458 µs for
// a 4 KiB append against 238 µs for the same write over zeros
// (docs/benchmarks.md).
//
// The zeros are never data: a segment's batches end at segment.size, and
// readers, retention and the indexes go by it. The file's length is
// segment.phys. A rolled segment and a cleanly closed log are trimmed to
// their data (rollLocked, shutdownLocked); after a crash, recovery finds
// the zeros where the next batch header would be and truncates them as it
// does a torn tail (open.go, zeroTail), logging it at debug level.
//
// The replica manager decides which partitions get a runway and how long
// (log.preallocate.bytes): ExtendRunway writes zeros in chunks under mu, so
// an append waits at most one chunk's page-cache write, and fsyncs them
// outside it.

import (
	"fmt"
	"io"
)

// runwayChunk is the most zeros written under mu at once.
const runwayChunk = 128 << 10

var zeroChunk [runwayChunk]byte

// Runway returns the bytes preallocated past the active segment's data.
func (l *Log) Runway() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.active
	if s == nil {
		return 0
	}
	return s.phys.Load() - s.size.Load()
}

// ExtendRunway writes zeros after the active segment's data until n bytes
// of it (but not past segment.bytes) are preallocated, and fsyncs them. It
// returns the bytes written. It stops early when the segment rolls. A
// failed fsync fails the log, as Sync's does: the write error it reports
// may have been the data's too.
func (l *Log) ExtendRunway(n int64) (int64, error) {
	l.mu.Lock()
	if err := l.writable(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	s := l.active
	if !s.acquire() {
		l.mu.Unlock()
		return 0, nil
	}
	l.mu.Unlock()
	defer s.release()

	var wrote int64
	for {
		l.mu.Lock()
		if err := l.writable(); err != nil || l.active != s {
			l.mu.Unlock()
			break
		}
		size, phys := s.size.Load(), s.phys.Load()
		target := min(size+n, l.cfg.SegmentBytes)
		if phys >= target {
			l.mu.Unlock()
			break
		}
		c := min(int64(runwayChunk), target-phys)
		if _, err := s.f.WriteAt(zeroChunk[:c], phys); err != nil {
			if terr := s.f.Truncate(phys); terr != nil {
				l.fail(fmt.Errorf("truncate %s after failed preallocation: %w", s.name(), terr))
			}
			l.mu.Unlock()
			return wrote, fmt.Errorf("log: preallocate %s: %w", s.name(), wrapDiskFull(err))
		}
		s.phys.Store(phys + c)
		wrote += c
		l.mu.Unlock()
	}
	if wrote == 0 || s.deleted.Load() { // a deleted segment's zeros need no fsync
		return wrote, nil
	}
	if err := s.f.Sync(); err != nil {
		err = fmt.Errorf("log: fsync %s after preallocation: %w", s.name(), err)
		l.fail(err)
		return wrote, err
	}
	return wrote, nil
}

// TrimRunway gives back the active segment's preallocated zeros.
func (l *Log) TrimRunway() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	return l.trimLocked(l.active)
}

// trimLocked truncates s to its data. Not durable until s is fsynced.
func (l *Log) trimLocked(s *segment) error {
	size := s.size.Load()
	if s.phys.Load() <= size {
		return nil
	}
	if err := s.f.Truncate(size); err != nil {
		return fmt.Errorf("log: trim preallocated %s: %w", s.name(), err)
	}
	s.phys.Store(size)
	return nil
}

// zeroTail reports whether f holds only zero bytes from pos to end: a
// preallocated runway a crash left behind, not a torn batch.
func zeroTail(r io.ReaderAt, pos, end int64) bool {
	buf := make([]byte, 64<<10)
	for pos < end {
		n := min(int64(len(buf)), end-pos)
		if _, err := r.ReadAt(buf[:n], pos); err != nil {
			return false
		}
		for _, b := range buf[:n] {
			if b != 0 {
				return false
			}
		}
		pos += n
	}
	return true
}
