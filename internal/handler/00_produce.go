package handler

// Produce, versions 3-13 (v0-2 carry message format v0/v1, which Berth does
// not store; Kafka 4 dropped them too). acks 0, 1 and -1. With
// durability.mode=fsync (the default) acks=1 is answered once the batch is
// fsync'd on the leader (group commit), acks=-1 once it is fsync'd on every
// in-sync replica (the high watermark passed it), and refused with
// NOT_ENOUGH_REPLICAS while the ISR is below min.insync.replicas
// (NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank during the wait). Topic ids (v13+) are
// served, and NOT_LEADER_OR_FOLLOWER names the current leader (KIP-951,
// leaders.go). Transactional batches (with a producer id) open the
// producer's transaction on the partition until a WriteTxnMarkers COMMIT
// or ABORT ends it. With a TransactionalID, the first batch of a
// transaction on a partition is first checked with (v3-11, when
// transaction.partition.verification.enable is set) or enlisted at (v12+,
// Transactions V2) the producer's transaction coordinator
// (txn_verify.go): a partition not in the transaction gets
// TRANSACTION_ABORTABLE (INVALID_TXN_STATE before v11), a fenced producer
// INVALID_PRODUCER_EPOCH, a coordinator that cannot answer
// NOT_ENOUGH_REPLICAS (retriable). Not honoured: per-record errors
// (ErrorRecords).

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/latency"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
	"github.com/berthmq/berth/internal/txn"
)

func init() { register(0, 3, 13, (*Broker).produce) }

type produceWait struct {
	p       *replica.Partition
	durable int64
	gen     uint64
	out     *kmsg.ProduceResponseTopicPartition
}

func (b *Broker) produce(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	if r.Acks != 0 && r.Acks != 1 && r.Acks != -1 {
		return b.produceError(r, resp, kerr.InvalidRequiredAcks), nil
	}
	if r.TransactionID != nil && !b.authorized(req, opWrite, rTxnID, *r.TransactionID) ||
		r.TransactionID == nil && auth.Enabled(b.Authorizer) && hasTransactionalBatch(r) {
		// Kafka: transactional records need WRITE on the request's
		// transactional id, so a request without one cannot carry them.
		return b.produceError(r, resp, kerr.TransactionalIDAuthorizationFailed), nil
	}
	stages := &b.Replicas.Metrics.Stages
	start := time.Now()
	if !req.Received.IsZero() {
		stages.Observe(latency.Queue, start.Sub(req.Received))
	}
	im := b.image()
	denied, allowed := b.produceDenied(req, r, im)
	checks := b.checkTxnBatches(ctx, allowed, im)
	scratch := batch.GetScratch()
	defer batch.PutScratch(scratch)
	var waits []produceWait
	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(r.Topics))
	for ti, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		t, terr := lookupTopic(im, rt.Topic, rt.TopicID, r.Version >= 13)
		if denied[ti] {
			t, terr = nil, kerr.TopicAuthorizationFailed
		}
		if terr == nil {
			terr = b.internalTopicRefused(req, t, "append to")
		}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			if terr != nil {
				sp.ErrorCode = code(terr)
				continue
			}
			p, err := b.partition(t, rp.Partition)
			if err == nil && r.Acks == -1 {
				err = b.checkMinISR(t, p)
			}
			if err == nil && b.Schemas != nil && ValidatesSchemas(t) {
				err = b.Schemas.Check(t, rp.Records, scratch)
			}
			var res replica.AppendResult
			if err == nil {
				if c, ok := checks[txn.TopicPartition{Topic: t.Name, Partition: rp.Partition}]; ok {
					switch {
					case c.err != nil:
						err = c.err
					case c.guarded:
						res, err = p.AppendChecked(rp.Records, scratch, c.guard)
					default:
						res, err = p.Append(rp.Records, scratch)
					}
				} else {
					res, err = p.Append(rp.Records, scratch)
				}
			}
			if err != nil {
				sp.ErrorCode = code(err)
				if r.Version >= 8 {
					sp.ErrorMessage = errMsg(err)
					var ir *InvalidRecords
					if errors.As(err, &ir) {
						fillRecordErrors(sp, ir)
					}
				}
				b.logProduceError(t.Name, rp.Partition, req, err)
				continue
			}
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
			waits = append(waits, produceWait{p: p, durable: res.Durable, gen: res.Gen, out: sp})
		}
		resp.Topics = append(resp.Topics, st)
	}
	stages.Since(latency.Validate, start)
	if r.Acks == 0 {
		return nil, nil
	}
	if len(waits) == 0 {
		fillProduceLeaders(im, resp)
		produceHintsOn(im, listenerOf(req), resp)
		return now(resp), nil
	}
	timeout := time.Duration(r.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	return func() kmsg.Response {
		for _, w := range waits {
			if err := w.p.WaitDurable(w.durable, w.gen, deadline, r.Acks == -1); err != nil {
				w.out.ErrorCode = code(err)
				w.out.BaseOffset = -1
				if r.Version >= 8 {
					w.out.ErrorMessage = errMsg(err)
				}
			}
		}
		im := b.image()
		fillProduceLeaders(im, resp)
		produceHintsOn(im, listenerOf(req), resp)
		return resp
	}, nil
}

