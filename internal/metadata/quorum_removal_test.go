package metadata

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/berthmq/berth/internal/poll"
)

// checkRemoved checks what a removed node tells its callers: no leader,
// and proposals refused with ErrRemoved (an ErrNotLeader) and advice.
func checkRemoved(t *testing.T, nd *testNode) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() error {
		if err := nd.c.Removed(); err == nil {
			return fmt.Errorf("node %d does not know it was removed", nd.id)
		}
		return nil
	})
	if l := nd.c.Leader(); l != 0 || nd.c.IsLeader() {
		t.Fatalf("removed node %d names leader %d (IsLeader %v)", nd.id, l, nd.c.IsLeader())
	}
	if st := nd.c.Quorum(); !st.Removed || st.Leader != -1 || st.IsLeader {
		t.Fatalf("removed node %d's quorum status: %+v", nd.id, st)
	}
	err := nd.c.Propose(ctx(t), createRec(fmt.Sprintf("from-removed-%d", nd.id), 1))
	if !errors.Is(err, ErrRemoved) || !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), "add-voter") {
		t.Fatalf("Propose on removed node %d: %v, want ErrRemoved with advice", nd.id, err)
	}
	if err := nd.c.AddVoter(ctx(t), 9, "127.0.0.1:1"); !errors.Is(err, ErrRemoved) {
		t.Fatalf("AddVoter on removed node %d: %v, want ErrRemoved", nd.id, err)
	}
}

// A voter removed while it runs learns it, stops naming a controller and
// refuses proposals with ErrRemoved (so the edge answers NOT_CONTROLLER)
// rather than forwarding them to a leader that will never tell it they
// committed; added back as a voter, it catches up and serves again. The
// same holds for a removed active controller, which comes back as an
// observer when restarted from its directory.
func TestQuorumRemovedVoterKeepsRunning(t *testing.T) {
	tc := newTestCluster(t, 3, 1000)
	leader := tc.waitLeader()
	victim := tc.followers(leader)[0]
	proposeRetry(t, victim.c, createRec("before", 1))

	if err := leader.c.RemoveMember(ctx(t), victim.id); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
	checkRemoved(t, victim)
	rest := tc.followers(victim)
	proposeRetry(t, leader.c, createRec("after", 1))
	tc.waitSameImage(leader.c.Image().Index, rest...)
	if victim.c.Image().Topic("after") != nil || victim.c.Image().Topic(fmt.Sprintf("from-removed-%d", victim.id)) != nil {
		t.Fatal("the removed node applied entries after its removal")
	}
	if leader.c.Image().Topic(fmt.Sprintf("from-removed-%d", victim.id)) != nil {
		t.Fatal("a removed node's proposal committed")
	}

	// Added back as a voter at its address, it catches up.
	if err := leader.c.AddVoter(ctx(t), victim.id, victim.addr); err != nil {
		t.Fatalf("AddVoter: %v", err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if err := victim.c.Removed(); err != nil {
			return err
		}
		if m, ok := victim.c.Quorum().Member(NodeID(victim.id)); !ok || !m.Voter {
			return fmt.Errorf("node %d sees itself as %+v", victim.id, m)
		}
		return nil
	})
	leader = tc.waitLeader()
	proposeRetry(t, victim.c, createRec("back", 1))
	tc.waitSameImage(victim.c.Image().Index)

	// Removing the active controller: it steps down and knows why.
	other := tc.followers(leader)[0]
	if err := other.c.RemoveMember(ctx(t), leader.id); err != nil {
		t.Fatalf("RemoveMember of the leader: %v", err)
	}
	old := leader
	checkRemoved(t, old)
	rest = tc.followers(old)
	leader = tc.waitLeader(rest...)
	proposeRetry(t, leader.c, createRec("after-leader", 1))
	tc.waitSameImage(leader.c.Image().Index, rest...)

	// Restarted from its directory, it asks to rejoin as an observer.
	nd := tc.restart(tc.stop(old.id))
	if err := nd.c.Removed(); err != nil {
		t.Fatalf("restarted node: %v", err)
	}
	poll.Until(t, 10*time.Second, func() error {
		for _, n := range tc.live() {
			if m, ok := n.c.Quorum().Member(NodeID(old.id)); !ok || m.Voter || m.Addr != old.addr {
				return fmt.Errorf("node %d sees node %d as %+v (%v)", n.id, old.id, m, ok)
			}
		}
		return nil
	})
	proposeRetry(t, nd.c, createRec("from-observer", 1))
	tc.waitSameImage(nd.c.Image().Index)
}

// A voter that was down while it was removed restarts from its old
// directory believing it is a voter. No leader talks to it; it finds no
// leader, asks to be added, and the leader adds it as an observer: it
// catches up (through entries or a snapshot) past its removal, and then
// proposes as an observer.
func TestQuorumRemovedWhileDownRejoinsAsObserver(t *testing.T) {
	for _, snapEvery := range []uint64{1000, 5} {
		t.Run(fmt.Sprintf("snapshot-every-%d", snapEvery), func(t *testing.T) {
			tc := newTestCluster(t, 3, snapEvery)
			leader := tc.waitLeader()
			down := tc.stop(tc.followers(leader)[0].id)
			leader = tc.waitLeader()
			if err := leader.c.RemoveMember(ctx(t), down.id); err != nil {
				t.Fatalf("RemoveMember: %v", err)
			}
			for i := range 12 {
				proposeRetry(t, leader.c, createRec(fmt.Sprintf("t%02d", i), 1))
			}

			nd := tc.restart(down) // Start returns once a leader talks to it
			tc.waitSameImage(leader.c.Image().Index)
			if nd.c.Image().Topic("t11") == nil {
				t.Fatal("the rejoined node did not catch up")
			}
			if err := nd.c.Removed(); err != nil {
				t.Fatalf("rejoined node: %v", err)
			}
			poll.Until(t, 10*time.Second, func() error {
				for _, n := range tc.live() {
					st := n.c.Quorum()
					m, ok := st.Member(NodeID(down.id))
					if !ok || m.Voter || m.Addr != down.addr || len(st.Members) != 3 {
						return fmt.Errorf("node %d sees %+v", n.id, st.Members)
					}
				}
				return nil
			})
			if nd.c.IsLeader() {
				t.Fatal("the rejoined observer leads")
			}
			proposeRetry(t, nd.c, createRec("from-rejoined", 1))
			tc.waitSameImage(nd.c.Image().Index)
		})
	}
}

