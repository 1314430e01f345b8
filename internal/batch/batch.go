// Package batch parses and validates Kafka record batches (magic v2) as a
// producer sends them. The broker stores batches byte for byte; this package
// only checks them (lengths, magic, CRC-32C, record count, offset deltas,
// timestamps) and, for LogAppendTime topics, restamps the header.
//
// Batch header, big endian:
//
//	baseOffset int64 @0, batchLength int32 @8, partitionLeaderEpoch int32 @12,
//	magic int8 @16, crc uint32 @17 (CRC-32C of bytes [21:]), attributes int16 @21,
//	lastOffsetDelta int32 @23, baseTimestamp int64 @27, maxTimestamp int64 @35,
//	producerId int64 @43, producerEpoch int16 @51, baseSequence int32 @53,
//	recordCount int32 @57, records @61.
package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the size of a v2 batch header.
const HeaderSize = 61

// Attribute bits.
const (
	AttrCompressionMask = 0x07
	AttrLogAppendTime   = 0x08
	AttrTransactional   = 0x10
	AttrControl         = 0x20
)

// Compression codecs, as in the attributes' low three bits.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// Sentinel errors; the handler maps each to its Kafka error code.
var (
	ErrCorrupt          = errors.New("batch: corrupt message")                 // CORRUPT_MESSAGE
	ErrUnsupportedMagic = errors.New("batch: unsupported message format")      // UNSUPPORTED_FOR_MESSAGE_FORMAT
	ErrInvalidRecord    = errors.New("batch: invalid record")                  // INVALID_RECORD
	ErrTooLarge         = errors.New("batch: larger than max.message.bytes")   // MESSAGE_TOO_LARGE
	ErrInvalidTimestamp = errors.New("batch: timestamp out of accepted range") // INVALID_TIMESTAMP
	ErrUnsupportedCodec = errors.New("batch: unsupported compression codec")   // UNSUPPORTED_COMPRESSION_TYPE
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Header is a parsed v2 batch header: of a batch a producer sent (Validate,
// ParseHeader) and of one the partition log stores (log.ParseBatchHeader,
// log.CheckBatch, log.Log.ScanBatches).
type Header struct {
	BaseOffset      int64
	Length          int32 // bytes after the Length field; Size() = 12 + Length
	LeaderEpoch     int32 // partitionLeaderEpoch
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// Size is the number of bytes the batch takes, header included.
func (h *Header) Size() int { return 12 + int(h.Length) }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the compression codec.
func (h *Header) Codec() int { return int(h.Attributes & AttrCompressionMask) }

// Transactional reports the transactional bit.
func (h *Header) Transactional() bool { return h.Attributes&AttrTransactional != 0 }

// Control reports the control-batch bit.
func (h *Header) Control() bool { return h.Attributes&AttrControl != 0 }

// Idempotent reports whether the batch carries a producer id.
func (h *Header) Idempotent() bool { return h.ProducerID >= 0 }

// LastSequence is the sequence of the batch's last record.
func (h *Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (1 << 31))
}

// DecodeHeader decodes the fields of the header at the start of b, which
// must hold at least HeaderSize bytes, without checking any of them.
func DecodeHeader(b []byte) Header {
	return Header{
		BaseOffset:      int64(binary.BigEndian.Uint64(b[0:])),
		Length:          int32(binary.BigEndian.Uint32(b[8:])),
		LeaderEpoch:     int32(binary.BigEndian.Uint32(b[12:])),
		Magic:           int8(b[16]),
		CRC:             binary.BigEndian.Uint32(b[17:]),
		Attributes:      int16(binary.BigEndian.Uint16(b[21:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(b[23:])),
		BaseTimestamp:   int64(binary.BigEndian.Uint64(b[27:])),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(b[35:])),
		ProducerID:      int64(binary.BigEndian.Uint64(b[43:])),
		ProducerEpoch:   int16(binary.BigEndian.Uint16(b[51:])),
		BaseSequence:    int32(binary.BigEndian.Uint32(b[53:])),
		RecordCount:     int32(binary.BigEndian.Uint32(b[57:])),
	}
}

// ParseHeader reads a header from the start of b without checking the CRC.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < 17 {
		return Header{}, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorrupt, len(b))
	}
	h := Header{
		BaseOffset:  int64(binary.BigEndian.Uint64(b[0:])),
		Length:      int32(binary.BigEndian.Uint32(b[8:])),
		LeaderEpoch: int32(binary.BigEndian.Uint32(b[12:])),
		Magic:       int8(b[16]),
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d (only v2 record batches are accepted)", ErrUnsupportedMagic, h.Magic)
	}
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorrupt, len(b))
	}
	h = DecodeHeader(b)
	if h.Length < HeaderSize-12 {
		return h, fmt.Errorf("%w: batch length %d is below the header size", ErrCorrupt, h.Length)
	}
	return h, nil
}

