package handler

// What the group APIs (each in its key's file) share: they hand their
// requests to the group coordinator (internal/group). Those that wait
// (JoinGroup until the rebalance completes, SyncGroup until the leader
// assigns, commits until they are durable) answer through a channel the
// connection's write loop waits on (later).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

// later turns a respond-callback API into a Reply the write loop waits on.
func later[T kmsg.Response](conn *server.Conn, start func(respond func(T))) server.Reply {
	ch := make(chan T, 1)
	start(func(r T) { ch <- r })
	return func() kmsg.Response {
		select {
		case r := <-ch:
			return r
		case <-conn.Context().Done():
			return nil
		}
	}
}

func clientHost(req *server.Request) string {
	host := req.Conn.Remote
	for i := len(host) - 1; i >= 0; i-- {
		if host[i] == ':' {
			return "/" + host[:i]
		}
	}
	return "/" + host
}
