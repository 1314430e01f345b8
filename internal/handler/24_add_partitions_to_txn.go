package handler

// AddPartitionsToTxn, versions 0-5. v0-3 is the client form: the producer
// adds the partitions it is about to write to its ongoing transaction, at
// the transaction coordinator of its transactional id (NOT_COORDINATOR on
// another node). v4-5 is the broker form (KIP-890), which partition
// leaders and group coordinators send (txn_verify.go): several
// transactions in one request, each either added (v5: for a Transactions
// V2 producer, whose Produce v12+ and TxnOffsetCommit v5+ enlist the
// partition; the transaction begins if it was not ongoing) or, with
// VerifyOnly, only checked (a partition not in the ongoing transaction
// gets INVALID_TXN_STATE, nothing is written); NOT_COORDINATOR and other
// errors are per transaction, on each of its partitions. A partition
// whose topic or index does not exist gets UNKNOWN_TOPIC_OR_PARTITION and
// the others of its transaction OPERATION_NOT_ATTEMPTED, as in Kafka;
// otherwise every partition gets the coordinator's answer
// (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2, KIP-588). Not
// honoured: CLUSTER_ACTION authorization of v4-5 (Berth has no ACLs).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/txn"
)

func init() { register(24, 0, 5, (*Broker).addPartitionsToTxn) }

func (b *Broker) addPartitionsToTxn(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	im := b.image()
	if r.Version >= 4 && !b.authorizedCluster(req, opClusterAction) { // the broker form
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp), nil
	}
	if r.Version < 4 {
		topics := make([]kmsg.AddPartitionsToTxnRequestTransactionTopic, len(r.Topics))
		for i, t := range r.Topics {
			topics[i] = kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: t.Topic, Partitions: t.Partitions}
		}
		codes := b.txnAddDenied(req, r.TransactionalID, topics)
		if codes == nil {
			codes = b.addTxnPartitions(ctx, im, r.Version, r.TransactionalID, r.ProducerID, r.ProducerEpoch, false, topics)
		}
		for i, t := range r.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[i][j]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return now(resp), nil
	}
	for _, tx := range r.Transactions {
		codes := b.addTxnPartitions(ctx, im, r.Version, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly, tx.Topics)
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		for i, t := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[i][j]
				rt.Partitions = append(rt.Partitions, rp)
			}
			rtx.Topics = append(rtx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return now(resp), nil
}

// addTxnPartitions adds (or, verifyOnly, checks) one transaction's
// partitions and returns the error code of each, indexed like topics.
func (b *Broker) addTxnPartitions(ctx context.Context, im *metadata.Image, version int16, id string, pid int64, epoch int16,
	verifyOnly bool, topics []kmsg.AddPartitionsToTxnRequestTransactionTopic) [][]int16 {
	codes := make([][]int16, len(topics))
	var parts []txn.TopicPartition
	unknown := false
	for i, t := range topics {
		codes[i] = make([]int16, len(t.Partitions))
		mt := im.Topic(t.Topic)
		for j, p := range t.Partitions {
			if mt == nil || mt.Partition(p) == nil {
				unknown = true
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			}
			parts = append(parts, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	if unknown {
		for i := range codes {
			for j, c := range codes[i] {
				if c == 0 {
					codes[i][j] = kerr.OperationNotAttempted.Code
				}
			}
		}
		return codes
	}
	setAll := func(err error) {
		for i := range codes {
			for j := range codes[i] {
				codes[i][j] = code(err)
			}
		}
	}
	if !verifyOnly {
		tv := txn.TV0
		if version >= 5 {
			tv = txn.TV2 // a partition leader enlisting for a Transactions V2 producer
		}
		res := b.txnDoWaiting(ctx, id, func(tp *txn.Partition, t time.Time) txn.Result {
			return tp.AddPartitions(txn.AddRequest{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch,
				Partitions: parts, ClientVersion: tv}, t)
		})
		setAll(txn.FencedFor(res.Err, 24, version))
		return codes
	}
	var (
		missing []txn.TopicPartition
		verr    error
	)
	p, err := b.txnPartition(id)
	if err == nil {
		err = b.Txns.View(p, func(tp *txn.Partition) { missing, verr = tp.Verify(id, pid, epoch, parts) })
	}
	if err == nil {
		err = verr
	}
	if err != nil {
		setAll(err)
		return codes
	}
	for i, t := range topics {
		for j, p := range t.Partitions {
			for _, m := range missing {
				if m.Topic == t.Topic && m.Partition == p {
					codes[i][j] = kerr.InvalidTxnState.Code
				}
			}
		}
	}
	return codes
}

// txnAddDenied checks the client form of AddPartitionsToTxn: WRITE on the
// transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
// and on each topic (the refused ones TOPIC_AUTHORIZATION_FAILED, the others
// OPERATION_NOT_ATTEMPTED). nil: allowed.
func (b *Broker) txnAddDenied(req *server.Request, id string, topics []kmsg.AddPartitionsToTxnRequestTransactionTopic) [][]int16 {
	codes := make([][]int16, len(topics))
	fill := func(i int, c int16) {
		codes[i] = make([]int16, len(topics[i].Partitions))
		for j := range codes[i] {
			codes[i][j] = c
		}
	}
	if !b.authorized(req, opWrite, rTxnID, id) {
		for i := range topics {
			fill(i, kerr.TransactionalIDAuthorizationFailed.Code)
		}
		return codes
	}
	denied := false
	for i, t := range topics {
		if !b.authorized(req, opWrite, rTopic, t.Topic) {
			denied = true
			fill(i, kerr.TopicAuthorizationFailed.Code)
		} else {
			fill(i, kerr.OperationNotAttempted.Code)
		}
	}
	if !denied {
		return nil
	}
	return codes
}
