package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// pipeListener hands out the server ends of net.Pipe connections, so a
// fuzz input goes through Serve and the read and write loops without a
// TCP handshake per input.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// allKeys serves every request kmsg knows, every version, answering each
// with an empty response of its kind, as a real handler would build one
// from the decoded request.
type allKeys struct{}

func (allKeys) Supported(key int16) (int16, int16, bool) {
	r := kmsg.RequestForKey(key)
	if r == nil {
		return 0, 0, false
	}
	return 0, r.MaxVersion(), true
}

func (allKeys) Handle(_ context.Context, req *Request) (Reply, error) {
	if req.Body.Key() != req.Key || req.Body.GetVersion() != req.Version {
		return nil, errors.New("decoded body does not match the header")
	}
	resp := req.Body.ResponseKind()
	return func() kmsg.Response { return resp }, nil
}

// seedFrames are valid request bodies (header and body, no size) of every
// kmsg request at its max version.
func seedFrames() [][]byte {
	var out [][]byte
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		r := kmsg.RequestForKey(k)
		if r == nil {
			continue
		}
		r.SetVersion(r.MaxVersion())
		b := request(r, int32(k))[4:]
		out = append(out, b)
	}
	return out
}

// FuzzServeFrame sends one arbitrary frame body through the read loop,
// decode and write loop. The server must answer it (correlation id echoed,
// a response that decodes at the version it promised, with the right
// header version) or close the connection counting a bad frame; it must
// never panic or leave the client hanging.
func FuzzServeFrame(f *testing.F) {
	for _, b := range seedFrames() {
		f.Add(b)
	}
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})                   // ApiVersions v99
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0, 1, 'c', 2, 0, 1, 'x', 9, 0}) // tags
	f.Add([]byte{0, 3, 0, 1, 0, 0, 0, 1})

	ln := newPipeListener()
	s := New(ln, allKeys{}, Config{Logger: quiet()})
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	f.Cleanup(func() {
		s.Close()
		<-served
	})

	f.Fuzz(func(t *testing.T, body []byte) {
		bad := s.Metrics.BadFrames.Load()
		c := ln.dial()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		wrote := make(chan error, 1)
		go func() {
			_, err := c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
			if err == nil {
				_, err = c.Write(body)
			}
			wrote <- err
		}()
		defer func() { c.Close(); <-wrote }()

		var sz [4]byte
		_, err := io.ReadFull(c, sz[:])
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("no response and connection still open after 10s")
			}
			if s.Metrics.BadFrames.Load() == bad {
				t.Fatalf("connection closed without counting a bad frame: %v", err)
			}
			return
		}
		if len(body) < 8 {
			t.Fatalf("answered a %d-byte frame", len(body))
		}
		resp := make([]byte, binary.BigEndian.Uint32(sz[:]))
		if _, err := io.ReadFull(c, resp); err != nil {
			t.Fatalf("reading response: %v", err)
		}
		key := int16(binary.BigEndian.Uint16(body))
		version := int16(binary.BigEndian.Uint16(body[2:]))
		if len(resp) < 4 || !bytesEqual(resp[:4], body[4:8]) {
			t.Fatalf("response does not echo the correlation id: % x", resp[:min(4, len(resp))])
		}
		resp = resp[4:]
		req := kmsg.RequestForKey(key)
		if req == nil {
			t.Fatalf("answered unknown key %d", key)
		}
		if key == 18 {
			// Answered at the version asked, or at v0 with our ranges.
			r := kmsg.NewPtrApiVersionsResponse()
			r.Version = version
			if err := r.ReadFrom(resp); err != nil || version < 0 || version > req.MaxVersion() {
				r = kmsg.NewPtrApiVersionsResponse()
				if err := r.ReadFrom(resp); err != nil {
					t.Fatalf("ApiVersions response undecodable: %v", err)
				}
				if r.ErrorCode != 35 || len(r.ApiKeys) == 0 {
					t.Fatalf("ApiVersions fallback: error %d, %d keys", r.ErrorCode, len(r.ApiKeys))
				}
			}
			return
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			if len(resp) == 0 || resp[0] != 0 {
				t.Fatal("flexible response without an empty tag section")
			}
			resp = resp[1:]
		}
		r := req.ResponseKind()
		r.SetVersion(version)
		if err := r.ReadFrom(resp); err != nil {
			t.Fatalf("%s v%d response undecodable: %v", kmsg.NameForKey(key), version, err)
		}
	})
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }
