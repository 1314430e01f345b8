package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/berthmq/berth/internal/poll"
)

func metadataRequest(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = str(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// Responses go out in request order even when an earlier request's reply
// takes longer to resolve than later ones, across header versions.
func TestPipelinedRepliesAnsweredInRequestOrder(t *testing.T) {
	const n = 10
	gates := make([]chan struct{}, n)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		gate := gates[req.CorrelationID]
		return func() kmsg.Response {
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return metadataReply(req)
		}, nil
	})
	_, addr := startServer(t, h, Config{})
	c := dial(t, addr)
	version := func(i int) int16 { return []int16{1, 12}[i%2] } // header v1 and flexible v2
	var out []byte
	for i := range n {
		out = append(out, request(metadataRequest(version(i), "t"), int32(i))...)
	}
	write(t, c, out)
	h.waitHandled(t, n)

	// Every reply but the first is ready: none may be sent before it.
	for i := n - 1; i > 0; i-- {
		close(gates[i])
	}
	expectOpen(t, c, 100*time.Millisecond)
	close(gates[0])
	for i := range n {
		corr, resp := readMetadata(t, c, version(i))
		if corr != int32(i) || bodyOf(resp) != int32(i) {
			t.Fatalf("response %d: correlation id %d, body of request %d", i, corr, bodyOf(resp))
		}
	}
}

// A nil Reply (acks=0) and a Reply resolving to nil send nothing; the
// responses after them still come, in order.
func TestNilReplySendsNothing(t *testing.T) {
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		switch r := req.Body.(type) {
		case *kmsg.ProduceRequest:
			if r.Acks == 0 {
				return nil, nil
			}
			return func() kmsg.Response { return nil }, nil
		default:
			return func() kmsg.Response { return metadataReply(req) }, nil
		}
	})
	_, addr := startServer(t, h, Config{})
	c := dial(t, addr)
	produce := func(acks int16) kmsg.Request {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, acks, 1000
		return req
	}
	var out []byte
	out = append(out, request(produce(0), 1)...)
	out = append(out, request(metadataRequest(12), 2)...)
	out = append(out, request(produce(1), 3)...)
	out = append(out, request(produce(0), 4)...)
	out = append(out, request(metadataRequest(1), 5)...)
	write(t, c, out)
	if corr, _ := readMetadata(t, c, 12); corr != 2 {
		t.Fatalf("first response has correlation id %d, want 2", corr)
	}
	if corr, _ := readMetadata(t, c, 1); corr != 5 {
		t.Fatalf("second response has correlation id %d, want 5", corr)
	}
	// Nothing was queued in between: the next request's answer comes next.
	write(t, c, request(metadataRequest(12), 6))
	if corr, _ := readMetadata(t, c, 12); corr != 6 {
		t.Fatalf("third response has correlation id %d, want 6", corr)
	}
	if got := len(h.handled()); got != 6 {
		t.Fatalf("%d requests handled, want 6", got)
	}
}

// A flexible request header (v2) carries tagged fields after the client id;
// they are skipped and the body decodes. Responses use header v1, except
// ApiVersions, which always answers with header v0.
func TestFlexibleHeaderWithTaggedFields(t *testing.T) {
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		if req.Key == 18 {
			resp := req.Body.(*kmsg.ApiVersionsRequest).ResponseKind().(*kmsg.ApiVersionsResponse)
			resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MinVersion: 0, MaxVersion: 13}}
			resp.ThrottleMillis = 77
			return func() kmsg.Response { return resp }, nil
		}
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	_, addr := startServer(t, h, Config{})
	c := dial(t, addr)

	// Two tagged fields: tag 0 with 3 bytes, tag 7 with 1 byte.
	tags := []byte{2, 0, 3, 'a', 'b', 'c', 7, 1, 'x'}
	write(t, c, frame(header{key: 3, version: 12, corr: 41, clientID: str("cli"), tags: tags},
		metadataRequest(12, "orders", "payments").AppendTo(nil)))
	if corr, resp := readMetadata(t, c, 12); corr != 41 || bodyOf(resp) != 41 {
		t.Fatalf("correlation id %d, body of request %d", corr, bodyOf(resp))
	}
	// A null client id in a flexible header.
	write(t, c, frame(header{key: 3, version: 9, corr: 42, tags: []byte{0}}, metadataRequest(9).AppendTo(nil)))
	if corr, _ := readMetadata(t, c, 9); corr != 42 {
		t.Fatalf("correlation id %d", corr)
	}
	got := h.handled()
	r := got[0]
	md := r.Body.(*kmsg.MetadataRequest)
	if r.ClientID != "cli" || r.Version != 12 || r.CorrelationID != 41 || len(md.Topics) != 2 ||
		*md.Topics[0].Topic != "orders" || *md.Topics[1].Topic != "payments" {
		t.Fatalf("handler got %+v with topics %+v", r, md.Topics)
	}
	if got[1].ClientID != "" {
		t.Fatalf("null client id read as %q", got[1].ClientID)
	}

	// ApiVersions v3: flexible request, response header v0 (no tag byte).
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "berth-test", "1.0"
	write(t, c, frame(header{key: 18, version: 3, corr: 43, clientID: str("cli"), tags: []byte{1, 3, 0}}, av.AppendTo(nil)))
	corr, b := readFrame(t, c)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(b); err != nil || corr != 43 {
		t.Fatalf("ApiVersions v3 response: corr %d, %v", corr, err)
	}
	if resp.ThrottleMillis != 77 || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].MaxVersion != 13 {
		t.Fatalf("ApiVersions v3 response misread: %+v", resp)
	}
	if avr := h.handled()[2].Body.(*kmsg.ApiVersionsRequest); avr.ClientSoftwareName != "berth-test" {
		t.Fatalf("ApiVersions body decoded as %+v", avr)
	}
}

// A malformed tag section closes the connection without calling the handler.
func TestBadHeaderTagsCloseConnection(t *testing.T) {
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	s, addr := startServer(t, h, Config{})
	for name, tags := range map[string][]byte{
		"size overruns frame": {1, 0, 0x7f},
		"count above tags":    {3, 0, 0},
		"truncated varint":    {0x80},
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, addr)
			write(t, c, frame(header{key: 3, version: 12, corr: 1, clientID: str("c"), tags: tags}, nil))
			expectClosed(t, c)
		})
	}
	if n := len(h.handled()); n != 0 {
		t.Fatalf("handler called %d times for malformed headers", n)
	}
	if n := s.Metrics.BadFrames.Load(); n != 3 {
		t.Fatalf("BadFrames %d, want 3", n)
	}
}

// socket.request.max.bytes: a frame of exactly the limit is served; one
// byte more, or a size below a header, closes the connection before the
// body is read. Other connections are unaffected.
func TestFrameSizeBounds(t *testing.T) {
	const limit = 1024
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	s, addr := startServer(t, h, Config{MaxRequestBytes: limit})

	// 8 (key, version, corr) + 2+4 (client id) + 4 (array) + 2+len(name).
	name := strings.Repeat("x", limit-8-6-4-2)
	exact := request(metadataRequest(1, name), 9)
	if got := len(exact) - 4; got != limit {
		t.Fatalf("test frame is %d bytes, want %d", got, limit)
	}
	c := dial(t, addr)
	write(t, c, exact)
	if corr, resp := readMetadata(t, c, 1); corr != 9 || bodyOf(resp) != 9 {
		t.Fatalf("frame at the limit: corr %d", corr)
	}

	for name, size := range map[string]uint32{"one over": limit + 1, "huge": 0x7fffffff, "negative": 0xfffffff0, "below header": 7} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, addr)
			write(t, c, binary.BigEndian.AppendUint32(nil, size))
			expectClosed(t, c)
		})
	}
	if n := s.Metrics.BadFrames.Load(); n != 4 {
		t.Fatalf("BadFrames %d, want 4", n)
	}
	// The first connection still works.
	write(t, c, request(metadataRequest(1), 10))
	if corr, _ := readMetadata(t, c, 1); corr != 10 {
		t.Fatalf("corr %d", corr)
	}
}

