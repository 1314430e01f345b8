package handler

// The consumer group APIs hand their requests to the group coordinator
// (internal/group). Those that wait (JoinGroup until the rebalance
// completes, SyncGroup until the leader assigns, commits until they are
// durable) answer through a channel the connection's write loop waits on.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() {
	register(11, 0, 9, (*Broker).joinGroup)
	register(14, 0, 5, (*Broker).syncGroup)
	register(12, 0, 4, (*Broker).heartbeat)
	register(13, 0, 5, (*Broker).leaveGroup)
	register(8, 0, 10, (*Broker).offsetCommit)
	register(9, 0, 10, (*Broker).offsetFetch)
	register(47, 0, 0, (*Broker).offsetDelete)
	register(42, 0, 3, (*Broker).deleteGroups)
	register(15, 0, 6, (*Broker).describeGroups)
	register(16, 0, 5, (*Broker).listGroups)
}

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

func (b *Broker) joinGroup(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.JoinGroupRequest)
	return later(req.Conn, func(respond func(*kmsg.JoinGroupResponse)) {
		b.Groups.JoinGroup(r, req.ClientID, clientHost(req), respond)
	}), nil
}

func (b *Broker) syncGroup(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.SyncGroupRequest)
	return later(req.Conn, func(respond func(*kmsg.SyncGroupResponse)) { b.Groups.SyncGroup(r, respond) }), nil
}

func (b *Broker) heartbeat(_ context.Context, req *server.Request) (server.Reply, error) {
	return now(b.Groups.Heartbeat(req.Body.(*kmsg.HeartbeatRequest))), nil
}

func (b *Broker) leaveGroup(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.LeaveGroupRequest)
	return later(req.Conn, func(respond func(*kmsg.LeaveGroupResponse)) { b.Groups.LeaveGroup(r, respond) }), nil
}

func (b *Broker) offsetCommit(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.OffsetCommitRequest)
	return later(req.Conn, func(respond func(*kmsg.OffsetCommitResponse)) { b.Groups.OffsetCommit(r, respond) }), nil
}

func (b *Broker) offsetFetch(_ context.Context, req *server.Request) (server.Reply, error) {
	return now(b.Groups.OffsetFetch(req.Body.(*kmsg.OffsetFetchRequest))), nil
}

func (b *Broker) offsetDelete(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.OffsetDeleteRequest)
	return later(req.Conn, func(respond func(*kmsg.OffsetDeleteResponse)) { b.Groups.OffsetDelete(r, respond) }), nil
}

func (b *Broker) deleteGroups(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DeleteGroupsRequest)
	reply := later(req.Conn, func(respond func(*kmsg.DeleteGroupsResponse)) { b.Groups.DeleteGroups(r, respond) })
	return func() kmsg.Response {
		resp := reply()
		if dr, ok := resp.(*kmsg.DeleteGroupsResponse); ok {
			b.dropGroupConfigs(dr) // configs.go; on the write loop, where waiting belongs
		}
		return resp
	}, nil
}

func (b *Broker) describeGroups(_ context.Context, req *server.Request) (server.Reply, error) {
	return now(b.Groups.DescribeGroups(req.Body.(*kmsg.DescribeGroupsRequest))), nil
}

func (b *Broker) listGroups(_ context.Context, req *server.Request) (server.Reply, error) {
	return now(b.Groups.ListGroups(req.Body.(*kmsg.ListGroupsRequest))), nil
}
