package tests

// The transaction coordinator on a three-node cluster: markers to
// partition leaders on other nodes, a coordinator killed in the middle of
// a transaction, whose successor replays __transaction_state and commits
// it, and a partition leader killed as the markers go out.

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// produceTxnCluster sends a transactional batch to the leader of
// topic/partition, retrying while leadership moves.
func produceTxnCluster(t *testing.T, c *tc.Cluster, adm func() map[int32]int32, id [16]byte, topic string, partition int32,
	pid int64, epoch int16, seq int32, values ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader := adm()[partition]
		var err error
		if leader > 0 && c.Node(leader).Running() {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 10000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = topic, id
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = partition, txnBatch(pid, epoch, seq, values...)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			var resp kmsg.Response
			resp, err = tc.DirectRequest(ctxT(t, 15*time.Second), c.Direct(t, leader), req)
			if err == nil {
				err = kerr.ErrorForCode(resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
			}
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("producing to %s/%d: %v", topic, partition, err)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
}

func TestTxnCoordinatorClusterFailover(t *testing.T) {
	c := tc.StartCluster(t, 3, "--transaction.state.log.num.partitions", "4")
	seeds := c.Addrs()
	adm := tc.Admin(t, seeds[0])
	if _, err := adm.CreateTopic(ctxT(t, 30*time.Second), 3, 3, nil, "out"); err != nil {
		t.Fatal(err)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50 * time.Millisecond)}
	cl := txnV1Client(t, seeds[0], opts...)
	var topicID [16]byte
	leaders := func() map[int32]int32 {
		out := map[int32]int32{}
		td, err := adm.ListTopics(ctxT(t, 10*time.Second), "out")
		if err != nil {
			return out
		}
		if id := td["out"].ID; id != ([16]byte{}) {
			topicID = id // a broker that has not applied the topic yet answers without it
		}
		for _, p := range td["out"].Partitions {
			out[p.Partition] = p.Leader
		}
		return out
	}
	// Every produce names the topic by id: wait until it is known (a
	// broker that has not applied the new topic answers without it).
	poll.Until(t, 10*time.Second, func() error {
		if leaders(); topicID == ([16]byte{}) {
			return errors.New("topic out not known yet")
		}
		return nil
	})
	committed := newConsumer(t, seeds[0], "out", kgo.ReadCommitted())
	waitSet := func(want ...string) {
		t.Helper()
		slices.Sort(want)
		deadline := time.Now().Add(60 * time.Second)
		for {
			got := slices.Clone(committed.poll(t, 500*time.Millisecond))
			slices.Sort(got)
			if slices.Equal(got, want) {
				return
			}
			if len(got) > len(want) || time.Now().After(deadline) {
				t.Fatalf("read_committed consumed %q, want %q", got, want)
			}
		}
	}

	// A transaction over three partitions led by different nodes.
	pid, epoch, err := initTxnPID(t, cl, "tx-c", 60000, -1, -1)
	must(t, "InitProducerId", err)
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-c", pid, epoch, "out", 0, 1, 2))
	for p := int32(0); p < 3; p++ {
		produceTxnCluster(t, c, leaders, topicID, "out", p, pid, epoch, 0, "a"+string(rune('0'+p)))
	}
	must(t, "EndTxn", endTxn(t, cl, "tx-c", pid, epoch, true))
	waitSet("a0", "a1", "a2")
	rc, err := adm.DescribeTopicConfigs(ctxT(t, 10*time.Second), "__transaction_state")
	must(t, "DescribeConfigs", err)
	if v, err := rc.On("__transaction_state", nil); err != nil || !slices.ContainsFunc(v.Configs, func(c kadm.Config) bool {
		return c.Key == "min.insync.replicas" && c.MaybeValue() == "2"
	}) {
		t.Fatalf("__transaction_state configs: %+v %v, want min.insync.replicas 2", v.Configs, err)
	}

	// The coordinator dies with the next transaction open; its successor
	// replays it and commits it.
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-c", pid, epoch, "out", 0, 1, 2))
	for p := int32(0); p < 3; p++ {
		produceTxnCluster(t, c, leaders, topicID, "out", p, pid, epoch, 1, "b"+string(rune('0'+p)))
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey = 1, "tx-c"
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	must(t, "FindCoordinator", err)
	if resp.ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	c.Kill(resp.NodeID)
	if err := endTxn(t, cl, "tx-c", pid, epoch, true); err != nil && !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("EndTxn after the coordinator died: %v", err)
	} else if err != nil {
		t.Fatalf("EndTxn after the coordinator died: fenced, the successor lost the transaction")
	}
	waitSet("a0", "a1", "a2", "b0", "b1", "b2")

	// A partition leader dies as the commit's markers go out: the
	// coordinator writes the marker to the partition's next leader.
	c.Restart(resp.NodeID)
	must(t, "AddPartitionsToTxn", addTxnPartition(t, cl, "tx-c", pid, epoch, "out", 0, 1, 2))
	for p := int32(0); p < 3; p++ {
		produceTxnCluster(t, c, leaders, topicID, "out", p, pid, epoch, 2, "c"+string(rune('0'+p)))
	}
	victim := leaders()[1]
	must(t, "EndTxn", endTxn(t, cl, "tx-c", pid, epoch, true))
	c.Kill(victim)
	waitSet("a0", "a1", "a2", "b0", "b1", "b2", "c0", "c1", "c2")
}