// waitForAcquire polls until some goroutine waits in byteSem.acquire.
func waitForAcquire(t *testing.T) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() error {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		if !strings.Contains(buf.String(), "(*byteSem).acquire") {
			return errors.New("no reader waits for request memory")
		}
		return nil
	})
}

// queued.max.request.bytes: while requests hold the memory, another
// connection's reader waits (its connection stays open) and is served once
// memory returns.
func TestQueuedBytesMakeReaderWait(t *testing.T) {
	gate := make(chan struct{})
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		if req.ClientID == "hold" {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	_, addr := startServer(t, h, Config{MaxRequestBytes: 2048, QueuedMaxBytes: 2048})
	big := func(corr int32, client string) []byte {
		return frame(header{key: 3, version: 1, corr: corr, clientID: str(client)},
			metadataRequest(1, strings.Repeat("t", 1200)).AppendTo(nil))
	}
	a, b := dial(t, addr), dial(t, addr)
	write(t, a, big(1, "hold")) // holds ~1.2 KB in its handler
	h.waitHandled(t, 1)
	write(t, b, big(2, "b")) // needs ~1.2 KB more: over the bound
	waitForAcquire(t)
	if n := len(h.handled()); n != 1 {
		t.Fatalf("%d requests handled past the memory bound", n)
	}
	// The waiting connection is still open and gets its answer.
	close(gate)
	if corr, _ := readMetadata(t, a, 1); corr != 1 {
		t.Fatalf("a: corr %d", corr)
	}
	if corr, _ := readMetadata(t, b, 1); corr != 2 {
		t.Fatalf("b: corr %d", corr)
	}
}

// ApiVersions of a version we do not serve, or whose body we cannot
// decode, is answered at v0 with UNSUPPORTED_VERSION and our ranges
// (KIP-511); any other unserved key or version closes the connection.
func TestUnsupportedVersions(t *testing.T) {
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	_, addr := startServer(t, h, Config{})
	checkRanges := func(t *testing.T, c net.Conn, corr int32) {
		t.Helper()
		got, b := readFrame(t, c)
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(b); err != nil || got != corr {
			t.Fatalf("corr %d, %v", got, err)
		}
		want := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MinVersion: 3, MaxVersion: 13}, {ApiKey: 3, MinVersion: 0, MaxVersion: 13}, {ApiKey: 18, MinVersion: 0, MaxVersion: 4}}
		if resp.ErrorCode != 35 || len(resp.ApiKeys) != len(want) {
			t.Fatalf("error %d, keys %+v", resp.ErrorCode, resp.ApiKeys)
		}
		for i, k := range want {
			if g := resp.ApiKeys[i]; g.ApiKey != k.ApiKey || g.MinVersion != k.MinVersion || g.MaxVersion != k.MaxVersion {
				t.Fatalf("key %d: %+v, want %+v", i, g, k)
			}
		}
	}
	c := dial(t, addr)
	write(t, c, frame(header{key: 18, version: 99, corr: 5, clientID: str("c"), tags: []byte{0}}, []byte{1, 2, 3}))
	checkRanges(t, c, 5)
	write(t, c, frame(header{key: 18, version: 4, corr: 6, clientID: str("c"), tags: []byte{0}}, []byte{0xff}))
	checkRanges(t, c, 6)

	for name, b := range map[string][]byte{
		"unknown key":       frame(header{key: 999, version: 0, corr: 1}, nil),
		"unserved key":      request(kmsg.NewPtrFindCoordinatorRequest(), 1),
		"version too old":   frame(header{key: 0, version: 2, corr: 1}, nil),
		"version too new":   frame(header{key: 3, version: 14, corr: 1}, nil),
		"body undecodable":  frame(header{key: 3, version: 1, corr: 1}, []byte{0, 0, 0, 9}),
		"truncated header":  {0, 0, 0, 9, 0, 3, 0, 1, 0, 0, 0, 1, 0},
		"client id overrun": {0, 0, 0, 10, 0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0},
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, addr)
			write(t, c, b)
			expectClosed(t, c)
		})
	}
	if n := len(h.handled()); n != 0 {
		t.Fatalf("handler called %d times", n)
	}
}

