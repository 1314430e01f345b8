package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// KV is one record for Build; a nil Value is a tombstone.
type KV struct {
	Key, Value []byte
}

// Build encodes records as one uncompressed v2 batch (no producer id,
// CreateTime ts for every record), the way the broker writes its own
// records (__consumer_offsets).
func Build(recs []KV, ts int64) []byte {
	out := make([]byte, HeaderSize, HeaderSize+len(recs)*32)
	binary.BigEndian.PutUint64(out[0:], 0)                    // base offset: assigned on append
	binary.BigEndian.PutUint32(out[12:], 0xffffffff)          // leader epoch: assigned on append
	out[16] = 2                                               // magic
	binary.BigEndian.PutUint16(out[21:], 0)                   // attributes
	binary.BigEndian.PutUint32(out[23:], uint32(len(recs)-1)) // last offset delta
	binary.BigEndian.PutUint64(out[27:], uint64(ts))
	binary.BigEndian.PutUint64(out[35:], uint64(ts))
	binary.BigEndian.PutUint64(out[43:], 0xffffffffffffffff) // producer id -1
	binary.BigEndian.PutUint16(out[51:], 0xffff)             // producer epoch -1
	binary.BigEndian.PutUint32(out[53:], 0xffffffff)         // base sequence -1
	binary.BigEndian.PutUint32(out[57:], uint32(len(recs)))
	var body []byte
	for i, r := range recs {
		body = body[:0]
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = appendVarBytes(body, r.Key)
		body = appendVarBytes(body, r.Value)
		body = binary.AppendVarint(body, 0) // headers
		out = binary.AppendVarint(out, int64(len(body)))
		out = append(out, body...)
	}
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crcTable))
	return out
}

func appendVarBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// Control record types (the int16 after the version in a control record's
// key), as in Kafka's ControlRecordType.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// BuildControl encodes a transaction marker as Kafka writes it: one
// uncompressed batch with the transactional and control bits, the
// producer's id and epoch, base sequence -1, and one record whose key is
// version 0 and the type (ControlAbort or ControlCommit) and whose value is
// version 0 and the coordinator's epoch.
func BuildControl(producerID int64, epoch int16, typ int16, coordinatorEpoch int32, ts int64) []byte {
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(coordinatorEpoch))
	out := Build([]KV{{Key: key, Value: val}}, ts)
	binary.BigEndian.PutUint16(out[21:], AttrTransactional|AttrControl)
	binary.BigEndian.PutUint64(out[43:], uint64(producerID))
	binary.BigEndian.PutUint16(out[51:], uint16(epoch))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crcTable))
	return out
}

// ControlType returns the type of the control batch b (its first record's
// key: version int16, type int16), or an error when b is not a control
// batch or its key is malformed.
func ControlType(b []byte) (int16, error) {
	r, err := controlRecord(b)
	if err != nil {
		return 0, err
	}
	return controlKeyType(r.Key)
}

// Marker is what a transaction marker (a COMMIT or ABORT control batch)
// says: its type and the epoch of the transaction coordinator that wrote
// it (Kafka's EndTransactionMarker).
type Marker struct {
	Type             int16
	CoordinatorEpoch int32
}

// ParseMarker reads the transaction marker in control batch b: the type
// from its first record's key (version int16, type int16) and the
// coordinator epoch from its value (version int16, coordinator epoch
// int32). It returns an error when b is not a control batch or the key or
// value is malformed, as Kafka refuses a marker whose value is short.
func ParseMarker(b []byte) (Marker, error) {
	r, err := controlRecord(b)
	if err != nil {
		return Marker{}, err
	}
	typ, err := controlKeyType(r.Key)
	if err != nil {
		return Marker{}, err
	}
	if len(r.Value) < 6 {
		return Marker{}, fmt.Errorf("%w: transaction marker value of %d bytes", ErrInvalidRecord, len(r.Value))
	}
	if v := int16(binary.BigEndian.Uint16(r.Value)); v < 0 {
		return Marker{}, fmt.Errorf("%w: transaction marker value version %d", ErrInvalidRecord, v)
	}
	return Marker{Type: typ, CoordinatorEpoch: int32(binary.BigEndian.Uint32(r.Value[2:]))}, nil
}

// controlRecord returns the first record of control batch b.
func controlRecord(b []byte) (Record, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Record{}, err
	}
	if !h.Control() {
		return Record{}, fmt.Errorf("%w: not a control batch", ErrInvalidRecord)
	}
	if h.Size() > len(b) {
		return Record{}, fmt.Errorf("%w: truncated batch", ErrCorrupt)
	}
	recs := b[HeaderSize:h.Size()]
	if h.Codec() != CodecNone {
		return Record{}, fmt.Errorf("%w: compressed control batch", ErrInvalidRecord)
	}
	r, _, err := parseRecord(recs, false)
	return r, err
}

func controlKeyType(key []byte) (int16, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("%w: control record key of %d bytes", ErrInvalidRecord, len(key))
	}
	return int16(binary.BigEndian.Uint16(key[2:])), nil
}
