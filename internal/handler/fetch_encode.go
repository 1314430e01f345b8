package handler

import (
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchResponse wraps a FetchResponse so the server can write it with
// writev: the record batches (tens of MiB on a catch-up read) go to the
// socket straight from the buffers they were read into, instead of being
// copied into one encoded response first. The encoding is byte for byte
// kmsg's (fetch_encode_test.go checks every version against it); it
// supports what the broker sets and falls back to kmsg otherwise.
type fetchResponse struct {
	*kmsg.FetchResponse
}

// minVectorBytes is the record-batch size above which a batch is sent as
// its own writev element rather than copied.
const minVectorBytes = 16 << 10

// AppendVector implements server.Vectored. It returns the encoded
// response as buffers whose concatenation is what AppendTo would produce,
// starting with hdr (the frame header the server has already written).
func (r fetchResponse) AppendVector(hdr []byte) (net.Buffers, bool) {
	v := r.FetchResponse
	if v.Version < 4 || v.UnknownTags.Len() > 0 || len(v.Brokers) > 0 {
		return nil, false
	}
	ver := v.Version
	flex := ver >= 12
	out := make(net.Buffers, 0, 3)
	dst := hdr
	if ver >= 1 {
		dst = binary.BigEndian.AppendUint32(dst, uint32(v.ThrottleMillis))
	}
	if ver >= 7 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(v.ErrorCode))
		dst = binary.BigEndian.AppendUint32(dst, uint32(v.SessionID))
	}
	dst = appendArrayLen(dst, len(v.Topics), flex)
	for i := range v.Topics {
		t := &v.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return nil, false
		}
		if ver <= 12 {
			dst = appendString(dst, t.Topic, flex)
		} else {
			dst = append(dst, t.TopicID[:]...)
		}
		dst = appendArrayLen(dst, len(t.Partitions), flex)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.UnknownTags.Len() > 0 || p.DivergingEpoch.UnknownTags.Len() > 0 ||
				p.CurrentLeader.UnknownTags.Len() > 0 || p.SnapshotID.UnknownTags.Len() > 0 {
				return nil, false
			}
			dst = binary.BigEndian.AppendUint32(dst, uint32(p.Partition))
			dst = binary.BigEndian.AppendUint16(dst, uint16(p.ErrorCode))
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.HighWatermark))
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.LastStableOffset))
			if ver >= 5 {
				dst = binary.BigEndian.AppendUint64(dst, uint64(p.LogStartOffset))
			}
			if p.AbortedTransactions == nil {
				if flex {
					dst = append(dst, 0)
				} else {
					dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)
				}
			} else {
				dst = appendArrayLen(dst, len(p.AbortedTransactions), flex)
				for k := range p.AbortedTransactions {
					a := &p.AbortedTransactions[k]
					if a.UnknownTags.Len() > 0 {
						return nil, false
					}
					dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
					dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
					if flex {
						dst = append(dst, 0)
					}
				}
			}
			if ver >= 11 {
				dst = binary.BigEndian.AppendUint32(dst, uint32(p.PreferredReadReplica))
			}
			rb := p.RecordBatches
			switch {
			case rb == nil && flex:
				dst = append(dst, 0)
			case rb == nil:
				dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)
			case flex:
				dst = binary.AppendUvarint(dst, uint64(len(rb))+1)
			default:
				dst = binary.BigEndian.AppendUint32(dst, uint32(len(rb)))
			}
			if len(rb) >= minVectorBytes {
				out = append(out, dst, rb)
				dst = make([]byte, 0, 256)
			} else {
				dst = append(dst, rb...)
			}
			if flex {
				dst = appendPartitionTags(dst, p)
			}
		}
		if flex {
			dst = append(dst, 0)
		}
	}
	if flex {
		dst = append(dst, 0)
	}
	return append(out, dst), true
}

func appendPartitionTags(dst []byte, p *kmsg.FetchResponseTopicPartition) []byte {
	de := p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1
	cl := p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1
	sn := p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1
	n := 0
	for _, b := range []bool{de, cl, sn} {
		if b {
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	if de { // tag 0: int32 epoch, int64 end offset, empty tags
		dst = append(dst, 0, 13)
		dst = binary.BigEndian.AppendUint32(dst, uint32(p.DivergingEpoch.Epoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.DivergingEpoch.EndOffset))
		dst = append(dst, 0)
	}
	if cl { // tag 1: int32 leader id, int32 leader epoch, empty tags
		dst = append(dst, 1, 9)
		dst = binary.BigEndian.AppendUint32(dst, uint32(p.CurrentLeader.LeaderID))
		dst = binary.BigEndian.AppendUint32(dst, uint32(p.CurrentLeader.LeaderEpoch))
		dst = append(dst, 0)
	}
	if sn { // tag 2: int64 end offset, int32 epoch, empty tags
		dst = append(dst, 2, 13)
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.SnapshotID.EndOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(p.SnapshotID.Epoch))
		dst = append(dst, 0)
	}
	return dst
}

func appendArrayLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

func appendString(dst []byte, s string, flex bool) []byte {
	if flex {
		dst = binary.AppendUvarint(dst, uint64(len(s))+1)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	}
	return append(dst, s...)
}
