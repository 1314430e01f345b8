package tests

// What replication does not promise, shown on purpose: acks=1 and unclean
// leader election lose acknowledged records on a leader failover. Both use
// five voters (the metadata quorum outlives the faults) and one partition
// on brokers 1-3, led by broker 1.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// readPartition0 reads partition 0 of the fault topic up to its high
// watermark and returns value → offset.
func (r *faultRig) readPartition0() map[string]int64 {
	r.t.Helper()
	// A new leader's high watermark can trail the old one's until its
	// followers fetch; with no producer running it reaches the log end
	// once they have, so wait for that before reading.
	r.waitFor(20*time.Second, "partition 0's high watermark at its log end on the leader", func() error {
		s, _, err := r.meta(4, faultTopic)
		if err != nil {
			return err
		}
		id := s[0].Leader
		if id < 0 {
			return fmt.Errorf("no leader")
		}
		hw, err := r.metric(id, fmt.Sprintf(`berth_partition_high_watermark{partition="0",topic="%s"}`, faultTopic))
		if err != nil {
			return err
		}
		leo, err := r.metric(id, fmt.Sprintf(`berth_partition_log_end_offset{partition="0",topic="%s"}`, faultTopic))
		if err == nil && hw != leo {
			err = fmt.Errorf("leader %d: high watermark %v, log end %v", id, hw, leo)
		}
		return err
	})
	var end int64
	r.waitFor(20*time.Second, "partition 0's end offset", func() error {
		adm := kadm.NewClient(tc.Client(r.t, r.c.Addrs()[0], kgo.SeedBrokers(r.c.Addrs()...)))
		lo, err := adm.ListEndOffsets(ctxT(r.t, 5*time.Second), faultTopic)
		if err == nil {
			err = lo.Error()
		}
		if err == nil {
			o, _ := lo.Lookup(faultTopic, 0)
			end = o.Offset
		}
		return err
	})
	got, err := tc.ConsumeTo(ctxT(r.t, 30*time.Second), r.c.Addrs(), faultTopic, map[int32]int64{0: end})
	if err != nil {
		r.h.Fail(r.t, r.c.Dir, "reading partition 0: %v", err)
	}
	out := map[string]int64{}
	for _, g := range got {
		out[g.Value] = g.Offset
	}
	return out
}

// produceUntilOK produces the values to partition 0 through node id with
// acks=all, retrying (bounded) while the node is still taking up the
// leadership its metadata already shows.
func (r *faultRig) produceUntilOK(id int32, tid [16]byte, values ...string) {
	r.t.Helper()
	r.waitFor(10*time.Second, fmt.Sprintf("acks=all produce of %v through node %d", values, id), func() error {
		code, err := r.rawProduceTo(id, tid, 0, 5*time.Second, values...)
		if err == nil && code != 0 {
			err = kerr.ErrorForCode(code)
		}
		return err
	})
}

