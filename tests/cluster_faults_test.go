package tests

// Fault tests of a three-process cluster (issue 4): RF=3,
// min.insync.replicas=2, idempotent acks=all producers on every partition
// while brokers are killed, paused, cut off the metadata quorum and
// restarted. Every run logs its seed (replay: BERTH_FAULT_SEED) and, on
// failure, names the history file and the nodes' logs (kept under
// $BERTH_FAULT_HISTORY_DIR when set).

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// Killing the leader of each partition in turn (SIGKILL, then restart)
// under load loses no acknowledged record, duplicates none, keeps per-key
// order, and writes to every partition resume within resumeBound.
func TestClusterKillLeaderOfEveryPartition(t *testing.T) {
	r := newFaultRig(t, 3)
	l := r.startLoad()
	for _, i := range r.rng.Perm(int(r.parts)) {
		p := int32(i)
		st := r.state(r.c.IDs()[0])[p]
		leader := st.Leader
		r.c.Kill(leader)
		at := r.h.Fault("killed node %d (kill -9), leader of partition %d at epoch %d", leader, p, st.Epoch)
		witness := r.others(leader)[0]
		e := r.waitFor(resumeBound, fmt.Sprintf("a new leader of partition %d", p), func() error {
			s, _, err := r.meta(witness, faultTopic)
			if err == nil && (s[p].Leader == leader || s[p].Leader < 0 || s[p].Epoch <= st.Epoch) {
				err = fmt.Errorf("partition %d: %+v", p, s[p])
			}
			return err
		})
		r.h.Fault("node %d sees a new leader of partition %d after %v", witness, p, e.Round(time.Millisecond))
		d := r.waitAcks(at, resumeBound, fmt.Sprintf("writes resumed on every partition after killing node %d", leader))
		t.Logf("killed node %d (leader of %d): new leader after %v, writes resumed on every partition after %v",
			leader, p, e.Round(time.Millisecond), d.Round(time.Millisecond))
		r.c.Restart(leader)
		r.h.Fault("node %d restarted", leader)
		d = r.waitFullISR(leader, rejoinBound)
		r.h.Fault("node %d back in every ISR after %v", leader, d.Round(time.Millisecond))
	}
	r.finish(l)
}

