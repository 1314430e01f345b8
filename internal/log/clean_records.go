package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/berthmq/berth/internal/batch"
)

// cleanRecord locates one record in a batch's (decompressed) record bytes.
type cleanRecord struct {
	start, end int    // the whole record, its length varint included
	offDelta   int64  // offsetDelta
	tsDelta    int64  // timestampDelta
	key        []byte // aliases the record bytes; nil with nullKey
	nullKey    bool
	tombstone  bool // null value
}

var errBadRecords = errors.New("malformed records")

// walkRecords parses the records of a batch whose header says count
// records and last offset delta lastDelta, appending them to out[:0]. It
// reads the fields compaction needs (offset and timestamp deltas, key,
// whether the value is null) and skips the headers by the record length. It
// fails unless the records are well formed, exactly count, with offset
// deltas strictly increasing within [0, lastDelta].
func walkRecords(p []byte, count int32, lastDelta int32, out []cleanRecord) ([]cleanRecord, error) {
	out = out[:0]
	prev := int64(-1)
	for pos := 0; pos < len(p); {
		length, n := binary.Varint(p[pos:])
		if n <= 0 || length < 1 || length > int64(len(p)-pos-n) {
			return nil, fmt.Errorf("%w: bad length at byte %d", errBadRecords, pos)
		}
		r := cleanRecord{start: pos, end: pos + n + int(length)}
		d := p[pos+n+1 : r.end] // after the attributes byte
		var k int
		if r.tsDelta, k = binary.Varint(d); k <= 0 {
			return nil, fmt.Errorf("%w: bad timestamp delta at byte %d", errBadRecords, pos)
		}
		d = d[k:]
		if r.offDelta, k = binary.Varint(d); k <= 0 || r.offDelta <= prev || r.offDelta > int64(lastDelta) {
			return nil, fmt.Errorf("%w: bad offset delta at byte %d", errBadRecords, pos)
		}
		d = d[k:]
		keyLen, k := binary.Varint(d)
		if k <= 0 || keyLen < -1 || keyLen > int64(len(d)-k) {
			return nil, fmt.Errorf("%w: bad key length at byte %d", errBadRecords, pos)
		}
		d = d[k:]
		if keyLen < 0 {
			r.nullKey = true
		} else {
			r.key, d = d[:keyLen:keyLen], d[keyLen:]
		}
		valLen, k := binary.Varint(d)
		if k <= 0 || valLen < -1 || valLen > int64(len(d)-k) {
			return nil, fmt.Errorf("%w: bad value length at byte %d", errBadRecords, pos)
		}
		r.tombstone = valLen < 0
		prev = r.offDelta
		out = append(out, r)
		pos = r.end
	}
	if len(out) != int(count) {
		return nil, fmt.Errorf("%w: header says %d records, found %d", errBadRecords, count, len(out))
	}
	return out, nil
}

// abortedSet tells aborted transactional batches from committed ones: the
// aborted transactions of the cleaned section, per producer, in marker
// order (from the transaction indexes). Every transactional batch the
// cleaner reads lies below the last stable offset, so its transaction has
// ended: a batch of producer P at offset o was aborted iff an entry of P
// has FirstOffset <= o < LastOffset (the ABORT marker), and committed
// otherwise. A producer's transactions never overlap.
type abortedSet map[int64][]AbortedTxn

func newAbortedSet(ts []AbortedTxn) abortedSet {
	if len(ts) == 0 {
		return nil
	}
	a := abortedSet{}
	for _, t := range ts {
		a[t.ProducerID] = append(a[t.ProducerID], t)
	}
	return a
}

// aborted reports whether the transactional batch of producerID at offset
// off was aborted.
func (a abortedSet) aborted(producerID, off int64) bool {
	ts := a[producerID]
	i := sort.Search(len(ts), func(i int) bool { return ts[i].LastOffset > off })
	return i < len(ts) && ts[i].FirstOffset <= off
}

// batchFilter rewrites batches for the cleaning pass: it drops records the
// offset map holds a later offset for, tombstones past their delete
// horizon and aborted transactional batches. One per Compact call.
type batchFilter struct {
	m         *offsetMap // nil: nothing superseded (a tombstones-only pass)
	aborted   abortedSet
	txns      map[int64]txnSeen // per producer: its current transaction's batches read this round
	snapOff   int64             // offset of the producer snapshot; markers at or past it stay
	dropped   []AbortedTxn      // ABORT markers removed from the current group: their index entries go
	rounds    []cleanRound
	now       int64
	end       int64 // offsets below were mapped by this round
	horizon   int64 // delete horizon of tombstones this round maps first
	codecs    *cleanCodecs
	recs      []cleanRecord
	raw, body []byte // decompressed records; the records that stay
	out       []byte // the rewritten batch

	removed, tombstones int64 // records dropped; of which tombstones past their horizon
	markers             int64 // control batches dropped
	nullKeys            int64 // records without a key, kept
	malformed           int64 // batches kept whole because their records did not parse
	due                 int64 // earliest horizon of a tombstone or removable marker kept; 0 none
}