// The leader refuses a proposal forwarded by a node that is not a member
// (a removed node that does not know it yet): it would commit without its
// proposer ever learning so.
func TestQuorumLeaderRefusesProposalsFromNonMembers(t *testing.T) {
	tc := newTestCluster(t, 3, 1000)
	leader := tc.waitLeader()
	gone := tc.stop(tc.followers(leader)[0].id)
	leader = tc.waitLeader()
	if err := leader.c.RemoveMember(ctx(t), gone.id); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
	proposeRetry(t, leader.c, createRec("current", 1)) // an entry of the leader's term applied

	data, err := EncodeEntry(gone.id, 1, []Record{createRec("ghost", 1)})
	if err != nil {
		t.Fatal(err)
	}
	m := &pb.Message{Type: pb.MsgProp.Enum(), From: new(gone.id), To: new(leader.id), Entries: []*pb.Entry{{Data: data}}}
	if err := leader.c.Step(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	// Once the loop has taken the message and run once more, an accepted
	// proposal would be in the log ahead of the next one.
	poll.Until(t, 5*time.Second, func() error {
		if n := len(leader.c.recvc); n > 0 {
			return fmt.Errorf("%d messages queued", n)
		}
		return nil
	})
	done := make(chan struct{})
	leader.c.cmdc <- func() { close(done) }
	<-done
	if !leader.c.IsLeader() {
		t.Skip("leadership moved during the test")
	}
	proposeRetry(t, leader.c, createRec("next", 1))
	if leader.c.Image().Topic("ghost") != nil {
		t.Fatal("a proposal forwarded by a removed node committed")
	}
}

// Quorum is current as soon as a configuration change returns or a new
// leader is visible, without waiting for a tick.
func TestQuorumStatusCurrentAfterChange(t *testing.T) {
	tc := newTestCluster(t, 3, 1000)
	leader := tc.waitLeader()
	f := tc.followers(leader)
	down := tc.stop(f[0].id)
	if err := leader.c.RemoveMember(ctx(t), down.id); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
	if st := leader.c.Quorum(); len(st.Members) != 2 || st.Applied != leader.c.Image().Index {
		t.Fatalf("status right after RemoveMember: %+v", st)
	}
	if err := leader.c.AddLearner(ctx(t), down.id, down.addr); err != nil {
		t.Fatalf("AddLearner: %v", err)
	}
	if m, ok := leader.c.Quorum().Member(NodeID(down.id)); !ok || m.Voter || m.Addr != down.addr {
		t.Fatalf("status right after AddLearner: %+v (%v)", m, ok)
	}

	to := f[1]
	if err := leader.c.TransferLeadership(ctx(t), to.id); err != nil {
		t.Fatalf("TransferLeadership: %v", err)
	}
	// TransferLeadership returns once Leader names another node; Quorum
	// says the same at that moment.
	if l, st := leader.c.Leader(), leader.c.Quorum(); st.IsLeader || st.Leader != NodeID(l) || l == leader.id {
		t.Fatalf("old leader: Leader %d, status %+v", l, st)
	}
	poll.Until(t, 10*time.Second, func() error {
		if !to.c.IsLeader() {
			return errors.New("not leader yet")
		}
		return nil
	})
	if st := to.c.Quorum(); !st.IsLeader || st.Leader != NodeID(to.id) {
		t.Fatalf("new leader leads but its status says %+v", st)
	}
}

// A voter cut off while its removal commits never hears of it: when the
// link heals it finds no leader, asks to be added, and ends up an
// observer that caught up through its removal.
func TestQuorumRemovedWhileCutOffRejoinsAsObserver(t *testing.T) {
	tc := newTestCluster(t, 3, 1000)
	leader := tc.waitLeader()
	cut := tc.followers(leader)[0]
	for _, nd := range tc.live() {
		if nd == cut {
			nd.tr.SetDropFilter(func(uint64) bool { return true })
		} else {
			nd.tr.SetDropFilter(func(to uint64) bool { return to == cut.id })
		}
	}
	if err := leader.c.RemoveMember(ctx(t), cut.id); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
	proposeRetry(t, leader.c, createRec("while-cut", 1))
	if cut.c.Removed() != nil {
		t.Fatal("the cut-off node learned of its removal")
	}
	for _, nd := range tc.live() {
		nd.tr.SetDropFilter(nil)
	}
	tc.waitSameImage(leader.c.Image().Index)
	poll.Until(t, 10*time.Second, func() error {
		for _, nd := range tc.live() {
			if m, ok := nd.c.Quorum().Member(NodeID(cut.id)); !ok || m.Voter {
				return fmt.Errorf("node %d sees node %d as %+v (%v)", nd.id, cut.id, m, ok)
			}
		}
		return cut.c.Removed()
	})
	proposeRetry(t, cut.c, createRec("from-cut", 1))
	tc.waitSameImage(cut.c.Image().Index)
}
