package tests

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	tc "github.com/berthmq/berth/internal/testcluster"
)

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// frame builds a request: size, key, version, correlation id, client id, body.
func frame(key, version int16, corr int32, body []byte) []byte {
	b := make([]byte, 4, 64+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func readFrame(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	var b [1]byte
	if _, err := c.Read(b[:]); err == nil {
		t.Fatal("connection still open")
	}
}

// Malformed frames and unknown APIs close only that connection; an
// ApiVersions of an unknown version gets UNSUPPORTED_VERSION and our ranges;
// the broker keeps serving everyone else.
func TestBadFramesCloseOnlyThatConnection(t *testing.T) {
	n := tc.Start(t)
	cases := map[string][]byte{
		"oversized frame":   {0x7f, 0xff, 0xff, 0xff, 0, 0},
		"negative size":     {0xff, 0xff, 0xff, 0xf0},
		"unknown api key":   frame(999, 0, 1, nil),
		"unserved version":  frame(0, 2, 1, nil), // Produce v2: message format v1
		"garbage metadata":  frame(3, 12, 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}),
		"truncated header":  {0, 0, 0, 9, 0, 3, 0, 1, 0, 0, 0, 1, 0},
		"client id overrun": {0, 0, 0, 10, 0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, n.Addr())
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
		})
	}

	c := dial(t, n.Addr())
	if _, err := c.Write(frame(18, 99, 7, nil)); err != nil {
		t.Fatal(err)
	}
	b := readFrame(t, c)
	if corr := int32(binary.BigEndian.Uint32(b)); corr != 7 {
		t.Fatalf("correlation id %d", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(b[4:]); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 35 || len(resp.ApiKeys) < 10 {
		t.Fatalf("ApiVersions v99: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}

	// Pipelined requests are answered in order.
	c = dial(t, n.Addr())
	var out []byte
	for i := int32(0); i < 20; i++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 1
		out = append(out, frame(3, 1, 100+i, req.AppendTo(nil))...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	for i := int32(0); i < 20; i++ {
		if corr := int32(binary.BigEndian.Uint32(readFrame(t, c))); corr != 100+i {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
	}

	// Still serving.
	tc.CreateTopic(t, n.Addr(), "alive", 1, nil)
}
