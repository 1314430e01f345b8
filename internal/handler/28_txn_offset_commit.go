package handler

// TxnOffsetCommit, versions 0-6: a transactional producer commits a
// consumer group's offsets inside its transaction, at the group's
// coordinator (NOT_COORDINATOR elsewhere), with KIP-447's checks of the
// member id and generation (v3+; UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID). The offsets are pending, and answered once durable,
// until the transaction's marker reaches the group's __consumer_offsets
// partition: COMMIT makes them the committed offsets, ABORT drops them
// (internal/group/txn_offsets.go). Before that the group coordinator asks
// the producer's transaction coordinator (txn_verify.go) to check that the
// group's __consumer_offsets partition is in the ongoing transaction (v0-4,
// added by AddOffsetsToTxn; when transaction.partition.verification.enable
// is set) or to add it (v5+, Transactions V2, sent without
// AddOffsetsToTxn): not in the transaction is TRANSACTION_ABORTABLE
// (INVALID_TXN_STATE before v4), a fenced producer INVALID_PRODUCER_EPOCH,
// a coordinator that cannot answer COORDINATOR_LOAD_IN_PROGRESS. v6 names
// topics by id (UNKNOWN_TOPIC_ID for an id the cluster does not know).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/txn"
)

func init() { register(28, 0, 6, (*Broker).txnOffsetCommit) }

func (b *Broker) txnOffsetCommit(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.TxnOffsetCommitRequest)
	switch {
	case !b.authorized(req, opWrite, rTxnID, r.TransactionalID):
		return now(txnOffsetCommitError(r, kerr.TransactionalIDAuthorizationFailed)), nil
	case b.groupDenied(req, opRead, r.Group):
		return now(txnOffsetCommitError(r, kerr.GroupAuthorizationFailed)), nil
	}
	r, denied := b.txnOffsetCommitDenied(req, r)
	withDenied := func(resp kmsg.Response) kmsg.Response {
		if tr, ok := resp.(*kmsg.TxnOffsetCommitResponse); ok {
			tr.Topics = append(tr.Topics, denied.Topics...)
		}
		return resp
	}
	if len(r.Topics) == 0 && len(denied.Topics) > 0 {
		return now(denied), nil
	}
	add := r.Version >= 5 // v5+ is Transactions V2
	if owns, loading := b.Groups.Owns(r.Group); owns && !loading && r.TransactionalID != "" && (add || b.verifyEnabled()) {
		tp := txn.TopicPartition{Topic: txn.OffsetsTopic, Partition: metadata.PartitionForKey(r.Group, b.offsetsPartitions())}
		if err := b.txnEnsure(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, []txn.TopicPartition{tp}, add)[tp]; err != nil {
			b.log.Debug("transactional offset commit refused by its coordinator", "transactional_id", r.TransactionalID,
				"group", r.Group, "err", err)
			return now(withDenied(txnOffsetCommitError(r, txnCheckCode(err, 28, r.Version)))), nil
		}
	}
	reply := later(req.Conn, func(respond func(*kmsg.TxnOffsetCommitResponse)) { b.Groups.TxnOffsetCommit(r, respond) })
	return func() kmsg.Response { return withDenied(reply()) }, nil
}

// txnOffsetCommitDenied splits a TxnOffsetCommit's topics: those the
// principal may READ go on (the request returned), the others are
// answered TOPIC_AUTHORIZATION_FAILED (denied's topics), as Kafka does.
func (b *Broker) txnOffsetCommitDenied(req *server.Request, r *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitRequest, *kmsg.TxnOffsetCommitResponse) {
	im := b.image()
	rest := *r
	rest.Topics = nil
	var refused kmsg.TxnOffsetCommitRequest
	refused.Version = r.Version
	for _, t := range r.Topics {
		if b.topicDenied(req, im, opRead, t.Topic, t.TopicID, r.Version >= 6) {
			refused.Topics = append(refused.Topics, t)
		} else {
			rest.Topics = append(rest.Topics, t)
		}
	}
	return &rest, txnOffsetCommitError(&refused, kerr.TopicAuthorizationFailed)
}

// txnOffsetCommitError answers every partition of r with err.
func txnOffsetCommitError(r *kmsg.TxnOffsetCommitRequest, err *kerr.Error) *kmsg.TxnOffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, err.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
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

// offsetsPartitions is the partition count of __consumer_offsets.
func (b *Broker) offsetsPartitions() int32 {
	if t := b.image().Topic(txn.OffsetsTopic); t != nil {
		return int32(len(t.Partitions))
	}
	return int32(b.Broker.Int("offsets.topic.num.partitions"))
}
