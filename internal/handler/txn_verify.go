package handler

// Transaction verification and Transactions V2 enlistment (KIP-890), the
// partition leader's and the group coordinator's side. Before the first
// transactional batch of a producer's transaction is appended to a
// partition (Produce) and before a transaction's offsets are stored for a
// group (TxnOffsetCommit), the node asks the producer's transaction
// coordinator — itself, or another broker with AddPartitionsToTxn v4/v5 —
// either to check that the partition is in the ongoing transaction
// (KIP-890 part 1, Produce < v12 and TxnOffsetCommit < v5, when
// transaction.partition.verification.enable is set) or to add it
// (Transactions V2: Produce v12+ and TxnOffsetCommit v5+, which clients
// send without AddPartitionsToTxn/AddOffsetsToTxn). CONCURRENT_TRANSACTIONS
// (the previous transaction's markers are still going out) and a
// coordinator that is moving or loading are retried here for a short
// while, as Kafka's add.partitions.to.txn.retry.backoff.* do, before the
// client is told to retry.

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/txn"
)

// txnCheckTimeout bounds one ask of the transaction coordinator;
// txnCheckRetryFor bounds the retries of transient answers.
const (
	txnCheckTimeout  = 10 * time.Second
	txnCheckRetryFor = time.Second
)

// verifyEnabled says whether pre-V2 transactional writes are verified.
func (b *Broker) verifyEnabled() bool {
	return b.Broker == nil || b.Broker.Bool("transaction.partition.verification.enable")
}

// txnEnsure asks the coordinator of transactional id id to add (add) or
// check parts in producer pid/epoch's ongoing transaction. It returns the
// error of each partition (nil: in the transaction).
func (b *Broker) txnEnsure(ctx context.Context, id string, pid int64, epoch int16, parts []txn.TopicPartition, add bool) map[txn.TopicPartition]error {
	backoff := 20 * time.Millisecond
	giveUp := time.Now().Add(txnCheckRetryFor)
	for {
		out := b.txnEnsureOnce(ctx, id, pid, epoch, parts, add)
		retry := false
		for _, err := range out {
			if txnCheckTransient(err) {
				retry = true
			}
		}
		if !retry || time.Now().Add(backoff).After(giveUp) {
			return out
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// txnCheckTransient reports whether err is worth asking again soon.
func txnCheckTransient(err error) bool {
	if err == nil {
		return false
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return true // the coordinator could not be reached
	}
	switch ke {
	case kerr.ConcurrentTransactions, kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.RequestTimedOut:
		return true
	}
	return false
}

func (b *Broker) txnEnsureOnce(ctx context.Context, id string, pid int64, epoch int16, parts []txn.TopicPartition, add bool) map[txn.TopicPartition]error {
	out := make(map[txn.TopicPartition]error, len(parts))
	setAll := func(err error) map[txn.TopicPartition]error {
		for _, tp := range parts {
			out[tp] = err
		}
		return out
	}
	im := b.image()
	p, err := b.txnPartition(id)
	if err != nil {
		return setAll(err)
	}
	mp := im.Topic(txn.Topic).Partition(p)
	if mp == nil || mp.Leader < 0 {
		return setAll(kerr.CoordinatorNotAvailable)
	}
	// The request as a coordinator sees it: v5 adds for a Transactions V2
	// producer, v4 with VerifyOnly checks.
	version := int16(4)
	if add {
		version = 5
	}
	x := kmsg.NewAddPartitionsToTxnRequestTransaction()
	x.TransactionalID, x.ProducerID, x.ProducerEpoch, x.VerifyOnly = id, pid, epoch, !add
	for _, tp := range parts {
		if n := len(x.Topics); n == 0 || x.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			t.Topic = tp.Topic
			x.Topics = append(x.Topics, t)
		}
		last := &x.Topics[len(x.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	ctx, cancel := context.WithTimeout(ctx, txnCheckTimeout)
	defer cancel()
	if mp.Leader == b.NodeID {
		codes := b.addTxnPartitions(ctx, im, version, id, pid, epoch, !add, x.Topics)
		for i, t := range x.Topics {
			for j, part := range t.Partitions {
				out[txn.TopicPartition{Topic: t.Topic, Partition: part}] = kerr.ErrorForCode(codes[i][j])
			}
		}
		return out
	}
	br, ok := im.Broker(mp.Leader)
	if !ok || b.Peers == nil {
		return setAll(kerr.CoordinatorNotAvailable)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = version
	req.Transactions = append(req.Transactions, x)
	raw, err := b.Peers.Request(ctx, net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))), req, txnCheckTimeout)
	if err != nil {
		b.log.Debug("asking the transaction coordinator", "transactional_id", id, "coordinator", mp.Leader, "err", err)
		return setAll(err)
	}
	resp := raw.(*kmsg.AddPartitionsToTxnResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return setAll(err)
	}
	for _, rx := range resp.Transactions {
		for _, rt := range rx.Topics {
			for _, rp := range rt.Partitions {
				out[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = kerr.ErrorForCode(rp.ErrorCode)
			}
		}
	}
	for _, tp := range parts {
		if _, ok := out[tp]; !ok {
			out[tp] = kerr.UnknownServerError
		}
	}
	return out
}

// txnCheckCode is the error a Produce (key 0) or TxnOffsetCommit (key 28)
// of the given version answers for a failed check: a partition not in the
// transaction is TRANSACTION_ABORTABLE for clients that know it (Produce
// v11+, TxnOffsetCommit v4+) and INVALID_TXN_STATE before; a fenced
// producer is INVALID_PRODUCER_EPOCH; a coordinator that could not answer
// is retriable (NOT_ENOUGH_REPLICAS for Produce, as Kafka answers older
// clients; COORDINATOR_LOAD_IN_PROGRESS for TxnOffsetCommit).
func txnCheckCode(err error, key, version int16) *kerr.Error {
	var ke *kerr.Error
	if !errors.As(err, &ke) || txnCheckTransient(err) {
		if key == 0 {
			return kerr.NotEnoughReplicas
		}
		return kerr.CoordinatorLoadInProgress
	}
	switch ke {
	case kerr.InvalidTxnState:
		if (key == 0 && version >= 11) || (key == 28 && version >= 4) {
			return kerr.TransactionAbortable
		}
		return kerr.InvalidTxnState
	case kerr.ProducerFenced, kerr.InvalidProducerEpoch:
		return kerr.InvalidProducerEpoch
	}
	return ke
}
