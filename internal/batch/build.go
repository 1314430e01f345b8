package batch

import (
	"encoding/binary"
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
