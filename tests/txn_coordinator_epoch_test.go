package tests

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// A marker from a coordinator older than the one that wrote the
// producer's last marker (a zombie coordinator retrying the markers of a
// transaction its successor already completed) is refused with
// TRANSACTION_COORDINATOR_FENCED, as in Kafka: at the same producer epoch
// (Transactions V1, or the transaction after a V2 one) it would otherwise
// end the producer's next transaction on that partition.
func TestTxnStaleCoordinatorMarkerFenced(t *testing.T) {
	dir := t.TempDir()
	n := tc.StartIn(t, dir)
	tc.CreateTopic(t, n.Addr(), "txn", 1, nil)
	cl := tc.Client(t, n.Addr())
	pid, epoch := initPID(t, cl)

	produceTxn(t, cl, "txn", pid, epoch, 0, "a0")
	if ec := writeMarkerFrom(t, cl, "txn", pid, epoch, true, 5); ec != 0 {
		t.Fatalf("commit from coordinator epoch 5: %v", kerr.ErrorForCode(ec))
	}
	produceTxn(t, cl, "txn", pid, epoch, 1, "b0") // the next transaction, same producer epoch
	if ec := writeMarkerFrom(t, cl, "txn", pid, epoch, true, 3); ec != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("commit from the older coordinator epoch 3: %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(ec))
	}
	if ec := writeMarkerFrom(t, cl, "txn", pid, epoch, false, 5); ec != 0 {
		t.Fatalf("abort from coordinator epoch 5: %v", kerr.ErrorForCode(ec))
	}
	newConsumer(t, n.Addr(), "txn", kgo.ReadCommitted()).waitFor(t, "a0")
	if c := latest(t, cl, "txn", 1); c != 4 {
		t.Fatalf("read_committed latest %d, want 4 (a0, commit, b0, abort)", c)
	}

	// The partition remembers the coordinator epoch across a restart.
	n.Close()
	n = tc.StartIn(t, dir)
	cl = tc.Client(t, n.Addr())
	produceTxn(t, cl, "txn", pid, epoch, 2, "c0")
	if ec := writeMarkerFrom(t, cl, "txn", pid, epoch, false, 4); ec != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("abort from the older coordinator epoch 4 after a restart: %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(ec))
	}
	if ec := writeMarkerFrom(t, cl, "txn", pid, epoch, true, 6); ec != 0 {
		t.Fatalf("commit from coordinator epoch 6: %v", kerr.ErrorForCode(ec))
	}
	newConsumer(t, n.Addr(), "txn", kgo.ReadCommitted()).waitFor(t, "a0", "c0")
}

// A follower learns the coordinator epoch from the replicated marker: once
// it leads, it refuses the older coordinator's marker too.
func TestTxnStaleCoordinatorMarkerFencedAfterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of berth processes")
	}
	c := tc.StartCluster(t, 3)
	seeds := c.Addrs()
	adm := tc.Admin(t, seeds[0])
	if _, err := adm.CreateTopic(ctxT(t, 30*time.Second), 1, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, "txn"); err != nil {
		t.Fatal(err)
	}
	var topicID [16]byte
	leaders := func() map[int32]int32 {
		out := map[int32]int32{}
		td, err := adm.ListTopics(ctxT(t, 10*time.Second), "txn")
		if err != nil {
			return out
		}
		if id := td["txn"].ID; id != ([16]byte{}) {
			topicID = id // a broker that has not applied the topic yet answers without it
		}
		for _, p := range td["txn"].Partitions {
			if p.Err == nil && c.Node(p.Leader).Running() {
				out[p.Partition] = p.Leader
			}
		}
		return out
	}
	// marker sends WriteTxnMarkers to the partition's leader, retrying
	// while leadership moves, and returns its answer.
	marker := func(pid int64, epoch int16, commit bool, coordinatorEpoch int32) int16 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var ec int16 = -1
			if leader := leaders()[0]; leader > 0 {
				req := kmsg.NewPtrWriteTxnMarkersRequest()
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordinatorEpoch
				mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				mt.Topic, mt.Partitions = "txn", []int32{0}
				m.Topics = append(m.Topics, mt)
				req.Markers = append(req.Markers, m)
				resp, err := tc.DirectRequest(ctxT(t, 15*time.Second), c.Direct(t, leader), req)
				if err == nil {
					ec = resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
				}
				if ec == 0 || ec == kerr.TransactionCoordinatorFenced.Code || ec == kerr.InvalidProducerEpoch.Code {
					return ec
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("WriteTxnMarkers: %v", kerr.ErrorForCode(ec))
			}
			time.Sleep(50 * time.Millisecond) // polling with a deadline
		}
	}
	cl := tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...))
	pid, epoch := initPID(t, cl)
	// Every produce names the topic by id: wait until it is known (a
	// broker that has not applied the new topic answers without it).
	poll.Until(t, 10*time.Second, func() error {
		if leaders(); topicID == ([16]byte{}) {
			return errors.New("topic txn not known yet")
		}
		return nil
	})
	produceTxnCluster(t, c, leaders, topicID, "txn", 0, pid, epoch, 0, "a0")
	if ec := marker(pid, epoch, true, 5); ec != 0 {
		t.Fatalf("commit from coordinator epoch 5: %v", kerr.ErrorForCode(ec))
	}
	produceTxnCluster(t, c, leaders, topicID, "txn", 0, pid, epoch, 1, "b0")
	old := leaders()[0]
	c.Kill(old)
	if ec := marker(pid, epoch, true, 3); ec != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("commit from the older coordinator epoch 3 at the new leader: %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(ec))
	}
	if ec := marker(pid, epoch, false, 5); ec != 0 {
		t.Fatalf("abort from coordinator epoch 5: %v", kerr.ErrorForCode(ec))
	}
	c.Restart(old)
	newConsumer(t, seeds[0], "txn", kgo.ReadCommitted()).waitFor(t, "a0")
}

// SIGKILL, so no fresh producer snapshot: the replay of the log restores
// the coordinator epoch from the marker itself.
func TestTxnStaleCoordinatorMarkerFencedAfterCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a broker process")
	}
	p := tc.StartProcess(t, t.TempDir())
	tc.CreateTopic(t, p.Addr(), "txn", 1, nil)
	cl := tc.Client(t, p.Addr())
	pid, epoch := initPID(t, cl)
	produceTxn(t, cl, "txn", pid, epoch, 0, "a0")
	if ec := writeMarkerFrom(t, cl, "txn", pid, epoch, true, 5); ec != 0 {
		t.Fatalf("commit from coordinator epoch 5: %v", kerr.ErrorForCode(ec))
	}
	produceTxn(t, cl, "txn", pid, epoch, 1, "b0")
	cl.Close()
	p.Kill()
	p.Restart()
	cl = tc.Client(t, p.Addr())
	if ec := writeMarkerFrom(t, cl, "txn", pid, epoch, true, 3); ec != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("commit from the older coordinator epoch 3 after a crash: %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(ec))
	}
	if ec := writeMarkerFrom(t, cl, "txn", pid, epoch, false, 5); ec != 0 {
		t.Fatalf("abort from coordinator epoch 5: %v", kerr.ErrorForCode(ec))
	}
	newConsumer(t, p.Addr(), "txn", kgo.ReadCommitted()).waitFor(t, "a0")
}
