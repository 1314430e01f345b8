package handler

// WriteTxnMarkers (key 27), versions 0-2, broker to broker: the
// transaction coordinator asks each partition leader to end a producer's
// transaction with a COMMIT or ABORT control batch. Each marker is appended
// through the partition's normal path (replicated like any batch) and
// answered once the high watermark passes it, as Kafka answers an acks=all
// write; an ABORT joins the partition's aborted transactions, and the last
// stable offset moves past the transaction. Errors per partition:
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH
// (a marker from an older producer epoch than the partition has seen),
// TRANSACTION_COORDINATOR_FENCED (a CoordinatorEpoch below that of the
// producer's last marker on the partition, as Kafka checks: a deposed
// coordinator's late marker; the coordinator sends its __transaction_state
// leader epoch, which a failover raises), NOT_ENOUGH_REPLICAS,
// REQUEST_TIMED_OUT. Not honoured yet: the
// TransactionVersion field (v2) is read but not checked; there is no
// CLUSTER_ACTION authorization (Berth has no ACLs).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(27, 0, 2, (*Broker).writeTxnMarkers) }

// markerTimeout bounds the wait for a marker to become durable on the ISR.
const markerTimeout = 30 * time.Second

func (b *Broker) writeTxnMarkers(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	im := b.image()
	type wait struct {
		p       *replica.Partition
		durable int64
		gen     uint64
		out     *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
		pid     int64
		commit  bool
	}
	var waits []wait
	denied := !b.authorizedCluster(req, opClusterAction)
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(r.Markers))
	for i, m := range r.Markers {
		rm := &resp.Markers[i]
		*rm = kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		typ := batch.ControlAbort
		if m.Committed {
			typ = batch.ControlCommit
		}
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for j, mt := range m.Topics {
			rt := &rm.Topics[j]
			*rt = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			t := im.Topic(mt.Topic)
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(mt.Partitions))
			for k, idx := range mt.Partitions {
				rp := &rt.Partitions[k]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = idx
				if denied {
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
					continue
				}
				if t == nil {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				p, err := b.partition(t, idx)
				if err == nil {
					err = b.checkMinISR(t, p)
				}
				var res replica.AppendResult
				if err == nil {
					res, err = p.AppendMarker(m.ProducerID, m.ProducerEpoch, typ, m.CoordinatorEpoch)
				}
				if err != nil {
					rp.ErrorCode = code(err)
					b.log.Debug("transaction marker refused", "topic", mt.Topic, "partition", idx,
						"producer", m.ProducerID, "epoch", m.ProducerEpoch, "err", err)
					continue
				}
				waits = append(waits, wait{p: p, durable: res.Durable, gen: res.Gen, out: rp, pid: m.ProducerID, commit: m.Committed})
			}
		}
	}
	if len(waits) == 0 {
		return now(resp), nil
	}
	deadline := time.Now().Add(markerTimeout)
	return func() kmsg.Response {
		for _, w := range waits {
			err := w.p.WaitDurable(w.durable, w.gen, deadline, true)
			if err == nil && w.p.Topic == metadata.OffsetsTopic {
				// The group coordinator commits or drops the producer's
				// transactional offsets (28_txn_offset_commit.go).
				err = b.completeTxnOffsets(w.p.Index, w.pid, w.commit, deadline)
			}
			if err != nil {
				w.out.ErrorCode = code(err)
			}
		}
		return resp
	}, nil
}