// filter returns what replaces batch b (header h) in the cleaned segment:
// b itself when every record stays, a rewritten batch (valid until the next
// call), or nil when no record stays. keepEmpty keeps a batch with no
// records left as an empty batch: the cleaner does so for the last batch
// of every output segment, so the segment keeps its offset range.
//
// An aborted transactional batch goes whole (read_committed never showed
// it); a committed one is compacted like any other, keeping its header.
// A control batch stays untouched or goes whole (marker). Batches whose
// records do not parse or use an unknown codec pass untouched.
func (f *batchFilter) filter(h batch.Header, b []byte, keepEmpty bool) ([]byte, error) {
	if h.Control() {
		return f.marker(h, b, keepEmpty), nil
	}
	if !h.Transactional() {
		return f.records(h, b, keepEmpty)
	}
	// A transaction's batches keep its marker for one more round, so
	// the marker goes only once they are gone from the log.
	seen := f.txns[h.ProducerID]
	seen.read = true
	var nb []byte
	var err error
	if f.aborted.aborted(h.ProducerID, h.BaseOffset) {
		switch {
		case h.RecordCount == 0 && keepEmpty:
			nb = b
		case keepEmpty:
			f.removed += int64(h.RecordCount)
			nb = f.emptyBatch(b)
		default:
			f.removed += int64(max(h.RecordCount, 0))
		}
	} else if nb, err = f.records(h, b, keepEmpty); err != nil {
		return nil, err
	}
	seen.kept = seen.kept || nb != nil
	if f.txns == nil {
		f.txns = map[int64]txnSeen{}
	}
	f.txns[h.ProducerID] = seen
	return nb, nil
}

// txnSeen is what a round read of a producer's current transaction.
type txnSeen struct {
	read bool // one of its batches was read (as it was before the round)
	kept bool // one of them stays (possibly empty)
}

// Control record types (the key's second int16).
const (
	markerAbort  = 0
	markerCommit = 1
)

// marker decides the fate of a control batch, as Kafka's cleaner does: a
// COMMIT or ABORT marker may go once none of its transaction's batches is
// left in the log (this round read none: they went in an earlier round),
// and only after its delete horizon, counted like a tombstone's from the
// first round that mapped it. It also stays while it ends the group
// (keepEmpty: the output must end where the group did) and while it lies
// at or past the producer snapshot's offset: a restart replays the log
// from that snapshot, which may hold the transaction open, so it must meet
// the marker. A removed ABORT marker's transaction index entry goes with
// it (f.dropped).
func (f *batchFilter) marker(h batch.Header, b []byte, keepEmpty bool) []byte {
	seen := f.txns[h.ProducerID]
	delete(f.txns, h.ProducerID)
	typ, ok := f.markerType(h, b)
	if !ok || keepEmpty {
		return b
	}
	off := h.BaseOffset
	horizon, passed := horizonAt(f.rounds, off)
	if !passed {
		if off >= f.end {
			return b // not mapped yet: a later round sets its horizon
		}
		horizon = f.horizon
	}
	if seen.read {
		if !seen.kept && (f.due == 0 || horizon < f.due) {
			f.due = horizon // removable from the next round on
		}
		return b
	}
	if !passed || f.now < horizon || off >= f.snapOff {
		// Due again at the horizon; the snapshot moves on within the
		// owner's snapshot interval.
		if f.due == 0 || horizon < f.due {
			f.due = horizon
		}
		return b
	}
	if typ == markerAbort {
		f.dropped = append(f.dropped, AbortedTxn{ProducerID: h.ProducerID, LastOffset: off})
	}
	f.markers++
	return nil
}

// markerType returns the type of the control batch's one record: COMMIT
// or ABORT; ok is false for anything else (kept as it is).
func (f *batchFilter) markerType(h batch.Header, b []byte) (int16, bool) {
	if h.Codec() != 0 || h.RecordCount != 1 {
		return 0, false
	}
	recs, err := walkRecords(b[batch.HeaderSize:], h.RecordCount, h.LastOffsetDelta, f.recs)
	if err != nil {
		return 0, false
	}
	f.recs = recs
	if key := recs[0].key; len(key) >= 4 && binary.BigEndian.Uint16(key) == 0 {
		switch typ := int16(binary.BigEndian.Uint16(key[2:])); typ {
		case markerAbort, markerCommit:
			return typ, true
		}
	}
	return 0, false
}

