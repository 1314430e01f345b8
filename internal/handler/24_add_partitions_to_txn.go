package handler

// AddPartitionsToTxn, versions 0-3 (the client form): the producer adds
// the partitions it is about to write to its ongoing transaction, at the
// transaction coordinator of its transactional id (NOT_COORDINATOR on
// another node). A partition whose topic or index does not exist gets
// UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as
// in Kafka; otherwise every partition gets the coordinator's answer
// (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2, KIP-588). Not
// served yet: v4+ (the batched and verify-only forms partition leaders
// send, KIP-890), so Produce does not verify that a transactional
// batch's partition was added.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/txn"
)

func init() { register(24, 0, 3, (*Broker).addPartitionsToTxn) }

func (b *Broker) addPartitionsToTxn(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	im := b.image()
	var parts []txn.TopicPartition
	unknown := false
	for _, t := range r.Topics {
		mt := im.Topic(t.Topic)
		for _, p := range t.Partitions {
			if mt == nil || mt.Partition(p) == nil {
				unknown = true
			}
			parts = append(parts, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	var err error
	if !unknown {
		res := b.txnDo(ctx, r.TransactionalID, func(tp *txn.Partition, t time.Time) txn.Result {
			return tp.AddPartitions(txn.AddRequest{TransactionalID: r.TransactionalID, ProducerID: r.ProducerID,
				ProducerEpoch: r.ProducerEpoch, Partitions: parts, ClientVersion: txn.TV0}, t)
		})
		err = txn.FencedFor(res.Err, 24, r.Version)
	}
	for _, t := range r.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		mt := im.Topic(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			switch {
			case !unknown:
				rp.ErrorCode = code(err)
			case mt == nil || mt.Partition(p) == nil:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				rp.ErrorCode = kerr.OperationNotAttempted.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return now(resp), nil
}
