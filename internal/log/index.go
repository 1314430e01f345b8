package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/berthmq/berth/internal/batch"
)

// Index entry sizes. See docs/format/log.md.
const (
	offsetEntrySize = 8  // uint32 relative offset, uint32 file position
	timeEntrySize   = 12 // int64 timestamp, uint32 relative offset
)

// offsetIndex is a sparse offset index kept as the raw big-endian bytes of the
// .index file, so loading and persisting it are plain copies. Entry i maps the
// base offset of a batch (relative to the segment's base) to its position.
type offsetIndex struct{ b []byte }

func (x *offsetIndex) len() int { return len(x.b) / offsetEntrySize }

func (x *offsetIndex) entry(i int) (rel uint32, pos uint32) {
	e := x.b[i*offsetEntrySize:]
	return binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:])
}

func (x *offsetIndex) add(rel, pos uint32) {
	x.b = binary.BigEndian.AppendUint32(x.b, rel)
	x.b = binary.BigEndian.AppendUint32(x.b, pos)
}

// lookup returns the position of the last entry whose offset is <= rel, 0 if
// there is none: the place to start scanning for rel.
func (x *offsetIndex) lookup(rel uint32) int64 {
	n := x.len()
	i := sort.Search(n, func(i int) bool { r, _ := x.entry(i); return r > rel })
	if i == 0 {
		return 0
	}
	_, pos := x.entry(i - 1)
	return int64(pos)
}

// truncate drops entries whose offset is >= rel or position >= pos.
func (x *offsetIndex) truncate(rel uint32, pos int64) {
	n := x.len()
	i := sort.Search(n, func(i int) bool { r, p := x.entry(i); return r >= rel || int64(p) >= pos })
	x.b = x.b[:i*offsetEntrySize]
}

var errBadIndex = errors.New("index entries not increasing")

// check validates the index against a .log file of size bytes: whole
// entries, strictly increasing offsets and positions, positions inside the file.
func (x *offsetIndex) check(size int64) error {
	if len(x.b)%offsetEntrySize != 0 {
		return fmt.Errorf("index size %d not a multiple of %d", len(x.b), offsetEntrySize)
	}
	var prevRel, prevPos uint32
	for i := range x.len() {
		rel, pos := x.entry(i)
		if i > 0 && (rel <= prevRel || pos <= prevPos) {
			return errBadIndex
		}
		if int64(pos)+batch.HeaderSize > size {
			return fmt.Errorf("index entry %d points at %d past the data (%d bytes)", i, pos, size)
		}
		prevRel, prevPos = rel, pos
	}
	return nil
}

// timeIndex maps timestamps to offsets: entry i says that the largest
// timestamp in the segment up to and including the batch at relative offset
// rel is ts. Timestamps and offsets both strictly increase.
type timeIndex struct{ b []byte }

func (x *timeIndex) len() int { return len(x.b) / timeEntrySize }

func (x *timeIndex) entry(i int) (ts int64, rel uint32) {
	e := x.b[i*timeEntrySize:]
	return int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint32(e[8:])
}

func (x *timeIndex) last() (ts int64, rel uint32, ok bool) {
	n := x.len()
	if n == 0 {
		return -1, 0, false
	}
	ts, rel = x.entry(n - 1)
	return ts, rel, true
}

// maybeAdd appends (ts, rel) if ts is larger than the last entry's.
func (x *timeIndex) maybeAdd(ts int64, rel uint32) {
	if last, _, ok := x.last(); ok && ts <= last {
		return
	}
	if ts < 0 {
		return
	}
	x.b = binary.BigEndian.AppendUint64(x.b, uint64(ts))
	x.b = binary.BigEndian.AppendUint32(x.b, rel)
}

// lookupBefore returns the offset of the last entry whose timestamp is < ts.
// Every record before that offset has a timestamp < ts, so a search for the
// first record with timestamp >= ts can start at the batch holding it.
func (x *timeIndex) lookupBefore(ts int64) (rel uint32, ok bool) {
	n := x.len()
	i := sort.Search(n, func(i int) bool { t, _ := x.entry(i); return t >= ts })
	if i == 0 {
		return 0, false
	}
	_, rel = x.entry(i - 1)
	return rel, true
}

func (x *timeIndex) check() error {
	if len(x.b)%timeEntrySize != 0 {
		return fmt.Errorf("time index size %d not a multiple of %d", len(x.b), timeEntrySize)
	}
	var prevTS int64
	var prevRel uint32
	for i := range x.len() {
		ts, rel := x.entry(i)
		if ts < 0 || i > 0 && (ts <= prevTS || rel <= prevRel) {
			return errBadIndex
		}
		prevTS, prevRel = ts, rel
	}
	return nil
}
