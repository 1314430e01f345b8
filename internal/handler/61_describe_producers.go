package handler

// DescribeProducers (key 61), version 0 (KIP-664): the active idempotent
// and transactional producers of each partition this node leads, from the
// partition's producer state (replica.Partition.Producers): producer id,
// epoch, last sequence (-1 when no batch of the current epoch is cached),
// last timestamp (when the partition last saw a batch or marker of the
// producer: the leader's append time in ms), the coordinator epoch of its
// last transaction marker on the partition (-1 before any, or when the
// state came from a snapshot that did not keep it) and the first offset of
// its open transaction on the partition (-1 when none), which is how an
// operator finds the producer of a hanging transaction. Errors per
// partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER. Not
// honoured: no TOPIC_AUTHORIZATION_FAILED (Berth has no ACLs).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(61, 0, 0, (*Broker).describeProducers) }

func (b *Broker) describeProducers(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeProducersRequest)
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	im := b.image()
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(r.Topics))
	for i, rt := range r.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t, terr := b.lookupTopicFor(req, im, opRead, rt.Topic, [16]byte{}, false)
		st.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(rt.Partitions))
		for j, idx := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			err := terr
			if err == nil {
				err = b.activeProducers(t, idx, sp)
			}
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage = code(err), errMsg(err)
			}
		}
	}
	return now(resp), nil
}

// activeProducers fills sp with the producers of partition idx of t when
// this node leads it.
func (b *Broker) activeProducers(t *metadata.Topic, idx int32, sp *kmsg.DescribeProducersResponseTopicPartition) error {
	p, err := b.partition(t, idx)
	if err != nil {
		return err
	}
	if !p.IsLeader() {
		// Metadata names this node but the replica has not taken over yet.
		return kerr.NotLeaderForPartition
	}
	for _, pi := range p.Producers() {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.Epoch)
		ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
		ap.CoordinatorEpoch = pi.CoordinatorEpoch
		ap.CurrentTxnStartOffset = pi.TxnStartOffset
		sp.ActiveProducers = append(sp.ActiveProducers, ap)
	}
	return nil
}
