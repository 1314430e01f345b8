package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/vfs"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	tmpSuffix       = vfs.TempSuffix // a replacement in progress (vfs.WriteFileAtomic)
)

func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// parseSegmentName parses "00000000000000000123.log".
func parseSegmentName(name string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, logSuffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	return base, err == nil && base >= 0
}

// segment is one .log file with its indexes.
//
// Ownership: fields under "append path" belong to the goroutine holding
// Log.mu. Readers use only the atomics, which the append path publishes after
// the bytes are written, and idx/tidx under idxMu.
type segment struct {
	base int64
	path string // path of the .log file; indexes sit beside it
	f    vfs.File

	// refs counts users of f: the Log's segment list holds one; readers,
	// Sync and scans take one with acquire. f is closed when it drops to 0.
	refs    atomic.Int32
	deleted atomic.Bool // files removed (retention, truncation); see release

	size atomic.Int64 // bytes of whole batches
	// phys is the file's length: size, plus on the active segment the
	// zeros preallocated past it (runway.go). Changed under Log.mu.
	phys     atomic.Int64
	next     atomic.Int64 // offset after the last batch (the LEO for the active segment)
	maxTS    atomic.Int64 // largest batch maxTimestamp, -1 if none
	maxTSOff atomic.Int64 // base offset of the first batch carrying maxTS

	idxMu sync.RWMutex
	idx   offsetIndex
	tidx  timeIndex
	txn   txnIndex // aborted transactions (txnindex.go)

	// idxOnDisk and tidxOnDisk are the bytes of the active segment's
	// index files known to be on disk (activeindex.go); -1: unknown, the
	// next checkpoint writes them whole. Owned by Log.mu.
	idxOnDisk, tidxOnDisk int

	// append path
	bytesSinceIndex int64
	rollStartMs     int64 // wall time of the first append (roll by segment.ms)
}

func newSegment(dir string, base int64, f vfs.File) *segment {
	s := &segment{base: base, path: filepath.Join(dir, segmentName(base)+logSuffix), f: f}
	s.refs.Store(1)
	s.next.Store(base)
	s.maxTS.Store(-1)
	s.maxTSOff.Store(-1)
	s.txn.last = -1
	return s
}

func (s *segment) indexPath() string { return strings.TrimSuffix(s.path, logSuffix) + indexSuffix }
func (s *segment) timeIndexPath() string {
	return strings.TrimSuffix(s.path, logSuffix) + timeIndexSuffix
}
func (s *segment) name() string { return filepath.Base(s.path) }

// acquire takes a reference; false if the segment's file is already closed.
func (s *segment) acquire() bool {
	for {
		r := s.refs.Load()
		if r <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release drops a reference and closes the file with the last one.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.f.Close()
		s.closeTxn()
	}
}

