package tests

// DescribeProducers (KIP-664) through kadm: the active producers of a
// partition with their epoch and last sequence, and the first offset of an
// open transaction, which is how an operator finds a hanging transaction's
// producer; and the same at a partition's new leader after a failover.

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// describeProducer returns producer pid of topic-0 as DescribeProducers
// shows it.
func describeProducer(t *testing.T, adm *kadm.Client, topic string, pid int64) (kadm.DescribedProducer, error) {
	t.Helper()
	ds, err := adm.DescribeProducers(ctxT(t, 10*time.Second), kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		return kadm.DescribedProducer{}, err
	}
	dp, ok := ds[topic].Partitions[0]
	if !ok {
		return kadm.DescribedProducer{}, fmt.Errorf("partition %s-0 not described: %+v", topic, ds)
	}
	if dp.Err != nil {
		return kadm.DescribedProducer{}, fmt.Errorf("partition %s-0: %w", topic, dp.Err)
	}
	p, ok := dp.ActiveProducers[pid]
	if !ok {
		return kadm.DescribedProducer{}, fmt.Errorf("producer %d not among %+v", pid, dp.ActiveProducers)
	}
	return p, nil
}

func TestTxnDescribeProducers(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "dp", 1, nil)
	adm := tc.Admin(t, n.Addr())
	start := time.Now().Add(-time.Minute).UnixMilli()

	// An idempotent producer writes offsets 0-2 (sequences 0-2).
	idem := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("dp"))
	for _, v := range []string{"i0", "i1", "i2"} {
		produceSync(t, idem, &kgo.Record{Value: []byte(v)})
	}
	idemPID, idemEpoch, err := idem.ProducerID(ctxT(t, 10*time.Second))
	must(t, "idempotent ProducerID", err)

	// A transactional producer opens a transaction at offset 3 (3-4).
	tx := txnProducer(t, n.Addr(), "dp-tx", kgo.DefaultProduceTopic("dp"))
	must(t, "BeginTransaction", tx.BeginTransaction())
	produceSync(t, tx, &kgo.Record{Value: []byte("t0")})
	produceSync(t, tx, &kgo.Record{Value: []byte("t1")})
	txPID, txEpoch, err := tx.ProducerID(ctxT(t, 10*time.Second))
	must(t, "transactional ProducerID", err)

	p, err := describeProducer(t, adm, "dp", idemPID)
	must(t, "DescribeProducers", err)
	if p.ProducerEpoch != idemEpoch || p.LastSequence != 2 || p.CurrentTxnStartOffset != -1 ||
		p.CoordinatorEpoch != -1 || p.LastTimestamp < start || p.Leader != 1 {
		t.Fatalf("idempotent producer %d epoch %d: %+v", idemPID, idemEpoch, p)
	}
	p, err = describeProducer(t, adm, "dp", txPID)
	must(t, "DescribeProducers", err)
	if p.ProducerEpoch != txEpoch || p.LastSequence != 1 || p.CurrentTxnStartOffset != 3 || p.LastTimestamp < start ||
		p.CoordinatorEpoch != -1 {
		t.Fatalf("transactional producer %d epoch %d with an open transaction: %+v", txPID, txEpoch, p)
	}

	// After the commit (its marker is written after EndTxn answers) the
	// producer has no open transaction, and the coordinator epoch of the
	// marker (its __transaction_state leader epoch, 0 on a fresh node).
	must(t, "EndTransaction", tx.EndTransaction(ctxT(t, 30*time.Second), kgo.TryCommit))
	poll.Until(t, 10*time.Second, func() error {
		p, err := describeProducer(t, adm, "dp", txPID)
		if err == nil && (p.CurrentTxnStartOffset != -1 || p.ProducerEpoch != txEpoch || p.LastSequence != 1 || p.CoordinatorEpoch != 0) {
			err = fmt.Errorf("after commit: %+v", p)
		}
		return err
	})

	// Unknown partitions and topics, from the broker itself (kadm asks
	// only partitions the metadata knows).
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, tp := range []struct {
		topic string
		part  int32
	}{{"dp", 7}, {"nope", 0}} {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = tp.topic, []int32{tp.part}
		req.Topics = append(req.Topics, rt)
	}
	kr, err := tc.DirectRequest(ctxT(t, 10*time.Second), tc.Client(t, n.Addr()), req)
	must(t, "DescribeProducers request", err)
	resp := kr.(*kmsg.DescribeProducersResponse)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); !errors.Is(err, kerr.UnknownTopicOrPartition) || len(rp.ActiveProducers) != 0 {
				t.Errorf("%s-%d: %v %+v, want UNKNOWN_TOPIC_OR_PARTITION", rt.Topic, rp.Partition, err, rp.ActiveProducers)
			}
		}
	}
	if len(resp.Topics) != 2 {
		t.Fatalf("answered %d topics, want 2", len(resp.Topics))
	}
	ds, err := adm.DescribeProducers(ctxT(t, 10*time.Second), kadm.TopicsSet{"dp": {7: {}}})
	if err == nil {
		err = ds["dp"].Partitions[7].Err
	}
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("kadm DescribeProducers dp-7: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}

// A follower keeps the producer state it copies: after the leader of a
// partition with an open transaction is killed, the new leader describes
// the same producer with the same transaction start, holds read_committed
// readers there (the last stable offset), and ends the transaction with
// the commit's marker.
func TestTxnDescribeProducersAfterFailover(t *testing.T) {
	c := tc.StartCluster(t, 3, "--transaction.state.log.num.partitions", "4")
	adm := clusterAdmin(t, c)
	resp, err := adm.CreateTopic(ctxT(t, 30*time.Second), 1, 3, nil, "dpf")
	if err == nil {
		err = resp.Err
	}
	must(t, "CreateTopic", err)
	tx := tc.Client(t, c.Addrs()[0], kgo.SeedBrokers(c.Addrs()...), kgo.TransactionalID("dpf-tx"),
		kgo.DefaultProduceTopic("dpf"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	must(t, "BeginTransaction", tx.BeginTransaction())
	produceSync(t, tx, &kgo.Record{Value: []byte("t0")}, &kgo.Record{Value: []byte("t1")}, &kgo.Record{Value: []byte("t2")})
	pid, epoch, err := tx.ProducerID(ctxT(t, 10*time.Second))
	must(t, "ProducerID", err)

	check := func(when string, wantStart int64) func() error {
		return func() error {
			p, err := describeProducer(t, adm, "dpf", pid)
			if err == nil && (p.ProducerEpoch != epoch || p.LastSequence != 2 || p.CurrentTxnStartOffset != wantStart) {
				err = fmt.Errorf("%s: %+v, want epoch %d, last sequence 2, transaction start %d", when, p, epoch, wantStart)
			}
			return err
		}
	}
	lso := func(want int64) func() error {
		return func() error {
			ls, err := adm.ListCommittedOffsets(ctxT(t, 10*time.Second), "dpf")
			if err != nil {
				return err
			}
			o, ok := ls.Lookup("dpf", 0)
			if !ok || o.Err != nil || o.Offset != want {
				return fmt.Errorf("read_committed end of dpf-0: %+v, want %d", o, want)
			}
			return nil
		}
	}
	poll.Until(t, 10*time.Second, check("open", 0))
	poll.Until(t, 10*time.Second, lso(0))

	old := partitionLeader(t, adm, "dpf", 0)
	c.Kill(old)
	poll.Until(t, 20*time.Second, func() error {
		if l := partitionLeader(t, adm, "dpf", 0); l == old {
			return fmt.Errorf("node %d still leads dpf-0", l)
		}
		return nil
	})
	poll.Until(t, 20*time.Second, check("open, at the new leader", 0))
	poll.Until(t, 10*time.Second, lso(0)) // not 3: the transaction is still open

	must(t, "EndTransaction", tx.EndTransaction(ctxT(t, 30*time.Second), kgo.TryCommit))
	poll.Until(t, 20*time.Second, check("committed", -1))
	poll.Until(t, 20*time.Second, lso(4)) // three records and the marker
}
