package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsgBatch encodes a batch the way franz-go's producer does, with keys and
// headers, so the log is checked against an independent encoder.
func kmsgBatch(n int, baseTS int64) []byte {
	var records []byte
	for i := range n {
		r := kmsg.Record{
			TimestampDelta64: int64(i * 10),
			OffsetDelta:      int32(i),
			Key:              fmt.Appendf(nil, "key-%d", i),
			Value:            fmt.Appendf(nil, "value-%d", i),
			Headers:          []kmsg.Header{{Key: "h", Value: []byte("v")}},
		}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1) // the zero Length took one byte
		records = r.AppendTo(records)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       baseTS,
		MaxTimestamp:         baseTS + int64((n-1)*10),
		ProducerID:           42,
		ProducerEpoch:        3,
		FirstSequence:        7,
		NumRecords:           int32(n),
		Records:              records,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-batchOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

func TestKmsgInterop(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig(), Options{})
	appendT(t, l, kmsgBatch(2, 500), 0)
	appendT(t, l, kmsgBatch(5, 1000), 6)
	data, err := l.Read(3, 1<<20, 1<<62, true)
	if err != nil {
		t.Fatal(err)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(data); err != nil {
		t.Fatal(err)
	}
	if rb.FirstOffset != 2 || rb.PartitionLeaderEpoch != 6 || rb.ProducerID != 42 || rb.NumRecords != 5 ||
		int(rb.Length) != len(data)-batchOverhead {
		t.Fatalf("kmsg sees %+v", rb)
	}
	if uint32(rb.CRC) != crc32.Checksum(data[offAttributes:], castagnoli) {
		t.Fatal("CRC no longer matches")
	}
	h, err := CheckBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	if h.ProducerEpoch != 3 || h.BaseSequence != 7 || h.BaseTimestamp != 1000 || h.MaxTimestamp != 1040 {
		t.Fatalf("%+v", h)
	}
	var r kmsg.Record
	if err := r.ReadFrom(rb.Records); err != nil || string(r.Value) != "value-0" {
		t.Fatalf("record: %v %q", err, r.Value)
	}
	// Record-level timestamp lookup parses kmsg's encoding.
	if off, ts, found, err := l.OffsetForTimestamp(1015); err != nil || !found || off != 4 || ts != 1020 {
		t.Fatalf("OffsetForTimestamp: %d %d %v %v", off, ts, found, err)
	}
	if ts, off := l.MaxTimestamp(); ts != 1040 || off != 6 {
		t.Fatalf("MaxTimestamp: %d %d", ts, off)
	}
}

func TestOffsetForTimestampCompressed(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig(), Options{})
	appendT(t, l, mkBatch(rec{100, []byte("a")}), 0)
	b := mkBatch(rec{200, []byte("a")}, rec{300, []byte("b")}, rec{400, []byte("c")})
	binary.BigEndian.PutUint16(b[offAttributes:], 4) // zstd: records opaque to the log
	fixCRC(b)
	appendT(t, l, b, 0)
	// Batch granularity: the batch's base offset and max timestamp.
	if off, ts, found, err := l.OffsetForTimestamp(350); err != nil || !found || off != 1 || ts != 400 {
		t.Fatalf("OffsetForTimestamp: %d %d %v %v", off, ts, found, err)
	}
	// MaxTimestamp names the batch's last offset.
	if ts, off := l.MaxTimestamp(); ts != 400 || off != 3 {
		t.Fatalf("MaxTimestamp: %d %d", ts, off)
	}
}
