package handler

// DescribeTransactions, version 0: the state, timeout, start, producer id
// and epoch and partitions of each transactional id, from its transaction
// coordinator (NOT_COORDINATOR per id on another node,
// TRANSACTIONAL_ID_NOT_FOUND for an unknown id). No authorization (Berth
// has no ACLs).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/txn"
)

func init() { register(65, 0, 0, (*Broker).describeTransactions) }

func (b *Broker) describeTransactions(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range r.TransactionalIDs {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID, s.ProducerID, s.ProducerEpoch, s.StartTimestamp = id, -1, -1, -1
		if !b.authorized(req, opDescribe, rTxnID, id) {
			s.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, s)
			continue
		}
		var d txn.Description
		p, err := b.txnPartition(id)
		if err == nil {
			err = b.Txns.View(p, func(tp *txn.Partition) { d = tp.Describe(id) })
		}
		if err == nil {
			err = d.Err
		}
		if err != nil {
			s.ErrorCode = code(err)
			resp.TransactionStates = append(resp.TransactionStates, s)
			continue
		}
		s.State, s.TimeoutMillis, s.StartTimestamp = d.State, d.TimeoutMs, d.StartMs
		s.ProducerID, s.ProducerEpoch = d.ProducerID, d.ProducerEpoch
		for _, tp := range d.Partitions {
			if b.authzOn && !b.mayQuietly(req, opDescribe, rTopic, tp.Topic) {
				continue // Kafka leaves out the topics the caller may not describe
			}
			if n := len(s.Topics); n == 0 || s.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic = tp.Topic
				s.Topics = append(s.Topics, t)
			}
			last := &s.Topics[len(s.Topics)-1]
			last.Partitions = append(last.Partitions, tp.Partition)
		}
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	return now(resp), nil
}
