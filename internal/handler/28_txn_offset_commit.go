package handler

// TxnOffsetCommit, versions 0-3: a transactional producer commits a
// consumer group's offsets inside its transaction, at the group's
// coordinator (NOT_COORDINATOR elsewhere), with KIP-447's checks of the
// member id and generation (v3+; UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID). The offsets are pending, and answered once durable,
// until the transaction's marker reaches the group's __consumer_offsets
// partition: COMMIT makes them the committed offsets, ABORT drops them
// (internal/group/txn_offsets.go). Not served: v4-5 (Transactions V2).
// Not honoured: the group coordinator does not check with the transaction
// coordinator that the group's partition was added to the transaction;
// OffsetFetch's RequireStable does not wait for pending offsets.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(28, 0, 3, (*Broker).txnOffsetCommit) }

func (b *Broker) txnOffsetCommit(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.TxnOffsetCommitRequest)
	return later(req.Conn, func(respond func(*kmsg.TxnOffsetCommitResponse)) { b.Groups.TxnOffsetCommit(r, respond) }), nil
}

// completeTxnOffsets is called by WriteTxnMarkers once a marker is durable
// on a __consumer_offsets partition: the group coordinator commits or
// drops the producer's pending offsets there, and the marker counts as
// written only once that is durable too.
func (b *Broker) completeTxnOffsets(partition int32, producerID int64, commit bool, deadline time.Time) error {
	if b.Groups == nil {
		return nil
	}
	done := make(chan error, 1)
	b.Groups.CompleteTxnOffsets(partition, producerID, commit, func(err error) { done <- err })
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return kerr.RequestTimedOut
	}
}
