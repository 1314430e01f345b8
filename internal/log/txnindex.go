package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/berthmq/berth/internal/vfs"
)

// The transaction index (<base>.txnindex, Kafka's layout; see
// docs/format/log.md): one fixed-size entry for every ABORT marker whose
// offset lies in the segment, in marker order. The owner of the log knows
// where a transaction began, so it hands the entries in (AppendTxn,
// AppendAbortedTxns); the log stores them durably with the segment's data,
// deletes them with the segment, cuts them on truncation, carries them
// through compaction (but those of the ABORT markers compaction removes)
// and answers AbortedTxns for read_committed fetches.
//
// Unlike the offset and time indexes it is not a cache: the log alone
// cannot rebuild it (a marker does not say where its transaction began).
// Recovery keeps the valid entries whose marker is still in the data; the
// owner replays the log from its producer snapshot and re-adds what is
// missing, which is enough because SaveProducerSnapshot fsyncs every
// written entry before the snapshot that covers it.

const (
	txnIndexSuffix  = ".txnindex"
	txnEntrySize    = 34 // version int16, producer id, first, last, last stable offset
	txnEntryVersion = 0
)

// AbortedTxn is one aborted transaction: producer ProducerID's transaction
// that began at FirstOffset and was aborted by the marker at LastOffset.
// LastStableOffset is at most the first offset of every transaction still
// open after the marker (the marker offset + 1 if none was): a transaction
// aborted by a later marker cannot begin below it, so a search for the
// aborted transactions overlapping [from, upto) stops at the first entry
// whose LastStableOffset >= upto (Kafka's rule).
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

func appendTxnEntry(b []byte, t AbortedTxn) []byte {
	b = binary.BigEndian.AppendUint16(b, txnEntryVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(t.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(t.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastOffset))
	return binary.BigEndian.AppendUint64(b, uint64(t.LastStableOffset))
}

func decodeTxnEntry(b []byte) (AbortedTxn, int16) {
	return AbortedTxn{
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
	}, int16(binary.BigEndian.Uint16(b))
}

// validTxnPrefix returns how many leading entries of b are whole, of the
// known version, with markers strictly increasing inside [base, next) and
// first offsets not after their markers.
func validTxnPrefix(b []byte, base, next int64) (int, error) {
	prev := int64(-1)
	n := len(b) / txnEntrySize
	for i := range n {
		t, v := decodeTxnEntry(b[i*txnEntrySize:])
		switch {
		case v != txnEntryVersion:
			return i, fmt.Errorf("entry %d: version %d", i, v)
		case t.LastOffset < base || t.LastOffset <= prev:
			return i, fmt.Errorf("entry %d: marker offset %d out of order", i, t.LastOffset)
		case t.FirstOffset > t.LastOffset:
			return i, fmt.Errorf("entry %d: first offset %d after marker %d", i, t.FirstOffset, t.LastOffset)
		case t.LastOffset >= next:
			return i, nil // the marker is gone with the data: not damage
		}
		prev = t.LastOffset
	}
	if len(b)%txnEntrySize != 0 {
		return n, fmt.Errorf("torn entry: %d trailing bytes", len(b)%txnEntrySize)
	}
	return n, nil
}

// txnIndex is a segment's transaction index. Writers hold Log.mu and
// segment.idxMu; readers hold idxMu for reading (and a segment reference,
// which keeps f open).
type txnIndex struct {
	f    vfs.File // nil until the segment has an entry
	n    int      // entries
	last int64    // marker offset of the last entry, -1 if none
	// mem holds the entries in memory for the active segment, so the
	// fetch path reads no file there; nil for other segments.
	mem   []byte
	dirty bool // written since the last fsync
}

func (s *segment) txnPath() string { return strings.TrimSuffix(s.path, logSuffix) + txnIndexSuffix }

// txnCount returns the number of entries.
func (s *segment) txnCount() int {
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	return s.txn.n
}

// dropTxnMem forgets the in-memory copy of the entries (the segment is no
// longer the active one).
func (s *segment) dropTxnMem() {
	s.idxMu.Lock()
	s.txn.mem = nil
	s.idxMu.Unlock()
}

// keepTxnMem loads the entries into memory (the segment became the active
// one).
func (s *segment) keepTxnMem() error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.txn.mem != nil {
		return nil
	}
	b, err := s.txnReadLocked()
	if err != nil {
		return err
	}
	s.txn.mem = append(make([]byte, 0, len(b)), b...)
	return nil
}

