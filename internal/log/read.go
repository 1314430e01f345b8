package log

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/berthmq/berth/internal/batch"
)

// Read returns whole batches starting with the batch that contains offset
// (so the first batch may start before offset, as in Kafka): at most
// maxBytes bytes, but at least the first batch when minOne is set, and no
// batch whose base offset is >= maxOffset (the caller's high watermark).
// It returns ErrOffsetOutOfRange when offset < LogStartOffset or offset >
// LogEndOffset, and empty data when offset == LogEndOffset or >= maxOffset.
// Data come from one segment per call, like Kafka's fetch. Read does not
// take the append lock: it preads into a new buffer of exactly the size of
// the batches returned.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOne bool) ([]byte, error) {
	return l.ReadWith(nil, offset, maxBytes, maxOffset, minOne)
}

// ReadWith is Read with the result buffer taken from alloc(n), which must
// return a slice of length n (its contents are overwritten); nil means
// make. Fetch passes pooled buffers so large reads are not zeroed first.
func (l *Log) ReadWith(alloc func(n int) []byte, offset int64, maxBytes int32, maxOffset int64, minOne bool) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		if l.closed.Load() {
			return nil, ErrClosed
		}
		gen := l.truncGen.Load()
		if gen&1 == 1 && attempt < 3 {
			// Truncate in progress (it holds mu); wait for it.
			l.mu.Lock()
			l.mu.Unlock()
			continue
		}
		start, leo := l.logStart.Load(), l.leo.Load()
		if offset < start || offset > leo {
			return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, start, leo)
		}
		if offset == leo || offset >= maxOffset {
			return nil, nil
		}
		data, retry, err := l.read(alloc, offset, maxBytes, maxOffset, minOne)
		if retry || gen != l.truncGen.Load() {
			// A segment went away or the log was truncated under us:
			// look again at the new state.
			if attempt < 3 {
				continue
			}
			if retry {
				return nil, fmt.Errorf("%w: %d: log changed during read", ErrOffsetOutOfRange, offset)
			}
		}
		return data, err
	}
}

// findSegment returns the index of the segment holding off: the last one
// whose base is <= off (0 if none).
func findSegment(segs []*segment, off int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > off })
	return max(i-1, 0)
}

func (l *Log) read(alloc func(int) []byte, offset int64, maxBytes int32, maxOffset int64, minOne bool) (data []byte, retry bool, err error) {
	segs := l.segments()
	for i := findSegment(segs, offset); i < len(segs); i++ {
		s := segs[i]
		if !s.acquire() {
			return nil, true, nil
		}
		data, done, err := s.read(alloc, offset, int64(maxBytes), maxOffset, minOne)
		s.release()
		if err != nil {
			if s.deleted.Load() {
				return nil, true, nil
			}
			return nil, false, err
		}
		if done {
			return data, false, nil
		}
	}
	return nil, false, nil
}

// read reads from one segment; done is false when the segment holds nothing
// at or after offset, so the caller tries the next one.
func (s *segment) read(alloc func(int) []byte, offset, maxBytes, maxOffset int64, minOne bool) (data []byte, done bool, err error) {
	size := s.size.Load()
	r := newHeaderReader(s.f, size)
	defer r.close()
	start, h, found, err := r.seek(s.lookup(offset), offset)
	if err != nil {
		return nil, false, s.readErr(start, err)
	}
	if !found {
		return nil, false, nil
	}
	if peekBase(h) >= maxOffset {
		return nil, true, nil
	}
	end := start
	for end < size {
		if end != start {
			if h, err = r.header(end); err != nil {
				return nil, false, s.readErr(end, err)
			}
			if peekBase(h) >= maxOffset {
				break
			}
		}
		bs := peekSize(h)
		if bs < batch.HeaderSize || end+bs > size {
			return nil, false, s.readErr(end, fmt.Errorf("bad batch size %d", bs))
		}
		if end+bs-start > maxBytes && !(minOne && end == start) {
			break
		}
		end += bs
	}
	if end == start {
		return nil, true, nil
	}
	var buf []byte
	if alloc != nil {
		buf = alloc(int(end - start))
	} else {
		buf = make([]byte, end-start)
	}
	if n, err := s.f.ReadAt(buf, start); n < len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, false, s.readErr(start, err)
	}
	return buf, true, nil
}

func (s *segment) readErr(pos int64, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &CorruptionError{Segment: s.name(), Offset: pos, Err: err}
	}
	return fmt.Errorf("log: read %s at %d: %w", s.name(), pos, err)
}

// pinned returns the current segments, each acquired; release them with
// unpin.
func (l *Log) pinned() []*segment {
	segs := l.segments()
	out := make([]*segment, 0, len(segs))
	for _, s := range segs {
		if s.acquire() {
			out = append(out, s)
		}
	}
	return out
}

func unpin(segs []*segment) {
	for _, s := range segs {
		s.release()
	}
}

// ScanBatches calls fn with the header of every batch whose last offset is
// >= from, in offset order, up to the log end offset at the call. It stops at
// and returns the first error of fn.
func (l *Log) ScanBatches(from int64, fn func(h batch.Header) error) error {
	if l.closed.Load() {
		return ErrClosed
	}
	segs := l.pinned()
	defer unpin(segs)
	for i := findSegment(segs, from); i < len(segs); i++ {
		s := segs[i]
		if s.next.Load() <= from {
			continue
		}
		if err := s.scanHeaders(s.lookup(from), s.size.Load(), func(pos int64, h batch.Header) error {
			if h.LastOffset() < from {
				return nil
			}
			return fn(h)
		}); err != nil {
			return err
		}
	}
	return nil
}

