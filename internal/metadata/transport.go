package metadata

import (
	pb "go.etcd.io/raft/v3/raftpb"
)

// Transport sends Raft messages to other voters. The Ready loop calls Send
// after the entries and HardState of the same Ready are durable, as Raft
// requires. Send must not block for long (queue and return); lost messages
// are fine, Raft retries. Messages a peer receives are handed to its
// Controller.Step.
//
// A network implementation must also report unreachable peers and snapshot
// delivery through Controller (not yet exposed; see docs/format/metadata.md
// "Cluster"), since a MsgSnap needs ReportSnapshot.
type Transport interface {
	Send(msgs []*pb.Message)
}

// LoopbackTransport is the one-voter transport. Raft never addresses
// messages to the local node through Ready, so with a single voter there is
// nothing to send; any message is dropped.
type LoopbackTransport struct{}

// Send drops msgs.
func (LoopbackTransport) Send(msgs []*pb.Message) {}
