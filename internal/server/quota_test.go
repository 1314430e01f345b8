package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A muted connection (KIP-219) is answered at once, and its next request
// is not read, let alone handled, until the mute ends; other connections
// are served meanwhile.
func TestMuteHoldsTheNextRequest(t *testing.T) {
	const mute = 400 * time.Millisecond
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		if req.CorrelationID == 1 {
			req.Conn.Mute(mute)
		}
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	_, addr := startServer(t, h, Config{})
	c := dial(t, addr)
	start := time.Now()
	write(t, c, append(request(metadataRequest(1, "t"), 1), request(metadataRequest(1, "t"), 2)...))
	if corr, _ := readMetadata(t, c, 1); corr != 1 {
		t.Fatalf("first answer has correlation id %d", corr)
	}
	if el := time.Since(start); el >= mute {
		t.Fatalf("the muting request itself was answered after %v", el)
	}
	// Another connection is not muted.
	o := dial(t, addr)
	write(t, o, request(metadataRequest(1, "t"), 7))
	if corr, _ := readMetadata(t, o, 1); corr != 7 {
		t.Fatalf("other connection: correlation id %d", corr)
	}
	if n := len(h.handled()); n != 2 { // requests 1 and 7; 2 waits
		t.Fatalf("%d requests handled while muted, want 2", n)
	}
	if corr, _ := readMetadata(t, c, 1); corr != 2 {
		t.Fatalf("second answer has correlation id %d", corr)
	}
	if el := time.Since(start); el < mute {
		t.Fatalf("second request answered after %v, inside the %v mute", el, mute)
	}
}

// Config.Accept refuses a connection by closing it before any request.
func TestAcceptRefuses(t *testing.T) {
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	n := 0
	s, addr := startServer(t, h, Config{Accept: func(host string) (time.Duration, bool) {
		n++
		return 0, n == 2 || host == ""
	}})
	c := dial(t, addr)
	write(t, c, request(metadataRequest(1, "t"), 1))
	readMetadata(t, c, 1)
	refused, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	_ = refused.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := refused.Read(make([]byte, 1)); err == nil {
		t.Fatal("refused connection read data")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("refused connection left open")
	}
	if s.Metrics.ConnectionsRefused.Load() != 1 {
		t.Fatalf("refused count %d", s.Metrics.ConnectionsRefused.Load())
	}
}