// records filters the records of a data batch.
func (f *batchFilter) records(h batch.Header, b []byte, keepEmpty bool) ([]byte, error) {
	codec := h.Codec()
	raw := b[batch.HeaderSize:]
	if codec != 0 {
		var err error
		if f.raw, err = f.codecs.decompress(codec, raw, f.raw); err != nil {
			f.malformed++
			return b, nil
		}
		raw = f.raw
	}
	recs, err := walkRecords(raw, h.RecordCount, h.LastOffsetDelta, f.recs)
	if err != nil {
		f.malformed++
		return b, nil
	}
	f.recs = recs
	if len(recs) == 0 {
		// Left by an earlier clean as the last batch of a segment; no
		// longer needed unless it still ends one.
		if keepEmpty {
			return b, nil
		}
		return nil, nil
	}
	f.body = f.body[:0]
	kept, maxTS := 0, int64(-1)
	for _, r := range recs {
		if !f.keep(h, r) {
			continue
		}
		kept++
		f.body = append(f.body, raw[r.start:r.end]...)
		maxTS = max(maxTS, h.BaseTimestamp+r.tsDelta)
	}
	switch {
	case kept == len(recs):
		return b, nil
	case kept == 0 && !keepEmpty:
		return nil, nil
	case kept == 0:
		return f.emptyBatch(b), nil
	}
	body := f.body
	if codec != 0 {
		if body, err = f.codecs.compress(codec, bytes.HasPrefix(b[batch.HeaderSize:], xerialMagic), f.body); err != nil {
			return nil, fmt.Errorf("log: recompress batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	f.out = append(append(f.out[:0], b[:batch.HeaderSize]...), body...)
	binary.BigEndian.PutUint32(f.out[offLength:], uint32(len(f.out)-batchOverhead))
	binary.BigEndian.PutUint32(f.out[offRecordCount:], uint32(kept))
	if h.Attributes&batch.AttrLogAppendTime == 0 {
		binary.BigEndian.PutUint64(f.out[offMaxTimestamp:], uint64(maxTS))
	}
	binary.BigEndian.PutUint32(f.out[offCRC:], crc32.Checksum(f.out[offAttributes:], castagnoli))
	return f.out, nil
}

// keep decides one record's fate.
func (f *batchFilter) keep(h batch.Header, r cleanRecord) bool {
	if r.nullKey {
		f.nullKeys++
		return true
	}
	off := h.BaseOffset + r.offDelta
	if f.m != nil {
		if latest, ok := f.m.get(f.m.hash(r.key)); ok && latest > off {
			f.removed++
			return false
		}
	}
	if !r.tombstone {
		return true
	}
	horizon, passed := horizonAt(f.rounds, off)
	if passed && f.now >= horizon {
		f.removed++
		f.tombstones++
		return false
	}
	if !passed {
		if off >= f.end {
			return true // not mapped yet: a later round sets its horizon
		}
		horizon = f.horizon
	}
	if f.due == 0 || horizon < f.due {
		f.due = horizon
	}
	return true
}

// emptyBatch is b with its records removed, as Kafka writes a batch it
// keeps for its offsets and producer fields: uncompressed, recordCount 0,
// every other header field (offsets, timestamps, producer id, epoch and
// sequence) as it was.
func (f *batchFilter) emptyBatch(b []byte) []byte {
	f.out = append(f.out[:0], b[:batch.HeaderSize]...)
	binary.BigEndian.PutUint32(f.out[offLength:], uint32(minBatchLength))
	attrs := binary.BigEndian.Uint16(f.out[offAttributes:]) &^ batch.AttrCompressionMask
	binary.BigEndian.PutUint16(f.out[offAttributes:], attrs)
	binary.BigEndian.PutUint32(f.out[offRecordCount:], 0)
	binary.BigEndian.PutUint32(f.out[offCRC:], crc32.Checksum(f.out[offAttributes:], castagnoli))
	return f.out
}

// mapBatch adds the keys of batch b (header h) at or after from to m. It
// reports false, adding nothing, when they might not fit. Control batches,
// aborted transactional batches and unparsable batches add nothing: their
// records never supersede others. A committed transactional batch maps
// like any other.
func (f *batchFilter) mapBatch(m *offsetMap, h batch.Header, b []byte, from int64, hashes []keyHash, offs []int64) (bool, []keyHash, []int64) {
	hashes, offs = hashes[:0], offs[:0]
	if h.Control() || h.Transactional() && f.aborted.aborted(h.ProducerID, h.BaseOffset) {
		return true, hashes, offs
	}
	raw := b[batch.HeaderSize:]
	if codec := h.Codec(); codec != 0 {
		var err error
		if f.raw, err = f.codecs.decompress(codec, raw, f.raw); err != nil {
			f.malformed++
			return true, hashes, offs
		}
		raw = f.raw
	}
	recs, err := walkRecords(raw, h.RecordCount, h.LastOffsetDelta, f.recs)
	if err != nil {
		f.malformed++
		return true, hashes, offs
	}
	f.recs = recs
	fresh := 0
	for _, r := range recs {
		off := h.BaseOffset + r.offDelta
		if r.nullKey || off < from {
			continue
		}
		kh := m.hash(r.key)
		if !m.has(kh) {
			fresh++ // keys repeated within the batch count twice: safe
		}
		hashes, offs = append(hashes, kh), append(offs, off)
	}
	if fresh > m.room() {
		return false, hashes, offs
	}
	for i, kh := range hashes {
		m.put(kh, offs[i])
	}
	return true, hashes, offs
}