// txnReadLocked returns the raw entries. Called with idxMu held.
func (s *segment) txnReadLocked() ([]byte, error) {
	if s.txn.mem != nil {
		return s.txn.mem, nil
	}
	if s.txn.n == 0 {
		return nil, nil
	}
	b := make([]byte, s.txn.n*txnEntrySize)
	if _, err := s.txn.f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("log: read %s: %w", s.txnPath(), err)
	}
	return b, nil
}

// txnBytes returns a copy of the raw entries and their count.
func (s *segment) txnBytes() ([]byte, int, error) {
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	b, err := s.txnReadLocked()
	if err != nil {
		return nil, 0, err
	}
	return append([]byte(nil), b...), s.txn.n, nil
}

// txnReadChunk is how many entries a read of an index file takes at once.
const txnReadChunk = 128

// eachTxnFrom calls fn with each entry whose marker is at or after from,
// in marker order, until fn returns false. It reports whether fn stopped
// it. The first entry is found by binary search (in memory, or, in a file
// of more than one chunk, with one small pread a step); the file is then
// read in chunks.
func (s *segment) eachTxnFrom(from int64, fn func(AbortedTxn) bool) (bool, error) {
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	n := s.txn.n
	if n == 0 {
		return false, nil
	}
	if mem := s.txn.mem; mem != nil {
		i := sort.Search(n, func(i int) bool { return txnLastOffset(mem[i*txnEntrySize:]) >= from })
		for b := mem[i*txnEntrySize:]; len(b) >= txnEntrySize; b = b[txnEntrySize:] {
			if t, _ := decodeTxnEntry(b); !fn(t) {
				return true, nil
			}
		}
		return false, nil
	}
	var e [txnEntrySize]byte
	var rerr error
	i := sort.Search(n, func(i int) bool {
		if rerr != nil || n <= txnReadChunk {
			return true // one read of the whole file is cheaper
		}
		if _, rerr = s.txn.f.ReadAt(e[:], int64(i)*txnEntrySize); rerr != nil {
			return true
		}
		return txnLastOffset(e[:]) >= from
	})
	if rerr != nil {
		return false, fmt.Errorf("log: read %s: %w", s.txnPath(), rerr)
	}
	buf := make([]byte, min(n-i, txnReadChunk)*txnEntrySize)
	for i < n {
		b := buf[:min(n-i, txnReadChunk)*txnEntrySize]
		if _, err := s.txn.f.ReadAt(b, int64(i)*txnEntrySize); err != nil {
			return false, fmt.Errorf("log: read %s: %w", s.txnPath(), err)
		}
		for ; len(b) >= txnEntrySize; b = b[txnEntrySize:] {
			if t, _ := decodeTxnEntry(b); t.LastOffset >= from && !fn(t) {
				return true, nil
			}
		}
		i += txnReadChunk
	}
	return false, nil
}

func txnLastOffset(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[18:])) }

// appendTxn writes entries (markers in this segment, increasing, after
// the last entry) at the end of the index, creating the file with the
// first one. On error nothing is added. created reports a new file (the
// directory needs an fsync).
func (s *segment) appendTxn(fs vfs.FS, es []AbortedTxn) (created bool, err error) {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.txn.f == nil {
		f, err := fs.OpenFile(s.txnPath(), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return false, fmt.Errorf("log: create %s: %w", s.txnPath(), wrapDiskFull(err))
		}
		s.txn.f, created = f, true
	}
	b := make([]byte, 0, len(es)*txnEntrySize)
	for _, t := range es {
		b = appendTxnEntry(b, t)
	}
	at := int64(s.txn.n) * txnEntrySize
	if _, err := s.txn.f.WriteAt(b, at); err != nil {
		_ = s.txn.f.Truncate(at) // a torn entry is dropped on open anyway
		return created, fmt.Errorf("log: append to %s: %w", s.txnPath(), wrapDiskFull(err))
	}
	s.txn.n += len(es)
	s.txn.last = es[len(es)-1].LastOffset
	if s.txn.mem != nil {
		s.txn.mem = append(s.txn.mem, b...)
	}
	s.txn.dirty = true
	return created, nil
}

