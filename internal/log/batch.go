package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/berthmq/berth/internal/batch"
)

// Record batch (magic v2) header layout, big endian. See docs/format/log.md.
const (
	offBaseOffset      = 0  // int64
	offLength          = 8  // int32: bytes after this field
	offLeaderEpoch     = 12 // int32
	offMagic           = 16 // int8
	offCRC             = 17 // uint32, CRC-32C over [21:end]
	offAttributes      = 21 // int16
	offLastOffsetDelta = 23 // int32
	offBaseTimestamp   = 27 // int64
	offMaxTimestamp    = 35 // int64
	offProducerID      = 43 // int64
	offProducerEpoch   = 51 // int16
	offBaseSequence    = 53 // int32
	offRecordCount     = 57 // int32

	// batchOverhead is the part of the header not counted by Length.
	batchOverhead = 12
	// minBatchLength is the smallest Length field of a v2 batch (no records).
	minBatchLength = batch.HeaderSize - batchOverhead
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ParseBatchHeader parses the first batch.HeaderSize bytes of b. It checks the
// magic byte and that Length and LastOffsetDelta are sane, not that b holds
// the whole batch nor the CRC (see CheckBatch). Errors wrap ErrInvalidBatch.
func ParseBatchHeader(b []byte) (batch.Header, error) {
	if len(b) < batch.HeaderSize {
		return batch.Header{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrInvalidBatch, len(b), batch.HeaderSize)
	}
	// The same layout as produce validation decodes (batch.DecodeHeader);
	// the log adds its own sanity checks.
	h := batch.DecodeHeader(b)
	if err := checkHeader(h); err != nil {
		return h, err
	}
	return h, nil
}

func checkHeader(h batch.Header) error {
	switch {
	case h.Magic != 2:
		return fmt.Errorf("%w: magic %d, want 2", ErrInvalidBatch, h.Magic)
	case h.Length < minBatchLength:
		return fmt.Errorf("%w: length %d below %d", ErrInvalidBatch, h.Length, minBatchLength)
	case h.LastOffsetDelta < 0:
		return fmt.Errorf("%w: negative lastOffsetDelta %d", ErrInvalidBatch, h.LastOffsetDelta)
	case h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta):
		return fmt.Errorf("%w: base offset %d out of range", ErrInvalidBatch, h.BaseOffset)
	}
	return nil
}

// CheckBatch validates one whole batch: header sanity, len(b) equal to its
// size, and the CRC-32C. Errors wrap ErrInvalidBatch.
func CheckBatch(b []byte) (batch.Header, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, fmt.Errorf("%w: size %d, have %d bytes", ErrInvalidBatch, h.Size(), len(b))
	}
	if c := crc32.Checksum(b[offAttributes:], castagnoli); c != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrInvalidBatch, h.CRC, c)
	}
	return h, nil
}

// peek* read single header fields the append path needs without building a
// whole batch.Header.
func peekSize(b []byte) int64 {
	return batchOverhead + int64(int32(binary.BigEndian.Uint32(b[offLength:])))
}

func peekBase(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }

func peekLastDelta(b []byte) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])))
}

func peekMaxTimestamp(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])) }

func peekEpoch(b []byte) int32 { return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])) }

// firstRecordAtOrAfter returns the offset and timestamp of the first record of
// batch b (a whole batch) whose timestamp is >= ts and offset >= minOff. ok
// is false if the batch is compressed, the records cannot be parsed or none
// qualifies.
func firstRecordAtOrAfter(h batch.Header, b []byte, ts, minOff int64) (off, rts int64, ok bool) {
	if h.Attributes&batch.AttrLogAppendTime != 0 {
		// Every record carries the batch's MaxTimestamp.
		if h.MaxTimestamp >= ts && minOff <= h.LastOffset() {
			return max(h.BaseOffset, minOff), h.MaxTimestamp, true
		}
		return 0, 0, false
	}
	if h.Codec() != 0 {
		return 0, 0, false
	}
	p := b[batch.HeaderSize:]
	for i := int32(0); i < h.RecordCount && len(p) > 0; i++ {
		n, k := binary.Varint(p)
		if k <= 0 || n < 0 || int64(len(p)-k) < n {
			return 0, 0, false
		}
		rec := p[k : k+int(n)]
		p = p[k+int(n):]
		if len(rec) < 1 {
			return 0, 0, false
		}
		rec = rec[1:] // attributes
		tsDelta, k1 := binary.Varint(rec)
		if k1 <= 0 {
			return 0, 0, false
		}
		offDelta, k2 := binary.Varint(rec[k1:])
		if k2 <= 0 {
			return 0, 0, false
		}
		if t, o := h.BaseTimestamp+tsDelta, h.BaseOffset+offDelta; t >= ts && o >= minOff {
			return o, t, true
		}
	}
	return 0, 0, false
}
