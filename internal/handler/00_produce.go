package handler

// Produce, versions 3-13 (v0-2 carry message format v0/v1, which Berth does
// not store; Kafka 4 dropped them too). acks 0, 1 and -1. With
// durability.mode=fsync (the default) acks=1 is answered once the batch is
// fsync'd on the leader (group commit), acks=-1 once it is fsync'd on every
// in-sync replica (the high watermark passed it), and refused with
// NOT_ENOUGH_REPLICAS while the ISR is below min.insync.replicas
// (NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank during the wait). Topic ids (v13+) are
// served, and NOT_LEADER_OR_FOLLOWER names the current leader (KIP-951,
// leaders.go). Transactional batches (with a producer id) are accepted and
// open the producer's transaction on the partition until a WriteTxnMarkers
// COMMIT or ABORT ends it; a request with a TransactionalID is a
// transactional producer's (the coordinator is internal/app/txn.go). Not
// honoured yet: nothing checks that a transactional batch's partition was
// added to a transaction (KIP-890's verification); per-record errors
// (ErrorRecords).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(0, 3, 13, (*Broker).produce) }

type produceWait struct {
	p       *replica.Partition
	durable int64
	gen     uint64
	out     *kmsg.ProduceResponseTopicPartition
}

func (b *Broker) produce(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	if r.Acks != 0 && r.Acks != 1 && r.Acks != -1 {
		return b.produceError(r, resp, kerr.InvalidRequiredAcks), nil
	}
	im := b.image()
	scratch := batch.GetScratch()
	defer batch.PutScratch(scratch)
	var waits []produceWait
	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(r.Topics))
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		t, terr := lookupTopic(im, rt.Topic, rt.TopicID, r.Version >= 13)
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
			var res replica.AppendResult
			if err == nil {
				res, err = p.Append(rp.Records, scratch)
			}
			if err != nil {
				sp.ErrorCode = code(err)
				if r.Version >= 8 {
					sp.ErrorMessage = errMsg(err)
				}
				b.logProduceError(t.Name, rp.Partition, req, err)
				continue
			}
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
			waits = append(waits, produceWait{p: p, durable: res.Durable, gen: res.Gen, out: sp})
		}
		resp.Topics = append(resp.Topics, st)
	}
	if r.Acks == 0 {
		return nil, nil
	}
	if len(waits) == 0 {
		fillProduceLeaders(im, resp)
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
		fillProduceLeaders(b.image(), resp)
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

// lookupTopic finds a request's topic by name, or by id when byID.
func lookupTopic(im *metadata.Image, name string, id [16]byte, byID bool) (*metadata.Topic, error) {
	if byID {
		if t := im.TopicByID(id); t != nil {
			return t, nil
		}
		return nil, kerr.UnknownTopicID
	}
	if t := im.Topic(name); t != nil {
		return t, nil
	}
	return nil, kerr.UnknownTopicOrPartition
}

// partition returns the local leader replica of a topic partition.
func (b *Broker) partition(t *metadata.Topic, idx int32) (*replica.Partition, error) {
	mp := t.Partition(idx)
	if mp == nil {
		return nil, fmt.Errorf("%w: topic %q has no partition %d", kerr.UnknownTopicOrPartition, t.Name, idx)
	}
	if mp.Leader != b.NodeID {
		return nil, kerr.NotLeaderForPartition
	}
	p := b.Replicas.Get(t.Name, idx)
	if p == nil || p.TopicID != t.ID {
		// Metadata knows it but the log is not open (yet): retriable.
		return nil, kerr.NotLeaderForPartition
	}
	return p, nil
}

// checkMinISR refuses acks=all writes while fewer replicas are in sync than
// min.insync.replicas asks for.
func (b *Broker) checkMinISR(t *metadata.Topic, p *replica.Partition) error {
	mp := t.Partition(p.Index)
	if min := p.Config().MinInsyncReplicas; len(mp.ISR) < min {
		return fmt.Errorf("%w: %d in-sync replica(s), min.insync.replicas is %d", kerr.NotEnoughReplicas, len(mp.ISR), min)
	}
	return nil
}