// truncateTxn drops the entries whose marker is at or past next (the
// segment's data end after a truncation).
func (s *segment) truncateTxn(next int64) error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.txn.n == 0 || s.txn.last < next {
		return nil
	}
	b, err := s.txnReadLocked()
	if err != nil {
		return err
	}
	k := 0
	for k < s.txn.n {
		if t, _ := decodeTxnEntry(b[k*txnEntrySize:]); t.LastOffset >= next {
			break
		}
		k++
	}
	return s.cutTxnLocked(k, b)
}

// cutTxnLocked keeps the first k entries of b (the current entries).
func (s *segment) cutTxnLocked(k int, b []byte) error {
	if err := s.txn.f.Truncate(int64(k) * txnEntrySize); err != nil {
		return fmt.Errorf("log: truncate %s: %w", s.txnPath(), err)
	}
	s.txn.n, s.txn.last = k, -1
	if k > 0 {
		t, _ := decodeTxnEntry(b[(k-1)*txnEntrySize:])
		s.txn.last = t.LastOffset
	}
	if s.txn.mem != nil {
		s.txn.mem = s.txn.mem[:k*txnEntrySize]
	}
	s.txn.dirty = true
	return nil
}

// syncTxn fsyncs the index if it was written since the last fsync.
func (s *segment) syncTxn() error {
	s.idxMu.Lock()
	f, dirty := s.txn.f, s.txn.dirty
	s.txn.dirty = false
	s.idxMu.Unlock()
	if !dirty || f == nil || s.deleted.Load() {
		return nil
	}
	if err := f.Sync(); err != nil {
		s.idxMu.Lock()
		s.txn.dirty = true
		s.idxMu.Unlock()
		return fmt.Errorf("log: fsync %s: %w", s.txnPath(), err)
	}
	return nil
}

// closeTxn closes the index file (the segment's last reference went).
func (s *segment) closeTxn() {
	if s.txn.f != nil {
		s.txn.f.Close()
		s.txn.f = nil
	}
}

// openTxn opens the segment's index file at path, if there is one, and
// keeps its valid entries with a marker below next, cutting the file after
// them (dropped). damage says why entries were invalid, for the caller to
// log; the entries before the first invalid one are kept. A file left
// without entries is removed.
func (s *segment) openTxn(fs vfs.FS, path string, next int64) (dropped bool, damage, err error) {
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("log: open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return false, nil, fmt.Errorf("log: stat %s: %w", path, err)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		f.Close()
		return false, nil, fmt.Errorf("log: read %s: %w", path, err)
	}
	k, damage := validTxnPrefix(b, s.base, next)
	if k == 0 {
		f.Close()
		if err := fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, damage, fmt.Errorf("log: remove %s: %w", path, err)
		}
		return len(b) > 0, damage, nil
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	s.txn = txnIndex{f: f, n: len(b) / txnEntrySize, last: -1}
	if s.txn.n > 0 {
		t, _ := decodeTxnEntry(b[(s.txn.n-1)*txnEntrySize:])
		s.txn.last = t.LastOffset
	}
	if int64(k)*txnEntrySize == int64(len(b)) {
		return false, damage, nil
	}
	if err := s.cutTxnLocked(k, b); err != nil {
		return true, damage, err
	}
	if err := f.Sync(); err != nil {
		return true, damage, fmt.Errorf("log: fsync %s: %w", path, err)
	}
	s.txn.dirty = false
	return true, damage, nil
}

// ---- Log API ----

// AppendTxn is Append for batches holding ABORT markers: aborted names
// them, in offset order, and is written to the transaction index of the
// segment the markers go to, under the same lock as the data, so a Sync
// that covers a marker covers its entry too. Entries whose LastOffset lies
// outside the appended batches are ignored (the caller may pass more).
func (l *Log) AppendTxn(batches []byte, leaderEpoch int32, aborted []AbortedTxn) (AppendResult, error) {
	return l.appendAssign(batches, leaderEpoch, aborted)
}