// Limits are the topic settings a produced batch is checked against.
type Limits struct {
	MaxBatchBytes int   // max.message.bytes
	LogAppendTime bool  // message.timestamp.type=LogAppendTime
	Now           int64 // milliseconds since the epoch
	BeforeMaxMs   int64 // message.timestamp.before.max.ms
	AfterMaxMs    int64 // message.timestamp.after.max.ms
	// RequireKeys refuses records without a key (compacted topics).
	RequireKeys bool
}

// Validated describes the batches of one partition's produce data.
type Validated struct {
	Batches      []Header
	Records      int
	MaxTimestamp int64
}

// Validate checks every batch in data, which must be one or more whole v2
// batches back to back. With LogAppendTime it restamps each batch's
// maxTimestamp in place and recomputes its CRC. It returns the parsed
// headers; the caller assigns offsets.
func Validate(data []byte, lim Limits, scratch *Scratch) (Validated, error) {
	var v Validated
	v.MaxTimestamp = -1
	if len(data) == 0 {
		return v, fmt.Errorf("%w: no record batch", ErrInvalidRecord)
	}
	for off := 0; off < len(data); {
		h, err := ParseHeader(data[off:])
		if err != nil {
			return v, err
		}
		size := h.Size()
		if size > len(data)-off {
			return v, fmt.Errorf("%w: batch length %d exceeds the %d bytes sent", ErrCorrupt, h.Length, len(data)-off)
		}
		if lim.MaxBatchBytes > 0 && size > lim.MaxBatchBytes {
			return v, fmt.Errorf("%w: batch of %d bytes, limit %d", ErrTooLarge, size, lim.MaxBatchBytes)
		}
		b := data[off : off+size]
		if crc32.Checksum(b[21:], crcTable) != h.CRC {
			return v, fmt.Errorf("%w: CRC mismatch", ErrCorrupt)
		}
		if h.Control() {
			return v, fmt.Errorf("%w: producers may not send control batches", ErrInvalidRecord)
		}
		if h.RecordCount <= 0 || h.LastOffsetDelta != h.RecordCount-1 {
			return v, fmt.Errorf("%w: record count %d with last offset delta %d", ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
		}
		if err := checkRecords(b, &h, lim, scratch); err != nil {
			return v, err
		}
		if lim.LogAppendTime {
			binary.BigEndian.PutUint16(b[21:], uint16(h.Attributes|AttrLogAppendTime))
			binary.BigEndian.PutUint64(b[35:], uint64(lim.Now))
			h.CRC = crc32.Checksum(b[21:], crcTable)
			binary.BigEndian.PutUint32(b[17:], h.CRC)
			h.Attributes |= AttrLogAppendTime
			h.MaxTimestamp = lim.Now
		}
		if h.MaxTimestamp > v.MaxTimestamp {
			v.MaxTimestamp = h.MaxTimestamp
		}
		v.Records += int(h.RecordCount)
		v.Batches = append(v.Batches, h)
		off += size
	}
	return v, nil
}

// checkRecords walks the records of one batch, decompressing when needed,
// and checks count, offset deltas and (CreateTime) timestamps.
func checkRecords(b []byte, h *Header, lim Limits, scratch *Scratch) error {
	recs := b[HeaderSize:]
	if codec := h.Codec(); codec != CodecNone {
		var err error
		recs, err = scratch.decompress(codec, recs)
		if err != nil {
			return err
		}
	}
	checkTS := !lim.LogAppendTime && (lim.BeforeMaxMs >= 0 || lim.AfterMaxMs >= 0) && lim.Now > 0
	var maxTS int64 = -1
	n := int32(0)
	for len(recs) > 0 {
		r, rest, err := parseRecord(recs, false)
		if err != nil {
			return err
		}
		recs = rest
		if lim.RequireKeys && r.Key == nil {
			return fmt.Errorf("%w: record %d has no key; a compacted topic keeps the latest record per key, so every record needs one", ErrInvalidRecord, n)
		}
		if r.OffsetDelta != int64(n) {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalidRecord, n, r.OffsetDelta)
		}
		ts := h.BaseTimestamp + r.TimestampDelta
		if ts > maxTS {
			maxTS = ts
		}
		if checkTS && ts >= 0 {
			if lim.BeforeMaxMs >= 0 && ts < lim.Now-lim.BeforeMaxMs && lim.Now-lim.BeforeMaxMs <= lim.Now {
				return fmt.Errorf("%w: record timestamp %d is older than message.timestamp.before.max.ms", ErrInvalidTimestamp, ts)
			}
			if lim.AfterMaxMs >= 0 && ts > lim.Now+lim.AfterMaxMs && lim.Now+lim.AfterMaxMs >= lim.Now {
				return fmt.Errorf("%w: record timestamp %d is later than message.timestamp.after.max.ms", ErrInvalidTimestamp, ts)
			}
		}
		n++
		if n > h.RecordCount {
			break
		}
	}
	if n != h.RecordCount {
		return fmt.Errorf("%w: header says %d records, found %d", ErrInvalidRecord, h.RecordCount, n)
	}
	if len(recs) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrInvalidRecord, len(recs))
	}
	_ = maxTS
	return nil
}