// waitLeader waits until node from sees partition 0 led by one of want
// (or by anyone but not when want is empty) and returns its state.
func (r *faultRig) waitLeader(from int32, within time.Duration, ok func(partState) bool) partState {
	r.t.Helper()
	var st partState
	r.waitFor(within, "partition 0's leader", func() error {
		s, _, err := r.meta(from, faultTopic)
		if err != nil {
			return err
		}
		if st = s[0]; !ok(st) {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	return st
}

// acks=1 is acknowledged by the leader alone: records it acknowledged
// while its followers were not fetching (paused for less than
// replica.lag.time.max.ms, so still in the ISR) are gone once it dies and
// a follower takes over. acks=all records are not acknowledged then.
func TestClusterAcks1LosesWritesOnFailover(t *testing.T) {
	r := newFaultRigOn(t, 5, []int32{1, 2, 3}, 1)
	r.waitLeader(4, 10*time.Second, func(s partState) bool { return s.Leader == 1 })
	tid := r.topicID(1)
	r.produceUntilOK(1, tid, "before1-1", "before2-1")

	r.c.Pause(2)
	r.c.Pause(3)
	r.h.Fault("SIGSTOP followers 2 and 3")
	var lost []string
	for i := range 5 {
		v := fmt.Sprintf("acks1n%d-1", i)
		code, off, err := r.rawProduceAcks(1, 1, tid, 0, 2*time.Second, v)
		r.h.Fault("acks=1 produce of %s to leader 1: %s at offset %d", v, errName(code, err), off)
		if err != nil || code != 0 {
			r.h.Fail(t, r.c.Dir, "acks=1 produce with the followers paused: %s", errName(code, err))
		}
		lost = append(lost, v)
	}
	code, err := r.rawProduceTo(1, tid, 0, 500*time.Millisecond, "acksall-1")
	r.h.Fault("acks=all produce of acksall-1 to leader 1: %s", errName(code, err))
	if err == nil && code == 0 {
		r.h.Fail(t, r.c.Dir, "acks=all acknowledged with both followers paused")
	}
	r.c.Kill(1)
	r.c.Resume(2)
	r.c.Resume(3)
	r.h.Fault("killed leader 1 (kill -9); SIGCONT 2 and 3")
	st := r.waitLeader(4, resumeBound, func(s partState) bool { return s.Leader == 2 || s.Leader == 3 })
	r.h.Fault("partition 0 led by %d at epoch %d", st.Leader, st.Epoch)

	got := r.readPartition0()
	for _, v := range []string{"before1-1", "before2-1"} {
		if _, ok := got[v]; !ok {
			r.h.Fail(t, r.c.Dir, "acks=all record %s lost", v)
		}
	}
	var gone []string
	for _, v := range lost {
		if _, ok := got[v]; !ok {
			gone = append(gone, v)
		}
	}
	r.h.Fault("acks=1 records lost: %v", gone)
	// A fetch each follower had waiting at the leader when it was paused
	// may still carry the first record to it; none of the others can.
	for _, v := range lost[1:] {
		if !slices.Contains(gone, v) {
			r.h.Fail(t, r.c.Dir, "%s, acknowledged with acks=1 while no follower could fetch it, survived the failover", v)
		}
	}
	// The old leader, back, truncates them: they are gone for good.
	r.c.Restart(1)
	r.waitFullISR(st.Leader, rejoinBound)
	got = r.readPartition0()
	for _, v := range gone {
		if _, ok := got[v]; ok {
			r.h.Fail(t, r.c.Dir, "%s reappeared after the old leader came back", v)
		}
	}
	t.Logf("acks=1: %d acknowledged records lost on failover; acks=all records kept", len(gone))
}

// With unclean.leader.election.enable, a replica that fell out of the ISR
// becomes leader when every in-sync replica is down: the partition is
// available again, and the records acknowledged while it was out are lost.
func TestClusterUncleanElectionLosesAckedWrites(t *testing.T) {
	r := newFaultRigOn(t, 5, []int32{1, 2, 3}, 1)
	ctx := ctxT(t, 60*time.Second)
	adm := kadm.NewClient(tc.Client(t, r.c.Addrs()[0], kgo.SeedBrokers(r.c.Addrs()...)))
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "unclean.leader.election.enable", Value: kadm.StringPtr("true")}}, faultTopic); err != nil {
		t.Fatal(err)
	}
	r.waitLeader(4, 10*time.Second, func(s partState) bool { return s.Leader == 1 })
	tid := r.topicID(1)
	r.produceUntilOK(1, tid, "early-1")
	r.c.Kill(3)
	r.h.Fault("killed follower 3 (kill -9)")
	r.waitLeader(4, resumeBound, func(s partState) bool { return s.Leader == 1 && slices.Equal(s.ISR, []int32{1, 2}) })
	r.h.Fault("ISR [1 2]")
	var acked []string
	for i := range 5 {
		v := fmt.Sprintf("late%d-1", i)
		code, err := r.rawProduceTo(1, tid, 0, 5*time.Second, v)
		r.h.Fault("acks=all produce of %s with ISR [1 2]: %s", v, errName(code, err))
		if err != nil || code != 0 {
			r.h.Fail(t, r.c.Dir, "produce with ISR [1 2]: %s", errName(code, err))
		}
		acked = append(acked, v)
	}
	r.c.Kill(1)
	r.c.Kill(2)
	r.h.Fault("killed 1 and 2, the whole ISR")
	r.c.Restart(3)
	st := r.waitLeader(4, resumeBound, func(s partState) bool { return s.Leader == 3 })
	r.h.Fault("unclean election: partition 0 led by 3 at epoch %d, ISR %v", st.Epoch, st.ISR)

	got := r.readPartition0()
	if _, ok := got["early-1"]; !ok {
		r.h.Fail(t, r.c.Dir, "early-1, on every replica, is missing")
	}
	for _, v := range acked {
		if _, ok := got[v]; ok {
			r.h.Fail(t, r.c.Dir, "%s, acknowledged while node 3 was out of the ISR, is on the unclean leader", v)
		}
	}
	code, _, err := r.rawProduceAcks(3, 1, tid, 0, 5*time.Second, "after-1")
	r.h.Fault("acks=1 produce to the unclean leader: %s", errName(code, err))
	if err != nil || code != 0 {
		r.h.Fail(t, r.c.Dir, "acks=1 produce after the unclean election: %s", errName(code, err))
	}
	// The old ISR comes back and truncates to the new leader's log.
	r.c.Start(1, 2)
	r.waitFullISR(3, rejoinBound)
	got = r.readPartition0()
	for _, v := range acked {
		if _, ok := got[v]; ok {
			r.h.Fail(t, r.c.Dir, "%s reappeared after the old ISR came back", v)
		}
	}
	if _, ok := got["after-1"]; !ok {
		r.h.Fail(t, r.c.Dir, "after-1, written to the unclean leader, is missing")
	}
	t.Logf("unclean election: partition available again at epoch %d; %d acknowledged records lost", st.Epoch, len(acked))
}