// AppendAbortedTxns adds entries for ABORT markers already in the log (a
// follower's replicated markers, or the owner's replay after a restart or
// truncation), each to the segment holding its marker. An entry whose
// marker is not in the log, or not after the last entry of its segment
// (already indexed), is skipped, so a replay may repeat entries. A failed
// write fails the log (ErrFailed): its markers are in the log without
// their entries until reopening lets the owner replay them.
func (l *Log) AppendAbortedTxns(ts []AbortedTxn) error {
	if len(ts) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	segs := l.segments()
	leo := l.leo.Load()
	for _, t := range ts {
		if t.LastOffset >= leo || len(segs) == 0 || t.LastOffset < segs[0].base {
			continue
		}
		s := segs[findSegment(segs, t.LastOffset)]
		if t.LastOffset >= s.next.Load() || t.LastOffset <= s.txnLast() {
			continue
		}
		if err := l.appendTxnLocked(s, []AbortedTxn{t}); err != nil {
			l.fail(err)
			return fmt.Errorf("%w: %w", ErrFailed, err)
		}
	}
	return nil
}

func (s *segment) txnLast() int64 {
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	if s.txn.n == 0 {
		return -1
	}
	return s.txn.last
}

// appendTxnLocked writes es to s's index. Called with mu held.
func (l *Log) appendTxnLocked(s *segment, es []AbortedTxn) error {
	created, err := s.appendTxn(l.fs, es)
	if created {
		l.dirDirty = true
	}
	if err == nil {
		l.txnDirty.Store(true)
		l.hasTxn.Store(true)
	}
	return err
}

// syncTxnIndexes fsyncs every transaction index written since the last
// call.
func (l *Log) syncTxnIndexes() error {
	if !l.txnDirty.Swap(false) {
		return nil
	}
	if err := l.syncTxnFiles(); err != nil {
		l.txnDirty.Store(true)
		return err
	}
	return nil
}

// syncTxnFiles fsyncs every segment's transaction index.
func (l *Log) syncTxnFiles() error {
	segs := l.pinned()
	defer unpin(segs)
	for _, s := range segs {
		if err := s.syncTxn(); err != nil {
			return err
		}
	}
	return nil
}

// AbortedTxns returns the aborted transactions that overlap [from, upto):
// marker at or after from, first offset before upto, in marker order. It
// reads the transaction index of the segment holding from and of the
// later ones, from their first entry with a marker at or after from, and
// stops at the first entry whose LastStableOffset is at least upto (no
// later aborted transaction can begin before upto) or at the end of the
// log. Only the active segment's entries are in memory; older segments'
// are read from their files.
func (l *Log) AbortedTxns(from, upto int64) ([]AbortedTxn, error) {
	if !l.hasTxn.Load() {
		// Never an entry: skip the segments (the usual partition). Set
		// before a marker's data is written, so never late for a reader.
		return nil, nil
	}
	for attempt := 0; ; attempt++ {
		if l.closed.Load() {
			return nil, ErrClosed
		}
		out, retry, err := l.abortedTxns(from, upto)
		if !retry || attempt == 3 {
			return out, err
		}
	}
}

func (l *Log) abortedTxns(from, upto int64) (out []AbortedTxn, retry bool, err error) {
	segs := l.segments()
	for i := findSegment(segs, from); i < len(segs); i++ {
		s := segs[i]
		if !s.acquire() {
			return nil, true, nil // swapped or deleted under us: look again
		}
		stopped, err := s.eachTxnFrom(from, func(t AbortedTxn) bool {
			if t.FirstOffset < upto {
				out = append(out, t)
			}
			return t.LastStableOffset < upto
		})
		deleted := s.deleted.Load()
		s.release()
		if err != nil {
			if deleted {
				return nil, true, nil
			}
			return nil, false, err
		}
		if stopped {
			break
		}
	}
	return out, false, nil
}

// cutTxn keeps the first k entries (undoing an append).
func (s *segment) cutTxn(k int) error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if k >= s.txn.n {
		return nil
	}
	b, err := s.txnReadLocked()
	if err != nil {
		return err
	}
	return s.cutTxnLocked(k, b)
}