// Record is one parsed record; slices alias the batch.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int64
	Key            []byte // nil for a null key
	Value          []byte // nil for a null value (tombstone)
	Headers        []RecordHeader
}

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// parseRecord parses one record from the front of b, keeping its headers
// when withHeaders is set.
func parseRecord(b []byte, withHeaders bool) (Record, []byte, error) {
	var r Record
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || int64(len(b)-n) < length {
		return r, nil, fmt.Errorf("%w: bad record length", ErrInvalidRecord)
	}
	body := b[n : n+int(length)]
	rest := b[n+int(length):]
	d := decoder{b: body}
	r.Attributes = int8(d.byte())
	r.TimestampDelta = d.varint()
	r.OffsetDelta = d.varint()
	r.Key = d.bytes()
	r.Value = d.bytes()
	nh := d.varint()
	if nh < 0 || nh > int64(len(body)) {
		return r, nil, fmt.Errorf("%w: bad header count %d", ErrInvalidRecord, nh)
	}
	for i := int64(0); i < nh && !d.err; i++ {
		kl := d.varint()
		if kl < 0 {
			d.fail()
		}
		k := d.b[:min(max(kl, 0), int64(len(d.b)))]
		d.skip(kl)
		v := d.bytes()
		if withHeaders && !d.err {
			r.Headers = append(r.Headers, RecordHeader{Key: string(k), Value: v})
		}
	}
	if d.err || len(d.b) != 0 {
		return r, nil, fmt.Errorf("%w: malformed record", ErrInvalidRecord)
	}
	return r, rest, nil
}

// Records parses every record of one batch (decompressing as needed).
// Returned slices alias b or the scratch buffer.
func Records(b []byte, scratch *Scratch) ([]Record, Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, h, err
	}
	if h.Size() > len(b) {
		return nil, h, fmt.Errorf("%w: truncated batch", ErrCorrupt)
	}
	recs := b[HeaderSize:h.Size()]
	if h.Codec() != CodecNone {
		if recs, err = scratch.decompress(h.Codec(), recs); err != nil {
			return nil, h, err
		}
	}
	var out []Record
	for len(recs) > 0 {
		var r Record
		if r, recs, err = parseRecord(recs, true); err != nil {
			return nil, h, err
		}
		out = append(out, r)
	}
	return out, h, nil
}

type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) fail() { d.err = true; d.b = nil }

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) skip(n int64) {
	if n < 0 || n > int64(len(d.b)) {
		d.fail()
		return
	}
	d.b = d.b[n:]
}

func (d *decoder) bytes() []byte {
	n := d.varint()
	if d.err || n < 0 {
		if n < -1 {
			d.fail()
		}
		return nil
	}
	if n > int64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// Visit calls fn for every record of every batch of b (a request's
// record set: whole batches, control ones included), in order, without
// collecting them: fn returns false to stop. Records alias b or scratch.
func Visit(b []byte, scratch *Scratch, fn func(h *Header, r *Record) bool) error {
	for len(b) > 0 {
		h, err := ParseHeader(b)
		if err != nil {
			return err
		}
		if h.Size() > len(b) {
			return fmt.Errorf("%w: truncated batch", ErrCorrupt)
		}
		recs := b[HeaderSize:h.Size()]
		if h.Codec() != CodecNone {
			if recs, err = scratch.decompress(h.Codec(), recs); err != nil {
				return err
			}
		}
		for len(recs) > 0 {
			var r Record
			if r, recs, err = parseRecord(recs, true); err != nil {
				return err
			}
			if !fn(&h, &r) {
				return nil
			}
		}
		b = b[h.Size():]
	}
	return nil
}

// Each calls fn for every record of the data batches of b (a log's or a
// fetch response's record set) at offset from or later, in order, and
// returns the offset after the last whole batch (from when there is
// none). Control batches are skipped; a truncated batch at the end (a
// fetch cut at its byte limit) ends the walk without an error. The
// record's slices alias b or scratch: copy what is kept.
func Each(b []byte, from int64, scratch *Scratch, fn func(offset int64, r Record)) (next int64, err error) {
	next = from
	for len(b) > 0 {
		h, err := ParseHeader(b)
		if err != nil {
			if len(b) < HeaderSize {
				return next, nil // truncated header
			}
			return next, fmt.Errorf("offset %d: %w", next, err)
		}
		if h.Size() > len(b) {
			return next, nil
		}
		if h.LastOffset() >= from && h.Attributes&AttrControl == 0 {
			recs, _, err := Records(b[:h.Size()], scratch)
			if err != nil {
				return next, fmt.Errorf("offset %d: %w", h.BaseOffset, err)
			}
			for _, r := range recs {
				if off := h.BaseOffset + r.OffsetDelta; off >= from {
					fn(off, r)
				}
			}
		}
		next = max(next, h.LastOffset()+1)
		b = b[h.Size():]
	}
	return next, nil
}