// rel converts an absolute offset to one relative to the segment base,
// clamped to the uint32 range.
func (s *segment) rel(off int64) uint32 {
	d := off - s.base
	switch {
	case d < 0:
		return 0
	case d > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(d)
}

// indexBatch records a batch of size bytes at pos in the in-memory indexes
// and metadata. Called with the batch already on disk, before publishing
// size/next. maxEntries caps the indexes (segment.index.bytes); a full
// index just stops growing: lookups stay correct, only scan longer.
// The caller holds idxMu for writing if readers may be active.
func (s *segment) indexBatch(pos, base, size, maxTS int64, interval int64, maxEntries int) {
	if maxTS > s.maxTS.Load() {
		s.maxTS.Store(maxTS)
		s.maxTSOff.Store(base)
	}
	if s.bytesSinceIndex >= interval && s.idx.len() < maxEntries {
		s.idxMu.Lock()
		s.idx.add(s.rel(base), uint32(pos))
		if s.tidx.len() < maxEntries {
			s.tidx.maybeAdd(s.maxTS.Load(), s.rel(s.maxTSOff.Load()))
		}
		s.idxMu.Unlock()
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += size
}

// finishIndex adds the time index entry for the segment's largest timestamp
// when it is rolled, so the last time index entry is the segment's maximum.
func (s *segment) finishIndex() {
	s.idxMu.Lock()
	s.tidx.maybeAdd(s.maxTS.Load(), s.rel(s.maxTSOff.Load()))
	s.idxMu.Unlock()
}

// resetIndex forgets the indexes and metadata before a rebuild.
func (s *segment) resetIndex() {
	s.idxMu.Lock()
	s.idx.b = s.idx.b[:0]
	s.tidx.b = s.tidx.b[:0]
	s.idxMu.Unlock()
	s.maxTS.Store(-1)
	s.maxTSOff.Store(-1)
	s.bytesSinceIndex = 0
}

// lookup returns where to start scanning for off.
func (s *segment) lookup(off int64) int64 {
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	return s.idx.lookup(s.rel(off))
}

// indexBytes returns copies of the index files' contents.
func (s *segment) indexBytes() (idx, tidx []byte) {
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	return append([]byte(nil), s.idx.b...), append([]byte(nil), s.tidx.b...)
}

// writeIndexes makes both index files hold the indexes in memory,
// durably: a file that already does (the active segment's, appended to by
// CheckpointIndex) is fsynced, any other replaced (keepOrReplaceFile).
func (s *segment) writeIndexes(fs vfs.FS) error {
	idx, tidx := s.indexBytes()
	if err := keepOrReplaceFile(fs, s.indexPath(), idx, true); err != nil {
		return err
	}
	return keepOrReplaceFile(fs, s.timeIndexPath(), tidx, true)
}

// removeIndexFiles deletes the index files (stale after a truncation).
func (s *segment) removeIndexFiles(fs vfs.FS) {
	for _, f := range []struct {
		path   string
		onDisk *int
	}{{s.indexPath(), &s.idxOnDisk}, {s.timeIndexPath(), &s.tidxOnDisk}} {
		*f.onDisk = 0
		if err := fs.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Still there with stale entries: unknown, so the next index
			// checkpoint rewrites it whole (even to empty).
			*f.onDisk = -1
		}
	}
}

// headerReader reads batch headers through a small read-ahead buffer, so a
// scan over small batches costs one pread per bufSize bytes and one over
// large batches one pread per batch.
type headerReader struct {
	f    vfs.File
	pbuf *[]byte // pooled buffer behind buf
	end  int64   // readable limit (segment size snapshot)
	buf  []byte
	bpos int64 // file position of buf[0]
	n    int   // valid bytes in buf
}

const headerReadAhead = 4096

var headerBufPool = sync.Pool{New: func() any { b := make([]byte, headerReadAhead); return &b }}

func newHeaderReader(f vfs.File, end int64) *headerReader {
	p := headerBufPool.Get().(*[]byte)
	return &headerReader{f: f, end: end, pbuf: p, buf: *p, bpos: -1}
}

func (r *headerReader) close() {
	headerBufPool.Put(r.pbuf)
	r.pbuf, r.buf = nil, nil
}

// header returns the batch.HeaderSize bytes at pos, valid until the next
// call. io.ErrUnexpectedEOF if fewer remain before end.
func (r *headerReader) header(pos int64) ([]byte, error) {
	if pos < 0 || r.end-pos < batch.HeaderSize {
		return nil, io.ErrUnexpectedEOF
	}
	if r.bpos >= 0 && pos >= r.bpos && pos+batch.HeaderSize <= r.bpos+int64(r.n) {
		o := pos - r.bpos
		return r.buf[o : o+batch.HeaderSize], nil
	}
	want := int64(len(r.buf))
	if r.end-pos < want {
		want = r.end - pos
	}
	n, err := r.f.ReadAt(r.buf[:want], pos)
	if int64(n) < batch.HeaderSize {
		r.bpos = -1
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	r.bpos, r.n = pos, n
	return r.buf[:batch.HeaderSize], nil
}

// seek returns the position and header of the first batch at or after pos
// whose last offset is >= off; found false at the end of the data.
func (r *headerReader) seek(pos, off int64) (int64, []byte, bool, error) {
	for pos < r.end {
		h, err := r.header(pos)
		if err != nil {
			return pos, nil, false, err
		}
		size := peekSize(h)
		if size < batch.HeaderSize || pos+size > r.end {
			return pos, nil, false, fmt.Errorf("batch at %d: bad size %d", pos, size)
		}
		if peekBase(h)+peekLastDelta(h) >= off {
			return pos, h, true, nil
		}
		pos += size
	}
	return pos, nil, false, nil
}

// scanner walks a segment file from a position, validating each batch in
// full (size, magic, CRC, offsets): the recovery path. It reads in large
// chunks and grows its buffer to fit a batch, bounded by the file size.
type scanner struct {
	f        vfs.File
	name     string
	pos, end int64
	prevNext int64 // every base offset must be >= this
	segBase  int64
	buf      []byte
	bstart   int64 // file position of buf[0]
	n        int
}

const scanChunk = 1 << 20

func newScanner(f vfs.File, name string, pos, end, segBase, prevNext int64) *scanner {
	return &scanner{f: f, name: name, pos: pos, end: end, segBase: segBase, prevNext: prevNext}
}

// next returns the next valid batch and its position. It returns io.EOF at a
// clean end and a *CorruptionError at the first torn or invalid batch.
func (sc *scanner) next() (batch.Header, int64, error) {
	pos := sc.pos
	if pos >= sc.end {
		return batch.Header{}, pos, io.EOF
	}
	corrupt := func(err error) (batch.Header, int64, error) {
		return batch.Header{}, pos, &CorruptionError{Segment: sc.name, Offset: pos, Err: err}
	}
	if sc.end-pos < batch.HeaderSize {
		return corrupt(fmt.Errorf("torn header: %d bytes left", sc.end-pos))
	}
	hb, err := sc.window(pos, batch.HeaderSize)
	if err != nil {
		return batch.Header{}, pos, err
	}
	h, err := ParseBatchHeader(hb)
	if err != nil {
		return corrupt(err)
	}
	size := int64(h.Size())
	if size > sc.end-pos {
		return corrupt(fmt.Errorf("torn batch: size %d, %d bytes left", size, sc.end-pos))
	}
	if h.BaseOffset < sc.prevNext || h.BaseOffset < sc.segBase {
		return corrupt(fmt.Errorf("base offset %d below %d", h.BaseOffset, max(sc.prevNext, sc.segBase)))
	}
	if h.LastOffset()-sc.segBase > math.MaxUint32 {
		return corrupt(fmt.Errorf("offset %d too far from segment base %d", h.LastOffset(), sc.segBase))
	}
	b, err := sc.window(pos, size)
	if err != nil {
		return batch.Header{}, pos, err
	}
	if c := crc32.Checksum(b[offAttributes:], castagnoli); c != h.CRC {
		return corrupt(fmt.Errorf("crc %08x, computed %08x", h.CRC, c))
	}
	sc.pos = pos + size
	sc.prevNext = h.LastOffset() + 1
	return h, pos, nil
}

// window returns n bytes of the file at pos, reading ahead in chunks.
func (sc *scanner) window(pos, n int64) ([]byte, error) {
	if pos >= sc.bstart && pos+n <= sc.bstart+int64(sc.n) {
		o := pos - sc.bstart
		return sc.buf[o : o+n], nil
	}
	want := max(n, int64(scanChunk))
	if want > sc.end-pos {
		want = sc.end - pos
	}
	if int64(cap(sc.buf)) < want {
		sc.buf = make([]byte, want)
	}
	sc.buf = sc.buf[:want]
	m, err := sc.f.ReadAt(sc.buf, pos)
	if int64(m) < n {
		sc.n = 0
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("log: read %s at %d: %w", sc.name, pos, err)
	}
	sc.bstart, sc.n = pos, m
	return sc.buf[:n], nil
}

// putHeader rewrites the offset fields of batch b (outside the CRC).
func putHeader(b []byte, base int64, epoch int32) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}
