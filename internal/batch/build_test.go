package batch

import (
	"bytes"
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