// With two of three brokers killed, no acks=all write is acknowledged
// (the survivor's ISR still names a dead broker it cannot drop without a
// controller quorum, or the ISR is below min.insync.replicas), while the
// committed data of the partitions the survivor leads stays readable.
// Bringing one broker back restores the quorum, and writes resume on every
// partition.
func TestClusterTwoOfThreeDown(t *testing.T) {
	r := newFaultRig(t, 3)
	l := r.startLoad()
	ids := r.c.IDs()
	order := r.rng.Perm(3)
	a, b, c := ids[order[0]], ids[order[1]], ids[order[2]]

	r.c.Kill(b)
	at := r.h.Fault("killed node %d (kill -9)", b)
	// The controller fences b and its partitions fail over to a or c.
	r.waitFor(resumeBound, fmt.Sprintf("node %d out of every ISR and leadership", b), func() error {
		st, _, err := r.meta(a, faultTopic)
		if err != nil {
			return err
		}
		for p, s := range st {
			if s.Leader == b || s.Leader < 0 || slices.Contains(s.ISR, b) {
				return fmt.Errorf("partition %d: %+v", p, s)
			}
		}
		return nil
	})
	r.waitAcks(at, resumeBound, fmt.Sprintf("writes resumed after killing node %d", b))

	before := r.state(a)
	var survivorLeads []int32
	for p, s := range before {
		if s.Leader == a {
			survivorLeads = append(survivorLeads, p)
		}
	}
	slices.Sort(survivorLeads)
	r.c.Kill(c)
	killed := r.h.Fault("killed node %d (kill -9): only node %d runs; it leads partitions %v", c, a, survivorLeads)

	// Nothing is acknowledged any more. An ack may still arrive for a
	// write the dead broker had already fetched, so answers soon after
	// the kill are allowed (acksAfterKill); then watch for 5 s.
	// The partitions the dead nodes led keep them as leaders: without a
	// quorum no election happens, so they have no reachable leader.
	for p, s := range r.state(a) {
		if !slices.Contains(survivorLeads, p) && s.Leader != b && s.Leader != c {
			r.h.Fail(t, r.c.Dir, "partition %d led by %d with nodes %d and %d down and no quorum", p, s.Leader, b, c)
		}
	}
	tid := r.topicID(a)
	for i, p := range survivorLeads {
		v := fmt.Sprintf("probe%d-1", i+1) // a key of its own
		code, err := r.rawProduceTo(a, tid, p, 2*time.Second, v)
		r.h.Fault("acks=all produce of %s to node %d, partition %d: %s", v, a, p, errName(code, err))
		if err == nil && code == 0 {
			r.h.Fail(t, r.c.Dir, "node %d acknowledged %s on partition %d with two of three brokers down", a, v, p)
		}
		if err == nil && !slices.Contains([]int16{kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code}, code) {
			r.h.Fail(t, r.c.Dir, "produce to node %d, partition %d: %s, want NOT_ENOUGH_REPLICAS or a timeout", a, p, errName(code, err))
		}
	}
	for time.Since(killed) < 5*time.Second {
		if n := r.acksAfterKill(killed); len(n) > 0 {
			r.h.Fail(t, r.c.Dir, "acknowledged with two of three brokers down: %v", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.h.Fault("no acknowledgement for %v", time.Since(killed).Round(time.Millisecond))

	// The survivor still serves what was committed on the partitions it
	// leads: every record acknowledged there is read back from it alone.
	if len(survivorLeads) > 0 {
		ends := map[int32]int64{}
		for _, a := range r.h.Acks() {
			if slices.Contains(survivorLeads, a.Partition) {
				ends[a.Partition] = max(ends[a.Partition], a.Offset+1)
			}
		}
		got, err := tc.ConsumeTo(ctxT(t, 30*time.Second), []string{r.c.Node(a).KafkaAddr}, faultTopic, ends)
		if err != nil {
			r.h.Fail(t, r.c.Dir, "reading the survivor's partitions %v from node %d: %v", survivorLeads, a, err)
		}
		have := map[string]bool{}
		for _, g := range got {
			have[fmt.Sprintf("%d/%d/%s", g.Partition, g.Offset, g.Value)] = true
		}
		for _, ak := range r.h.Acks() {
			if slices.Contains(survivorLeads, ak.Partition) && !have[fmt.Sprintf("%d/%d/%s", ak.Partition, ak.Offset, ak.Value)] {
				r.h.Fail(t, r.c.Dir, "acked %s at %d/%d not readable from the survivor", ak.Value, ak.Partition, ak.Offset)
			}
		}
		r.h.Fault("read %d records of partitions %v from node %d alone", len(got), survivorLeads, a)
	}

	back := r.h.Fault("restart node %d", b)
	r.c.Restart(b)
	d := r.waitAcks(back, resumeBound+10*time.Second, fmt.Sprintf("writes resumed on every partition with nodes %d and %d", a, b))
	t.Logf("two of three down: nothing acknowledged; with node %d back, writes resumed %v after its restart began", b, d.Round(time.Millisecond))
	r.c.Restart(c)
	r.h.Fault("node %d restarted", c)
	r.waitFullISR(a, rejoinBound)
	r.finish(l)
}

// Two of a partition's three replicas killed while the metadata quorum
// survives (five voters; the topic on brokers 1-3): the controller shrinks
// the ISR to the survivor, which refuses acks=all writes with
// NOT_ENOUGH_REPLICAS and serves every committed record; bringing one
// replica back lets writes resume once it has caught up.
func TestClusterTwoReplicasDownQuorumUp(t *testing.T) {
	r := newFaultRigOn(t, 5, []int32{1, 2, 3}, 3)
	l := r.startLoad()
	order := r.rng.Perm(3)
	a, b, c := int32(order[0]+1), int32(order[1]+1), int32(order[2]+1)
	r.c.Kill(b)
	r.c.Kill(c)
	killed := r.h.Fault("killed nodes %d and %d (kill -9): of the replicas only node %d runs", b, c, a)
	d := r.waitFor(resumeBound, fmt.Sprintf("node %d the only leader and ISR", a), func() error {
		st, _, err := r.meta(a, faultTopic)
		if err != nil {
			return err
		}
		for p, s := range st {
			if s.Leader != a || !slices.Equal(s.ISR, []int32{a}) {
				return fmt.Errorf("partition %d: %+v", p, s)
			}
		}
		return nil
	})
	r.h.Fault("every partition led by %d with ISR [%d] after %v", a, a, d.Round(time.Millisecond))

	tid := r.topicID(a)
	for p := range r.parts {
		v := fmt.Sprintf("probe%d-1", p)
		code, err := r.rawProduceTo(a, tid, p, 2*time.Second, v)
		r.h.Fault("acks=all produce of %s to node %d, partition %d: %s", v, a, p, errName(code, err))
		if err != nil || code != kerr.NotEnoughReplicas.Code {
			r.h.Fail(t, r.c.Dir, "produce with one replica in sync: %s, want NOT_ENOUGH_REPLICAS", errName(code, err))
		}
	}
	if n := r.acksAfterKill(killed); len(n) > 0 {
		r.h.Fail(t, r.c.Dir, "acknowledged with two of three replicas down: %v", n)
	}
	n := r.checkReadable(a)
	r.h.Fault("read %d records through node %d; every acknowledged one is there", n, a)
	if n := r.acksAfterKill(killed); len(n) > 0 {
		r.h.Fail(t, r.c.Dir, "acknowledged with two of three replicas down: %v", n)
	}

	back := r.h.Fault("restart node %d", b)
	r.c.Restart(b)
	d = r.waitAcks(back, resumeBound, fmt.Sprintf("writes resumed on every partition with nodes %d and %d", a, b))
	t.Logf("two replicas down: NOT_ENOUGH_REPLICAS, reads served; node %d back: writes resumed %v after its restart began", b, d.Round(time.Millisecond))
	r.c.Restart(c)
	r.h.Fault("node %d restarted", c)
	r.waitFullISR(a, rejoinBound)
	r.finish(l)
}

// A leader cut off from the metadata quorum while it keeps running (a
// zombie) acknowledges no acks=all write once the others have elected a
// new leader; after the cut heals it truncates what it appended alone and
// follows, and its log then equals the new leader's.
func TestClusterZombieLeader(t *testing.T) {
	r := newFaultRig(t, 3)
	l := r.startLoad()
	p := int32(r.rng.IntN(int(r.parts)))
	st := r.state(r.c.IDs()[0])
	x := st[p].Leader
	witness := r.others(x)[0]

	r.h.Fault("cut node %d, leader of partition %d at epoch %d, off the metadata quorum", x, p, st[p].Epoch)
	r.c.Cut(x)
	var now partState
	d := r.waitFor(resumeBound, fmt.Sprintf("a new leader of partition %d", p), func() error {
		s, _, err := r.meta(witness, faultTopic)
		if err != nil {
			return err
		}
		for q, qs := range s {
			if qs.Leader == x || qs.Leader < 0 {
				return fmt.Errorf("partition %d: %+v", q, qs)
			}
		}
		now = s[p]
		return nil
	})
	elected := r.h.Fault("node %d sees partition %d led by %d at epoch %d, %v after the cut", witness, p, now.Leader, now.Epoch, d.Round(time.Millisecond))
	if now.Epoch <= st[p].Epoch {
		r.h.Fail(t, r.c.Dir, "new leader of %d without a new epoch: %+v then %+v", p, st[p], now)
	}
	zst, _, err := r.meta(x, faultTopic)
	if err == nil {
		r.h.Fault("the zombie's own view of partition %d: %+v", p, zst[p])
	}

	// The zombie still takes produce requests; none may be acknowledged.
	tid := r.topicID(x)
	var zombie []string
	for i := range 3 {
		v := fmt.Sprintf("zombie%d-1", i+1) // a key of its own
		zombie = append(zombie, v)
		code, err := r.rawProduceTo(x, tid, p, 2*time.Second, v)
		r.h.Fault("acks=all produce of %s to the zombie %d: %s", v, x, errName(code, err))
		if err == nil && code == 0 {
			r.h.Fail(t, r.c.Dir, "the zombie leader %d acknowledged %s on partition %d after the new leader %d was elected", x, v, p, now.Leader)
		}
	}
	r.waitAcks(elected, resumeBound, "writes acknowledged on every partition after the election")

	series := fmt.Sprintf(`berth_partition_log_end_offset{partition="%d",topic="%s"}`, p, faultTopic)
	zLEO, zerr := r.metric(x, series)
	nLEO, nerr := r.metric(now.Leader, series)
	r.h.Fault("before the heal: log end offset of partition %d on the zombie %d: %v %v, on the new leader %d: %v %v", p, x, zLEO, zerr, now.Leader, nLEO, nerr)

	r.h.Fault("heal node %d", x)
	r.c.Heal(x)
	d = r.waitFullISR(witness, rejoinBound)
	r.h.Fault("node %d back in every ISR %v after the heal", x, d.Round(time.Millisecond))
	l.Stop(30 * time.Second)

	// Its log converges with the leader's: the same log end offset...
	r.waitFor(20*time.Second, "the zombie's log end offset equal to the leader's", func() error {
		s, _, err := r.meta(witness, faultTopic)
		if err != nil {
			return err
		}
		lead, err := r.metric(s[p].Leader, series)
		if err != nil {
			return err
		}
		z, err := r.metric(x, series)
		if err != nil {
			return err
		}
		if lead != z {
			return fmt.Errorf("leader %d at %v, node %d at %v", s[p].Leader, lead, x, z)
		}
		return nil
	})
	// ... and the same records: make it the leader again (it is the
	// preferred replica, having led first) and read everything from it.
	if st[p].Replicas[0] == x {
		adm := kadm.NewClient(tc.Client(t, r.c.Addrs()[0]))
		r.waitFor(30*time.Second, fmt.Sprintf("node %d leading partition %d again", x, p), func() error {
			s, _, err := r.meta(witness, faultTopic)
			if err != nil {
				return err
			}
			if s[p].Leader == x {
				return nil
			}
			ctx := ctxT(t, 5*time.Second)
			if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{faultTopic: {p: struct{}{}}}); err != nil {
				return err
			}
			return fmt.Errorf("leader %d", s[p].Leader)
		})
		r.h.Fault("node %d leads partition %d again", x, p)
	} else {
		t.Logf("node %d is not partition %d's preferred replica; its records are compared by log end offset only", x, p)
	}
	r.finish(l, func(got []tc.Consumed) []string {
		var bad []string
		for _, g := range got {
			if slices.Contains(zombie, g.Value) {
				bad = append(bad, fmt.Sprintf("%s, written to the zombie alone, is in the log at %d/%d", g.Value, g.Partition, g.Offset))
			}
		}
		return bad
	})
}

// A follower paused (SIGSTOP) for longer than replica.lag.time.max.ms
// leaves the ISR; resumed, it catches up and rejoins. The broker session
// is longer than the pause here, so the ISR change is the leader's, not
// the controller fencing the broker.
func TestClusterPausedFollowerLeavesAndRejoinsISR(t *testing.T) {
	r := newFaultRig(t, 3, "--broker.session.timeout.ms", "15000")
	l := r.startLoad()
	p := int32(r.rng.IntN(int(r.parts)))
	st := r.state(r.c.IDs()[0])
	leader := st[p].Leader
	followers := r.others(leader)
	f := followers[r.rng.IntN(len(followers))]

	at := r.h.Fault("SIGSTOP node %d, follower of partition %d (leader %d)", f, p, leader)
	r.c.Pause(f)
	d := r.waitFor(10*time.Second, fmt.Sprintf("node %d out of partition %d's ISR", f, p), func() error {
		s, _, err := r.meta(leader, faultTopic)
		if err != nil {
			return err
		}
		if slices.Contains(s[p].ISR, f) {
			return fmt.Errorf("ISR %v", s[p].ISR)
		}
		return nil
	})
	r.h.Fault("node %d left partition %d's ISR after %v", f, p, d.Round(time.Millisecond))
	// The lag counts from the follower's last fetch that reached the end
	// of the log, which can precede the pause by up to one fetch wait
	// (replica.fetch.wait.max.ms, 500 ms) under load: it left early only
	// if it left sooner than the lag bound less that.
	if d < 2*time.Second-500*time.Millisecond {
		r.h.Fail(t, r.c.Dir, "node %d left the ISR after %v, before replica.lag.time.max.ms (less one fetch wait)", f, d)
	}
	var notLed []int32
	for q, s := range st {
		if s.Leader != f {
			notLed = append(notLed, q)
		}
	}
	r.waitAcks(at, resumeBound, "writes acknowledged with the follower paused", notLed...)
	shrinks, err := r.metric(leader, "berth_isr_shrinks_total")
	if err != nil || shrinks < 1 {
		r.h.Fail(t, r.c.Dir, "berth_isr_shrinks_total on the leader %d: %v %v", leader, shrinks, err)
	}

	r.h.Fault("SIGCONT node %d", f)
	r.c.Resume(f)
	left := d
	d = r.waitFullISR(leader, rejoinBound)
	r.h.Fault("node %d back in every ISR after %v", f, d.Round(time.Millisecond))
	t.Logf("paused follower %d left partition %d's ISR after %v and rejoined %v after resuming", f, p,
		left.Round(time.Millisecond), d.Round(time.Millisecond))
	r.finish(l)
}

// Stopping every node (SIGTERM) and starting them again keeps every
// committed record and a consumer group's committed offsets.
func TestClusterFullRestartKeepsDataAndOffsets(t *testing.T) {
	r := newFaultRig(t, 3)
	l := r.startLoad()
	r.waitFor(30*time.Second, "300 acknowledged records", func() error {
		if n := len(r.h.Acks()); n < 300 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})
	l.Stop(30 * time.Second)
	r.h.Fault("load stopped")

	const group = "fault-group"
	cons := tc.Client(t, r.c.Addrs()[0], kgo.SeedBrokers(r.c.Addrs()...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(faultTopic), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxT(t, 60*time.Second)
	read := 0
	for read < 200 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			r.h.Fail(t, r.c.Dir, "group %s read %d records before timeout", group, read)
		}
		read += len(fs.Records())
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		r.h.Fail(t, r.c.Dir, "commit: %v", err)
	}
	adm := kadm.NewClient(tc.Client(t, r.c.Addrs()[0]))
	want, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = want.Error()
	}
	if err != nil || len(want.Offsets()) == 0 {
		r.h.Fail(t, r.c.Dir, "committed offsets of %s: %v %v", group, want, err)
	}
	cons.Close()
	r.h.Fault("group %s committed %v", group, want.Offsets())

	r.h.Fault("SIGTERM every node")
	r.c.StopAll()
	r.h.Fault("start every node")
	r.c.Start(r.c.IDs()...)
	r.h.Fault("every node ready")
	r.waitFullISR(r.c.IDs()[0], rejoinBound)

	adm = kadm.NewClient(tc.Client(t, r.c.Addrs()[0]))
	r.waitFor(30*time.Second, "the group's offsets after the restart", func() error {
		got, err := adm.FetchOffsets(ctxT(t, 5*time.Second), group)
		if err == nil {
			err = got.Error()
		}
		if err != nil {
			return err
		}
		for _, o := range want.Offsets().Sorted() {
			g, ok := got.Lookup(o.Topic, o.Partition)
			if !ok || g.At != o.At {
				return fmt.Errorf("partition %d: committed %d before, %+v after", o.Partition, o.At, g)
			}
		}
		return nil
	})
	r.finish(l)
}

// Killing the active controller: the others elect another, and a metadata
// change (a topic creation) commits; writes go on meanwhile.
func TestClusterControllerFailover(t *testing.T) {
	r := newFaultRig(t, 3)
	l := r.startLoad()
	var ctrl int32
	r.waitFor(10*time.Second, "the active controller", func() error {
		_, id, err := r.meta(r.c.IDs()[0], faultTopic)
		if err == nil && id < 1 {
			err = fmt.Errorf("controller %d", id)
		}
		ctrl = id
		return err
	})
	r.c.Kill(ctrl)
	at := r.h.Fault("killed node %d (kill -9), the active controller", ctrl)
	rest := r.others(ctrl)
	var seeds []string
	for _, id := range rest {
		seeds = append(seeds, r.c.Node(id).KafkaAddr)
	}
	adm := kadm.NewClient(tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...)))
	d := r.waitFor(resumeBound, "a topic creation after the controller died", func() error {
		ctx := ctxT(t, 5*time.Second)
		resp, err := adm.CreateTopic(ctx, 1, 2, nil, "after-failover")
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
	_, newCtrl, err := r.meta(rest[0], faultTopic)
	r.h.Fault("topic created %v after the kill; controller now %d (%v)", d.Round(time.Millisecond), newCtrl, err)
	if newCtrl == ctrl || newCtrl < 1 {
		r.h.Fail(t, r.c.Dir, "controller after failover: %d", newCtrl)
	}
	r.waitAcks(at, resumeBound, "writes resumed after the controller died")
	r.c.Restart(ctrl)
	r.h.Fault("node %d restarted", ctrl)
	r.waitFor(rejoinBound, "the restarted node knowing the new topic", func() error {
		_, _, err := r.meta(ctrl, "after-failover")
		return err
	})
	r.waitFullISR(ctrl, rejoinBound)
	t.Logf("controller %d killed: node %d took over and a topic was created %v after the kill", ctrl, newCtrl, d.Round(time.Millisecond))
	r.finish(l)
}

// A follower cut off the metadata quorum is fenced, yet keeps fetching
// from its leader, which does not change. A fenced broker may not join an
// ISR (KIP-841), so the leader must not propose it while it is fenced:
// before, the leader re-added it on every fetch and the controller took
// it out again, some 75 ISR proposals a second per partition for as long
// as it stayed fenced. It rejoins every ISR promptly once healed.
func TestClusterFencedFollowerStaysOutOfISR(t *testing.T) {
	const parts = 3
	r := newFaultRigOn(t, 3, []int32{1, 2, 3}, parts) // node 1 leads every partition
	const leader, victim = int32(1), int32(3)
	proposals := func() float64 {
		var sum float64
		for _, m := range []string{"berth_isr_expands_total", "berth_isr_shrinks_total"} {
			v, err := r.metric(leader, m)
			if err != nil {
				r.h.Fail(t, r.c.Dir, "%s on node %d: %v", m, leader, err)
			}
			sum += v
		}
		return sum
	}

	r.h.Fault("cut node %d, a follower of every partition, off the metadata quorum", victim)
	r.c.Cut(victim)
	d := r.waitFor(10*time.Second, fmt.Sprintf("node %d out of every ISR", victim), func() error {
		st, _, err := r.meta(leader, faultTopic)
		if err != nil {
			return err
		}
		for p, s := range st {
			if s.Leader != leader || slices.Contains(s.ISR, victim) {
				return fmt.Errorf("partition %d: %+v", p, s)
			}
		}
		return nil
	})
	r.h.Fault("node %d out of every ISR after %v", victim, d.Round(time.Millisecond))

	// Fenced for 3 s while it keeps fetching what is written meanwhile:
	// it stays out of the ISRs, and the leader proposes (next to)
	// nothing.
	before := proposals()
	prod := tc.Client(t, r.c.Node(leader).KafkaAddr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
	end := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		p := int32(i % parts)
		if err := prod.ProduceSync(ctxT(t, 10*time.Second), &kgo.Record{Topic: faultTopic, Partition: p, Value: []byte("while-fenced")}).FirstErr(); err != nil {
			r.h.Fail(t, r.c.Dir, "acks=all produce to partition %d with node %d fenced: %v", p, victim, err)
		}
		st, _, err := r.meta(leader, faultTopic)
		if err != nil {
			r.h.Fail(t, r.c.Dir, "metadata: %v", err)
		}
		for q, s := range st {
			if slices.Contains(s.ISR, victim) {
				r.h.Fail(t, r.c.Dir, "partition %d has the fenced node %d in its ISR again: %+v", q, victim, s)
			}
		}
		time.Sleep(50 * time.Millisecond) // pacing of the observation, not a wait for a state
	}
	n := proposals() - before
	r.h.Fault("ISR proposals by the leader in 3 s with node %d fenced: %v", victim, n)
	if n > parts {
		r.h.Fail(t, r.c.Dir, "the leader proposed %v ISR changes in 3 s while node %d was fenced, want at most %d", n, victim, parts)
	}
	// The fenced follower did keep fetching: it has what was written.
	for p := range int32(parts) {
		series := fmt.Sprintf(`berth_partition_log_end_offset{partition="%d",topic="%s"}`, p, faultTopic)
		r.waitFor(10*time.Second, fmt.Sprintf("node %d's copy of partition %d as long as the leader's", victim, p), func() error {
			l, err := r.metric(leader, series)
			if err != nil {
				return err
			}
			v, err := r.metric(victim, series)
			if err != nil {
				return err
			}
			if v < l || l == 0 {
				return fmt.Errorf("leader at %v, node %d at %v", l, victim, v)
			}
			return nil
		})
	}

	r.h.Fault("heal node %d", victim)
	r.c.Heal(victim)
	d = r.waitFullISR(leader, 10*time.Second)
	r.h.Fault("node %d back in every ISR %v after the heal", victim, d.Round(time.Millisecond))
	t.Logf("%v ISR proposals in 3 s while fenced; back in every ISR %v after the heal", n, d.Round(time.Millisecond))
}
