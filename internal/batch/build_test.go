package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// A built batch validates and parses back to the same keys and values,
// tombstones included.
func TestBuildRoundTrip(t *testing.T) {
	recs := []KV{{Key: []byte("k1"), Value: []byte("v1")}, {Key: []byte("k2"), Value: nil}, {Key: nil, Value: []byte("v3")}}
	b := Build(recs, 1234)
	v, err := Validate(append([]byte(nil), b...), Limits{}, nil)
	if err != nil || v.Records != 3 {
		t.Fatalf("validate: %v, %d records", err, v.Records)
	}
	got, h, err := Records(b, nil)
	if err != nil || len(got) != 3 || h.MaxTimestamp != 1234 || h.ProducerID != -1 {
		t.Fatalf("records: %v %d %+v", err, len(got), h)
	}
	for i, r := range got {
		if !bytes.Equal(r.Key, recs[i].Key) || !bytes.Equal(r.Value, recs[i].Value) || (r.Value == nil) != (recs[i].Value == nil) {
			t.Fatalf("record %d: %q=%q", i, r.Key, r.Value)
		}
	}
}

func TestBuildControlMatchesKafkaLayout(t *testing.T) {
	for _, typ := range []int16{ControlAbort, ControlCommit} {
		b := BuildControl(42, 3, typ, 7, 1000)
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Control() || !h.Transactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != -1 || h.RecordCount != 1 {
			t.Fatalf("header %+v", h)
		}
		if crc32.Checksum(b[21:], crcTable) != h.CRC {
			t.Fatal("crc")
		}
		got, err := ControlType(b)
		if err != nil || got != typ {
			t.Fatalf("ControlType = %d, %v; want %d", got, err, typ)
		}
		recs, _, err := Records(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantKey := []byte{0, 0, 0, byte(typ)}
		wantVal := []byte{0, 0, 0, 0, 0, 7}
		if !bytes.Equal(recs[0].Key, wantKey) || !bytes.Equal(recs[0].Value, wantVal) {
			t.Fatalf("record key %x value %x", recs[0].Key, recs[0].Value)
		}
	}
	if _, err := ControlType(Build([]KV{{Key: []byte("k"), Value: []byte("v")}}, 1)); err == nil {
		t.Fatal("ControlType accepted a data batch")
	}
}

// ParseMarker reads the coordinator epoch from the marker's value and
// refuses a value Kafka would refuse: shorter than version and epoch, or
// with a negative version.
func TestParseMarkerReadsCoordinatorEpoch(t *testing.T) {
	m, err := ParseMarker(BuildControl(42, 3, ControlCommit, 1<<20+5, 1000))
	if err != nil || m != (Marker{Type: ControlCommit, CoordinatorEpoch: 1<<20 + 5}) {
		t.Fatalf("ParseMarker = %+v, %v", m, err)
	}
	control := func(value []byte) []byte {
		b := Build([]KV{{Key: []byte{0, 0, 0, 0}, Value: value}}, 1000)
		binary.BigEndian.PutUint16(b[21:], AttrTransactional|AttrControl)
		binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crcTable))
		return b
	}
	for _, v := range [][]byte{nil, {0, 0, 0, 0, 7}, {0xff, 0xff, 0, 0, 0, 7}} {
		if m, err := ParseMarker(control(v)); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("ParseMarker of value %x = %+v, %v; want ErrInvalidRecord", v, m, err)
		}
	}
	if m, err := ParseMarker(control([]byte{0, 1, 0, 0, 0, 7, 9})); err != nil || m.CoordinatorEpoch != 7 {
		t.Errorf("ParseMarker of a newer value version = %+v, %v; want epoch 7", m, err)
	}
}
