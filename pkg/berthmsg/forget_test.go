package berthmsg

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	_ kmsg.Request          = (*ForgetShareGroupRequest)(nil)
	_ kmsg.Response         = (*ForgetShareGroupResponse)(nil)
	_ kmsg.ThrottleResponse = (*ForgetShareGroupResponse)(nil)
)

// The messages' bytes as docs/compatibility.md lays them out, and back.
func TestForgetShareGroupBytes(t *testing.T) {
	req := &ForgetShareGroupRequest{GroupID: "g"}
	if got, want := req.AppendTo(nil), []byte{2, 'g', 0}; !bytes.Equal(got, want) {
		t.Fatalf("request bytes %v, want %v", got, want)
	}
	msg := "bad"
	resp := &ForgetShareGroupResponse{ErrorCode: 42, ErrorMessage: &msg}
	b := resp.AppendTo(nil)
	if want := []byte{0, 0, 0, 0, 0, 42, 4, 'b', 'a', 'd', 0}; !bytes.Equal(b, want) {
		t.Fatalf("response bytes %v, want %v", b, want)
	}
	for _, m := range []interface {
		AppendTo([]byte) []byte
		ReadFrom([]byte) error
	}{req, resp, &ForgetShareGroupResponse{}} {
		b := m.AppendTo(nil)
		got := reflect.New(reflect.TypeOf(m).Elem()).Interface().(interface{ ReadFrom([]byte) error })
		if err := got.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip: got %+v, want %+v", got, m)
		}
		for i := range b {
			if err := got.ReadFrom(b[:i]); !errors.Is(err, ErrTruncated) {
				t.Fatalf("%T: prefix of %d bytes: %v", m, i, err)
			}
		}
	}
}
