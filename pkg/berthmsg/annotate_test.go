package berthmsg

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	_ kmsg.Request          = (*AnnotateShareRecordsRequest)(nil)
	_ kmsg.Response         = (*AnnotateShareRecordsResponse)(nil)
	_ kmsg.ThrottleResponse = (*AnnotateShareRecordsResponse)(nil)
)

func sampleRequest() *AnnotateShareRecordsRequest {
	return &AnnotateShareRecordsRequest{
		GroupID: "shippers", MemberID: "m-1",
		Topics: []AnnotateShareRecordsTopic{{
			TopicID: [16]byte{1, 2, 3, 15: 16},
			Partitions: []AnnotateShareRecordsPartition{
				{Partition: 0, FirstOffset: 7, LastOffset: 7, ErrorText: "bad address: no such street"},
				{Partition: 3, FirstOffset: 1 << 40, LastOffset: 1<<40 + 2, ErrorText: "é"},
			},
		}},
	}
}

func TestAnnotateRequestRoundTrip(t *testing.T) {
	req := sampleRequest()
	b := req.AppendTo(nil)
	var got AnnotateShareRecordsRequest
	if err := got.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, req) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, *req)
	}
	// Every shorter prefix fails to decode, and never panics.
	for i := range b {
		if err := new(AnnotateShareRecordsRequest).ReadFrom(b[:i]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("prefix of %d bytes: %v", i, err)
		}
	}
}

// The request's bytes as docs/compatibility.md lays them out.
func TestAnnotateRequestBytes(t *testing.T) {
	req := &AnnotateShareRecordsRequest{GroupID: "g", MemberID: "m", Topics: []AnnotateShareRecordsTopic{{
		TopicID: [16]byte{15: 1}, Partitions: []AnnotateShareRecordsPartition{{Partition: 2, FirstOffset: 5, LastOffset: 6, ErrorText: "x"}},
	}}}
	want := []byte{
		2, 'g', // GroupID: compact string
		2, 'm', // MemberID
		2,                                              // Topics: 1 (compact array)
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // TopicID
		2,          // Partitions: 1
		0, 0, 0, 2, // Partition
		0, 0, 0, 0, 0, 0, 0, 5, // FirstOffset
		0, 0, 0, 0, 0, 0, 0, 6, // LastOffset
		2, 'x', // ErrorText
		0, // partition tags
		0, // topic tags
		0, // request tags
	}
	if got := req.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("bytes\n got % x\nwant % x", got, want)
	}
}

func TestAnnotateResponseRoundTrip(t *testing.T) {
	msg := "offset 7 is available"
	resp := &AnnotateShareRecordsResponse{ThrottleMillis: 5, ErrorCode: 0, Topics: []AnnotateShareRecordsResponseTopic{{
		TopicID: [16]byte{9}, Partitions: []AnnotateShareRecordsResponsePartition{
			{Partition: 0, ErrorCode: 121, ErrorMessage: &msg}, {Partition: 1},
		},
	}}}
	b := resp.AppendTo(nil)
	var got AnnotateShareRecordsResponse
	if err := got.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, resp) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, *resp)
	}
	for i := range b {
		if err := new(AnnotateShareRecordsResponse).ReadFrom(b[:i]); err == nil {
			t.Fatalf("prefix of %d bytes decoded", i)
		}
	}
}

// Unknown tagged fields are skipped (a later version may add some).
func TestAnnotateRequestSkipsTags(t *testing.T) {
	b := (&AnnotateShareRecordsRequest{GroupID: "g", MemberID: "m"}).AppendTo(nil)
	b = append(b[:len(b)-1], 1, 7, 3, 'a', 'b', 'c') // one tag (7) of 3 bytes
	var got AnnotateShareRecordsRequest
	if err := got.ReadFrom(b); err != nil || got.GroupID != "g" || got.MemberID != "m" {
		t.Fatalf("%+v, %v", got, err)
	}
}

func FuzzAnnotateRequestReadFrom(f *testing.F) {
	f.Add(sampleRequest().AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r AnnotateShareRecordsRequest
		if r.ReadFrom(b) != nil {
			return
		}
		var again AnnotateShareRecordsRequest
		if err := again.ReadFrom(r.AppendTo(nil)); err != nil || !reflect.DeepEqual(r, again) {
			t.Fatalf("re-encoding does not decode to the same request: %v", err)
		}
	})
}