// produceError answers every partition of a request with one error.
func (b *Broker) produceError(r *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, err *kerr.Error) server.Reply {
	if r.Acks == 0 {
		return nil
	}
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, err.Code
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}

func (b *Broker) logProduceError(topic string, part int32, req *server.Request, err error) {
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, replica.ErrDiskLow):
		b.log.Debug("produce refused", "topic", topic, "partition", part, "client", req.ClientID, "err", err)
	default:
		b.log.Warn("produce refused", "topic", topic, "partition", part, "client", req.ClientID,
			"remote", req.Conn.Remote, "err", err)
	}
}

// txnCheck is a transactional batch's verdict from its coordinator: its
// error, or the guard to append it with (verified batches; an enlisted
// Transactions V2 batch needs none: a marker ending its transaction
// carries a higher epoch than the batch, which the epoch check refuses).
type txnCheck struct {
	err     error
	guard   replica.TxnGuard
	guarded bool
}

// checkTxnBatches asks the transaction coordinator about the transactional
// batches of r that open a transaction on their partition (txn_verify.go)
// and returns the verdict of each; partitions not listed append as usual.
func (b *Broker) checkTxnBatches(ctx context.Context, r *kmsg.ProduceRequest, im *metadata.Image) map[txn.TopicPartition]txnCheck {
	if r.TransactionID == nil || *r.TransactionID == "" {
		return nil
	}
	add := r.Version >= 12
	if !add && !b.verifyEnabled() {
		return nil
	}
	type producer struct {
		pid   int64
		epoch int16
	}
	var (
		out   map[txn.TopicPartition]txnCheck
		parts = map[producer][]txn.TopicPartition{}
	)
	for _, rt := range r.Topics {
		t, err := lookupTopic(im, rt.Topic, rt.TopicID, r.Version >= 13)
		if err != nil {
			continue
		}
		for _, rp := range rt.Partitions {
			h, err := batch.ParseHeader(rp.Records)
			if err != nil || !h.Transactional() || h.ProducerID < 0 {
				continue // Append refuses or takes it as it is
			}
			p, err := b.partition(t, rp.Partition)
			if err != nil {
				continue
			}
			g, need := p.NeedsTxnCheck(h.ProducerID, h.ProducerEpoch)
			if !need {
				continue
			}
			tp := txn.TopicPartition{Topic: t.Name, Partition: rp.Partition}
			if out == nil {
				out = map[txn.TopicPartition]txnCheck{}
			}
			out[tp] = txnCheck{guard: g, guarded: !add}
			k := producer{h.ProducerID, h.ProducerEpoch}
			parts[k] = append(parts[k], tp)
		}
	}
	for k, tps := range parts {
		for tp, err := range b.txnEnsure(ctx, *r.TransactionID, k.pid, k.epoch, tps, add) {
			c := out[tp]
			if err != nil {
				c.err = txnCheckCode(err, 0, r.Version)
				b.log.Debug("transactional batch refused by its coordinator", "transactional_id", *r.TransactionID,
					"topic", tp.Topic, "partition", tp.Partition, "producer", k.pid, "epoch", k.epoch, "err", err)
			}
			out[tp] = c
		}
	}
	return out
}

// produceDenied checks WRITE on each topic of r (an idempotent producer
// needs nothing more: Kafka's IDEMPOTENT_WRITE is implied by WRITE on a
// topic, KIP-679). It returns the refused topics by index and r without
// them, for the transaction coordinator's checks.
func (b *Broker) produceDenied(req *server.Request, r *kmsg.ProduceRequest, im *metadata.Image) (map[int]bool, *kmsg.ProduceRequest) {
	var denied map[int]bool
	for i, rt := range r.Topics {
		if b.topicDenied(req, im, opWrite, rt.Topic, rt.TopicID, r.Version >= 13) {
			if denied == nil {
				denied = map[int]bool{}
			}
			denied[i] = true
		}
	}
	if denied == nil {
		return nil, r
	}
	allowed := *r
	allowed.Topics = nil
	for i, rt := range r.Topics {
		if !denied[i] {
			allowed.Topics = append(allowed.Topics, rt)
		}
	}
	return denied, &allowed
}

// hasTransactionalBatch reports whether a partition of r carries a
// transactional batch.
func hasTransactionalBatch(r *kmsg.ProduceRequest) bool {
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			if h, err := batch.ParseHeader(rp.Records); err == nil && h.Transactional() {
				return true
			}
		}
	}
	return false
}