// A handler error closes that connection only.
func TestHandlerErrorClosesConnection(t *testing.T) {
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		if req.ClientID == "bad" {
			return nil, errors.New("unusable")
		}
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	_, addr := startServer(t, h, Config{})
	good, bad := dial(t, addr), dial(t, addr)
	write(t, bad, frame(header{key: 3, version: 1, corr: 1, clientID: str("bad")}, metadataRequest(1).AppendTo(nil)))
	expectClosed(t, bad)
	write(t, good, request(metadataRequest(1), 2))
	if corr, _ := readMetadata(t, good, 1); corr != 2 {
		t.Fatalf("corr %d", corr)
	}
}

// connections.max.idle.ms closes a connection that sends nothing.
func TestIdleTimeoutClosesConnection(t *testing.T) {
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	s, addr := startServer(t, h, Config{IdleTimeout: 200 * time.Millisecond})
	c := dial(t, addr)
	write(t, c, request(metadataRequest(1), 1))
	readMetadata(t, c, 1)
	expectClosed(t, c)
	poll.Until(t, 10*time.Second, func() error {
		if n := s.Metrics.ConnectionsOpen.Load(); n != 0 {
			return errors.New("connection still counted as open")
		}
		return nil
	})
}

// Close returns while connections are idle, mid-frame, waiting on a reply
// or waiting for request memory; every connection is closed, Serve
// returns nil and no goroutine is left behind.
func TestCloseWithOpenConnections(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newFake(func(ctx context.Context, req *Request) (Reply, error) {
		switch req.ClientID {
		case "hold": // holds request memory in the handler
			<-ctx.Done()
			return nil, ctx.Err()
		case "slow": // a long poll
			return func() kmsg.Response {
				<-ctx.Done()
				return metadataReply(req)
			}, nil
		}
		return func() kmsg.Response { return metadataReply(req) }, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ln, h, Config{MaxRequestBytes: 2048, QueuedMaxBytes: 2048, Logger: quiet()})
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	addr := ln.Addr().String()
	big := func(client string) []byte {
		return frame(header{key: 3, version: 1, corr: 1, clientID: str(client)},
			metadataRequest(1, strings.Repeat("t", 1200)).AppendTo(nil))
	}

	idle := dial(t, addr)
	write(t, idle, request(metadataRequest(1), 1))
	readMetadata(t, idle, 1)
	slow := dial(t, addr)
	write(t, slow, frame(header{key: 3, version: 1, corr: 1, clientID: str("slow")}, metadataRequest(1).AppendTo(nil)))
	partial := dial(t, addr)
	write(t, partial, request(metadataRequest(1), 1)[:10])
	hold := dial(t, addr)
	write(t, hold, big("hold"))
	h.waitHandled(t, 3)
	waiting := dial(t, addr)
	write(t, waiting, big("waiting"))
	waitForAcquire(t)
	poll.Until(t, 10*time.Second, func() error {
		if n := s.Metrics.ConnectionsOpen.Load(); n != 5 {
			return errors.New("not every connection accepted yet")
		}
		return nil
	})

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s")
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve returned %v after Close", err)
	}
	// A request in flight may still be answered (the long poll, the reader
	// that got memory back as the holder left); then each connection ends.
	for _, c := range []net.Conn{idle, slow, partial, hold, waiting} {
		drainUntilClosed(t, c)
	}
	if n := s.Metrics.ConnectionsOpen.Load(); n != 0 {
		t.Fatalf("%d connections counted open after Close", n)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("listener still accepts after Close")
	}
	for _, c := range []net.Conn{idle, slow, partial, hold, waiting} {
		c.Close()
	}
}

// drainUntilClosed reads c until the server closes it.
func drainUntilClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sink [512]byte
	for {
		_, err := c.Read(sink[:])
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("connection still open 10s after Close")
		}
		return
	}
}