// scanHeaders calls fn for each batch header in [pos, end).
func (s *segment) scanHeaders(pos, end int64, fn func(pos int64, h batch.Header) error) error {
	r := newHeaderReader(s.f, end)
	defer r.close()
	for pos < end {
		hb, err := r.header(pos)
		if err != nil {
			return s.readErr(pos, err)
		}
		h, err := ParseBatchHeader(hb)
		if err != nil {
			return &CorruptionError{Segment: s.name(), Offset: pos, Err: err}
		}
		if pos+int64(h.Size()) > end {
			return &CorruptionError{Segment: s.name(), Offset: pos, Err: io.ErrUnexpectedEOF}
		}
		if err := fn(pos, h); err != nil {
			return err
		}
		pos += int64(h.Size())
	}
	return nil
}

// readBatch reads the whole batch at pos.
func (s *segment) readBatch(pos int64, h batch.Header) ([]byte, error) {
	b := make([]byte, h.Size())
	if n, err := s.f.ReadAt(b, pos); n < len(b) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, s.readErr(pos, err)
	}
	return b, nil
}

var errStop = errors.New("stop")

// OffsetForTimestamp returns the first offset (at or after LogStartOffset)
// whose record timestamp is >= ts, with that record's timestamp (ListOffsets).
// For uncompressed batches it parses the records and returns the exact
// record. For compressed batches it returns the base offset (or the log
// start offset, if higher) of the first batch whose maxTimestamp >= ts, with
// that maxTimestamp: a batch-granular answer a consumer seeking by time
// accepts, as it skips earlier records itself. found is false when no
// record qualifies.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error) {
	if l.closed.Load() {
		return -1, -1, false, ErrClosed
	}
	segs := l.pinned()
	defer unpin(segs)
	logStart := l.logStart.Load()
	for _, s := range segs {
		if s.maxTS.Load() < ts || s.next.Load() <= logStart {
			continue
		}
		s.idxMu.RLock()
		rel, ok := s.tidx.lookupBefore(ts)
		s.idxMu.RUnlock()
		from := logStart
		if ok {
			from = max(from, s.base+int64(rel))
		}
		err := s.scanHeaders(s.lookup(from), s.size.Load(), func(pos int64, h batch.Header) error {
			if h.LastOffset() < from || h.MaxTimestamp < ts {
				return nil
			}
			if h.Codec() != 0 && h.Attributes&batch.AttrLogAppendTime == 0 {
				offset, timestamp, found = max(h.BaseOffset, logStart), h.MaxTimestamp, true
				return errStop
			}
			b, err := s.readBatch(pos, h)
			if err != nil {
				return err
			}
			if off, rts, ok := firstRecordAtOrAfter(h, b, ts, logStart); ok {
				offset, timestamp, found = off, rts, true
				return errStop
			}
			return nil
		})
		if errors.Is(err, errStop) {
			return offset, timestamp, true, nil
		}
		if err != nil {
			return -1, -1, false, err
		}
	}
	return -1, -1, false, nil
}

// MaxTimestamp returns the largest timestamp in the log and the offset of
// the first record carrying it: exact for uncompressed batches, the batch's
// last offset for compressed ones. -1, -1 if the log has no timestamps.
func (l *Log) MaxTimestamp() (ts int64, offset int64) {
	segs := l.pinned()
	defer unpin(segs)
	var best *segment
	ts = -1
	for _, s := range segs {
		if t := s.maxTS.Load(); t > ts {
			ts, best = t, s
		}
	}
	if best == nil {
		return -1, -1
	}
	base := best.maxTSOff.Load()
	offset = base
	_ = best.scanHeaders(best.lookup(base), best.size.Load(), func(pos int64, h batch.Header) error {
		if h.BaseOffset < base {
			return nil
		}
		offset = h.LastOffset()
		if b, err := best.readBatch(pos, h); err == nil {
			if off, _, ok := firstRecordAtOrAfter(h, b, ts, 0); ok {
				offset = off
			}
		}
		return errStop
	})
	return ts, offset
}

// Size is the total size of the segment files.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments() {
		n += s.size.Load()
	}
	return n
}

// Segments describes the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	segs := l.segments()
	out := make([]SegmentInfo, len(segs))
	for i, s := range segs {
		out[i] = SegmentInfo{BaseOffset: s.base, NextOffset: s.next.Load(), Size: s.size.Load(), MaxTimestamp: s.maxTS.Load()}
	}
	return out
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest known epoch <=
// epoch and the offset where it ended (the start of the next epoch, or the
// log end offset for the latest). -1, -1 when epoch is unknown: below zero,
// above the latest epoch, or the cache is empty. For an epoch below the
// first known one it returns epoch itself and the first epoch's start
// offset, as Kafka does.
func (l *Log) EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epochs.endOffsetFor(epoch, l.leo.Load())
}

// LatestEpoch is the newest leader epoch in the log, -1 if none.
func (l *Log) LatestEpoch() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epochs.latest()
}
