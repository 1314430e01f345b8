package dlq

import (
	"net"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/share"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// A copied DLQ record keeps the source's key, value and headers, minus
// __dlq.errors.* headers of an earlier parking except the redrive count,
// then the context headers; without copying it has the context only.
// Its timestamp is the parking time; the source's is in a header.
func TestDLQRecordHeaders(t *testing.T) {
	src := batch.Record{Key: []byte("k"), Value: []byte("v"), Headers: []batch.RecordHeader{
		{Key: "trace", Value: []byte("1")},
		{Key: berthmsg.HeaderDLQTopic, Value: []byte("old")},
		{Key: berthmsg.HeaderDLQReason, Value: []byte("old")},
		{Key: berthmsg.HeaderDLQRedriveCount, Value: []byte("2")},
	}}
	k := share.Key{Group: "g", Partition: 3}
	a := share.DLQAction{First: 7, Last: 7, Reason: share.ReasonRejected, DeliveryCount: 1, ErrorText: "boom"}
	parked := time.UnixMilli(5000)
	r := record(k, "jobs", "dlq.jobs", 7, 1000, parked, src, a, true)
	if string(r.Key) != "k" || string(r.Value) != "v" || r.Topic != "dlq.jobs" || r.Timestamp.UnixMilli() != 5000 {
		t.Fatalf("record %+v", r)
	}
	var keys []string
	got := map[string]string{}
	for _, h := range r.Headers {
		keys = append(keys, h.Key)
		if _, dup := got[h.Key]; dup {
			t.Fatalf("header %s twice: %v", h.Key, keys)
		}
		got[h.Key] = string(h.Value)
	}
	if keys[0] != "trace" || keys[1] != berthmsg.HeaderDLQRedriveCount {
		t.Fatalf("source headers not first: %v", keys)
	}
	for h, v := range map[string]string{berthmsg.HeaderDLQTopic: "jobs", berthmsg.HeaderDLQPartition: "3", berthmsg.HeaderDLQOffset: "7",
		berthmsg.HeaderDLQReason: "rejected", berthmsg.HeaderDLQRedriveCount: "2", berthmsg.HeaderDLQClientError: "boom",
		berthmsg.HeaderDLQTimestamp: "1000"} {
		if got[h] != v {
			t.Errorf("%s = %q, want %q", h, got[h], v)
		}
	}

	r = record(k, "jobs", "dlq.jobs", 7, 1000, parked, src, a, false)
	if r.Key != nil || r.Value != nil || r.Headers[0].Key != berthmsg.HeaderDLQTopic {
		t.Fatalf("without copy: %+v", r)
	}
}

func TestLoopback(t *testing.T) {
	for in, want := range map[string]string{"0.0.0.0:9092": "127.0.0.1:9092", "[::]:9092": "[::1]:9092", "10.1.2.3:9092": "10.1.2.3:9092"} {
		a, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopback(a); got != want {
			t.Errorf("loopback(%s) = %s, want %s", in, got, want)
		}
	}
}
