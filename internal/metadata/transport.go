package metadata

import (
	"context"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Transport carries Raft messages between the members of the metadata
// quorum. The Controller drives it from its Ready loop:
//
//   - Start(r) once, from Controller.Start, before the loop runs: from then
//     on the transport hands what it receives to r.
//   - Send after the entries and HardState of the same Ready are durable,
//     as Raft requires. Send must never block: queue and return; a message
//     that cannot be queued is dropped (Raft retries), and a dropped or
//     undeliverable MsgSnap is reported with r.ReportSnapshot.
//   - SetPeers whenever the set of known member addresses changes.
//   - SendJoin to ask a member to add this node to the quorum.
//
// The caller that creates a Transport owns it: close it after the
// Controller. TCPTransport is the network implementation; LoopbackTransport
// serves a one-voter cluster, which never sends anything.
type Transport interface {
	Start(r Receiver)
	Send(msgs []*pb.Message)
	// SetPeers replaces the known addresses: Raft id -> host:port. It may
	// include the local node, which the transport ignores.
	SetPeers(peers map[uint64]string)
	SendJoin(to uint64, req JoinRequest)
}

// Receiver is the Controller side of a Transport. Its methods are safe for
// concurrent use and, except Step, never block.
type Receiver interface {
	// Step delivers a message from a peer; it waits while the Controller's
	// inbox is full, until ctx ends or the Controller closes.
	Step(ctx context.Context, m *pb.Message) error
	// ReportUnreachable says a message to id could not be sent.
	ReportUnreachable(id uint64)
	// ReportSnapshot says whether a MsgSnap to id was delivered.
	ReportSnapshot(id uint64, status raft.SnapshotStatus)
	// Join delivers a node's request to be added to the quorum.
	Join(req JoinRequest)
}

// JoinRequest asks the leader to add a node to the quorum as an observer
// (a Raft learner), or to record a member's new address.
type JoinRequest struct {
	ID   uint64 // Raft id of the node asking
	Addr string // its controller address, host:port
}

// LoopbackTransport is the one-voter transport. Raft never addresses
// messages to the local node through Ready, so with a single voter there is
// nothing to send; any message is dropped.
type LoopbackTransport struct{}

// Start does nothing: nothing arrives.
func (LoopbackTransport) Start(Receiver) {}

// Send drops msgs.
func (LoopbackTransport) Send(msgs []*pb.Message) {}

// SetPeers does nothing.
func (LoopbackTransport) SetPeers(map[uint64]string) {}

// SendJoin drops the request.
func (LoopbackTransport) SendJoin(uint64, JoinRequest) {}
