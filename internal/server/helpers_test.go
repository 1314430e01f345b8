package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/berthmq/berth/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeHandler serves the keys in versions with fn; it records every
// request it was handed.
type fakeHandler struct {
	versions map[int16][2]int16
	fn       func(ctx context.Context, req *Request) (Reply, error)

	mu   sync.Mutex
	seen []*Request
}

func newFake(fn func(ctx context.Context, req *Request) (Reply, error)) *fakeHandler {
	return &fakeHandler{
		versions: map[int16][2]int16{0: {3, 13}, 3: {0, 13}, 18: {0, 4}},
		fn:       fn,
	}
}

func (h *fakeHandler) Supported(key int16) (int16, int16, bool) {
	v, ok := h.versions[key]
	return v[0], v[1], ok
}

func (h *fakeHandler) Handle(ctx context.Context, req *Request) (Reply, error) {
	h.mu.Lock()
	h.seen = append(h.seen, req)
	h.mu.Unlock()
	return h.fn(ctx, req)
}

// handled returns the requests handled so far.
func (h *fakeHandler) handled() []*Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Request(nil), h.seen...)
}

// waitHandled polls until n requests were handled.
func (h *fakeHandler) waitHandled(t *testing.T, n int) []*Request {
	t.Helper()
	var got []*Request
	poll.Until(t, 10*time.Second, func() error {
		if got = h.handled(); len(got) < n {
			return fmt.Errorf("%d requests handled, want %d", len(got), n)
		}
		return nil
	})
	return got
}

// metadataReply answers with a Metadata response listing one broker whose
// node id is the request's correlation id, so the body identifies the
// request (in every version).
func metadataReply(req *Request) kmsg.Response {
	resp := req.Body.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = req.CorrelationID, "h", 9092
	resp.Brokers = append(resp.Brokers, b)
	return resp
}

// bodyOf is the correlation id metadataReply put in a response body.
func bodyOf(resp *kmsg.MetadataResponse) int32 {
	if len(resp.Brokers) != 1 {
		return -1
	}
	return resp.Brokers[0].NodeID
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startServer serves h on a loopback port until test cleanup, and checks
// that Serve returns nil after Close.
func startServer(t *testing.T, h Handler, cfg Config) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	s := New(ln, h, cfg)
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after Close", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10s of Close")
		}
	})
	return s, ln.Addr().String()
}

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

// header is a request header; tags != nil makes it a flexible (v2) header
// with those raw tagged-field bytes.
type header struct {
	key, version int16
	corr         int32
	clientID     *string
	tags         []byte
}

func str(s string) *string { return &s }

// frame encodes a size-prefixed request.
func frame(h header, body []byte) []byte {
	b := make([]byte, 4, 64+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(h.key))
	b = binary.BigEndian.AppendUint16(b, uint16(h.version))
	b = binary.BigEndian.AppendUint32(b, uint32(h.corr))
	if h.clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*h.clientID)))
		b = append(b, *h.clientID...)
	}
	b = append(b, h.tags...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// request encodes req as a frame with a v1 or (flexible) empty v2 header.
func request(req kmsg.Request, corr int32) []byte {
	h := header{key: req.Key(), version: req.GetVersion(), corr: corr, clientID: str("test")}
	if req.IsFlexible() {
		h.tags = []byte{0}
	}
	return frame(h, req.AppendTo(nil))
}

func write(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// readFrame reads one response frame: its correlation id and the rest.
func readFrame(t *testing.T, c net.Conn) (int32, []byte) {
	t.Helper()
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading response body: %v", err)
	}
	if len(b) < 4 {
		t.Fatalf("response of %d bytes", len(b))
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:]
}

// readMetadata reads a Metadata response of the given version.
func readMetadata(t *testing.T, c net.Conn, version int16) (int32, *kmsg.MetadataResponse) {
	t.Helper()
	corr, b := readFrame(t, c)
	if version >= 9 { // response header v1: an empty tag section
		if len(b) == 0 || b[0] != 0 {
			t.Fatalf("flexible response without an empty tag section: % x", b[:min(len(b), 8)])
		}
		b = b[1:]
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = version
	if err := resp.ReadFrom(b); err != nil {
		t.Fatalf("decoding Metadata v%d response: %v", version, err)
	}
	return corr, resp
}

// expectClosed checks that the server closed c.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	_, err := c.Read(b[:])
	if err == nil {
		t.Fatal("connection still open: read a byte")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection still open after 10s")
	}
}

// expectOpen checks that nothing arrives on c and it stays open for d.
// It is only used to show a negative (a reader waits); d bounds the wait.
func expectOpen(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("expected no data and an open connection, got read err %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
}
