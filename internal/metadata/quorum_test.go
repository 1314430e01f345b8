package metadata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/poll"
	"github.com/berthmq/berth/internal/testports"
)

// testCluster runs metadata controllers over real loopback TCP in one
// process.
type testCluster struct {
	t         *testing.T
	voters    []Voter
	snapEvery uint64

	mu    sync.Mutex
	nodes map[uint64]*testNode
}

type testNode struct {
	id   uint64
	dir  string
	addr string
	tr   *TCPTransport
	c    *Controller
}

// quorumTick keeps elections short but tolerant of a loaded 2-core machine
// under -race: election timeout 10 ticks = 200ms.
const quorumTick = 20 * time.Millisecond

// freeAddr reserves a loopback address below the ephemeral range (a port
// freed after ":0" could be taken by an outgoing connection before the
// node binds it).
func freeAddr(t testing.TB) string {
	t.Helper()
	return testports.Addrs(t, 1)[0]
}

// newTestCluster starts n voters with Raft ids 1..n and waits for each
// Start to return.
func newTestCluster(t *testing.T, n int, snapEvery uint64) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, snapEvery: snapEvery, nodes: map[uint64]*testNode{}}
	// Each transport listens on a port of its own choosing first, so no
	// other process can take the address between picking and binding it.
	trs := make([]*TCPTransport, n)
	for i := range n {
		trs[i] = tc.listen(uint64(i+1), "127.0.0.1:0")
		tc.voters = append(tc.voters, Voter{ID: uint64(i + 1), Addr: trs[i].Addr().String()})
	}
	t.Cleanup(tc.closeAll)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, v := range tc.voters {
		nd := tc.openOn(trs[i], v.ID, t.TempDir())
		wg.Go(func() { errs[i] = tc.startNode(nd) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d Start: %v", i+1, err)
		}
	}
	return tc
}

// open opens a node (not started) listening on addr ("127.0.0.1:0": a
// port of its own) and registers it.
func (tc *testCluster) open(id uint64, dir, addr string) *testNode {
	tc.t.Helper()
	return tc.openOn(tc.listen(id, addr), id, dir)
}

// listen makes node id's transport on addr. A restarted node takes its
// old address back, which the OS may hold for a moment after the close:
// it retries that for a few seconds.
func (tc *testCluster) listen(id uint64, addr string) *TCPTransport {
	tc.t.Helper()
	var tr *TCPTransport
	poll.Until(tc.t, 5*time.Second, func() error {
		var err error
		tr, err = NewTCPTransport(TCPConfig{NodeID: id, Addr: addr, MinBackoff: 5 * time.Millisecond,
			MaxBackoff: 50 * time.Millisecond, Logger: quietLogger()})
		return err
	})
	return tr
}

// openOn opens a node (not started) on transport tr and registers it.
func (tc *testCluster) openOn(tr *TCPTransport, id uint64, dir string) *testNode {
	tc.t.Helper()
	addr := tr.Addr().String()
	cfg := testConfig(dir)
	cfg.NodeID = id
	cfg.Voters = tc.voters
	cfg.Addr = addr
	cfg.Transport = tr
	cfg.Logger = quietLogger().With("node", id)
	cfg.TickInterval = quorumTick
	cfg.SnapshotEvery = tc.snapEvery
	c, err := Open(cfg)
	if err != nil {
		tr.Close()
		tc.t.Fatalf("node %d Open: %v", id, err)
	}
	nd := &testNode{id: id, dir: dir, addr: addr, tr: tr, c: c}
	tc.mu.Lock()
	tc.nodes[id] = nd
	tc.mu.Unlock()
	return nd
}

func (tc *testCluster) startNode(nd *testNode) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return nd.c.Start(ctx)
}

func quietLogger() *slog.Logger {
	if testing.Verbose() && os.Getenv("QUORUM_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// stop closes node id's controller and transport, as a clean shutdown.
func (tc *testCluster) stop(id uint64) *testNode {
	tc.t.Helper()
	tc.mu.Lock()
	nd := tc.nodes[id]
	delete(tc.nodes, id)
	tc.mu.Unlock()
	if err := nd.c.Close(); err != nil {
		tc.t.Fatalf("node %d Close: %v", id, err)
	}
	nd.tr.Close()
	return nd
}

// restart opens and starts a stopped node from its directory.
func (tc *testCluster) restart(old *testNode) *testNode {
	tc.t.Helper()
	nd := tc.open(old.id, old.dir, old.addr)
	if err := tc.startNode(nd); err != nil {
		tc.t.Fatalf("node %d restart: %v", old.id, err)
	}
	return nd
}

func (tc *testCluster) closeAll() {
	tc.mu.Lock()
	nodes := tc.nodes
	tc.nodes = map[uint64]*testNode{}
	tc.mu.Unlock()
	for _, nd := range nodes {
		nd.c.Close()
	}
	for _, nd := range nodes {
		nd.tr.Close()
	}
}

func (tc *testCluster) live() []*testNode {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	out := make([]*testNode, 0, len(tc.nodes))
	for _, nd := range tc.nodes {
		out = append(out, nd)
	}
	slices.SortFunc(out, func(a, b *testNode) int { return int(a.id) - int(b.id) })
	return out
}

func (tc *testCluster) node(id uint64) *testNode {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.nodes[id]
}

// waitLeader waits until every node in among agrees on one leader that is
// itself in among, and returns it.
func (tc *testCluster) waitLeader(among ...*testNode) *testNode {
	tc.t.Helper()
	if len(among) == 0 {
		among = tc.live()
	}
	var leader *testNode
	poll.Until(tc.t, 10*time.Second, func() error {
		lead := among[0].c.Leader()
		leader = nil
		for _, nd := range among {
			if got := nd.c.Leader(); got != lead || got == 0 {
				return fmt.Errorf("node %d sees leader %d, node %d sees %d", among[0].id, lead, nd.id, got)
			}
			if nd.id == lead {
				leader = nd
			}
		}
		if leader == nil || !leader.c.IsLeader() {
			return fmt.Errorf("leader %d is not among the nodes or not leader yet", lead)
		}
		return nil
	})
	return leader
}

// waitSameImage waits until the nodes hold byte-identical images at an
// index of at least min.
func (tc *testCluster) waitSameImage(min uint64, nodes ...*testNode) []byte {
	tc.t.Helper()
	if len(nodes) == 0 {
		nodes = tc.live()
	}
	var want []byte
	poll.Until(tc.t, 10*time.Second, func() error {
		want = EncodeImage(nodes[0].c.Image())
		if idx := nodes[0].c.Image().Index; idx < min {
			return fmt.Errorf("node %d at index %d, want >= %d", nodes[0].id, idx, min)
		}
		for _, nd := range nodes[1:] {
			if got := EncodeImage(nd.c.Image()); !bytes.Equal(got, want) {
				return fmt.Errorf("node %d image differs from node %d's:\n%s\n%s", nd.id, nodes[0].id, got, want)
			}
		}
		return nil
	})
	return want
}

func (tc *testCluster) followers(leader *testNode) []*testNode {
	var out []*testNode
	for _, nd := range tc.live() {
		if nd != leader {
			out = append(out, nd)
		}
	}
	return out
}

// proposeRetry proposes recs, retrying ErrProposalDropped (an entry lost
// in a leader change) until ctx ends; a retried create may find its own
// earlier attempt applied.
func proposeRetry(t testing.TB, c *Controller, recs ...Record) {
	t.Helper()
	cx := ctx(t)
	for {
		err := c.Propose(cx, recs...)
		switch {
		case err == nil:
			return
		case errors.Is(err, ErrProposalDropped) && cx.Err() == nil:
			continue
		case errors.Is(err, ErrTopicExists):
			return
		default:
			t.Fatalf("Propose: %v", err)
		}
	}
}

func TestQuorumThreeVoters(t *testing.T) {
	tc := newTestCluster(t, 3, 1000)
	leader := tc.waitLeader()
	im := leader.c.Image()
	if len(im.ClusterID) != 22 {
		t.Fatalf("cluster id %q after Start", im.ClusterID)
	}
	for _, v := range tc.voters {
		if got := im.Controllers[NodeID(v.ID)]; got != v.Addr {
			t.Fatalf("Controllers[%d] = %q, want %q (all: %v)", NodeID(v.ID), got, v.Addr, im.Controllers)
		}
	}

	// Proposals from a follower apply on all three, identically.
	f := tc.followers(leader)[0]
	for i := range 5 {
		if err := f.c.Propose(ctx(t), createRec(fmt.Sprintf("f%d", i), 2)); err != nil {
			t.Fatalf("Propose on follower %d: %v", f.id, err)
		}
	}
	if f.c.Image().Topic("f4") == nil {
		t.Fatal("follower's Propose returned before the entry applied locally")
	}
	if err := f.c.Propose(ctx(t), createRec("f0", 1)); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create from a follower: %v, want ErrTopicExists", err)
	}
	first, err := f.c.AllocateProducerIDs(ctx(t), 10)
	if err != nil {
		t.Fatal(err)
	}
	second, err := leader.c.AllocateProducerIDs(ctx(t), 10)
	if err != nil || second != first+10 {
		t.Fatalf("producer ids: follower got %d, leader %d (%v)", first, second, err)
	}
	tc.waitSameImage(f.c.Image().Index)

	// The quorum status on the leader shows everyone active.
	poll.Until(t, 5*time.Second, func() error {
		st := leader.c.Quorum()
		if !st.IsLeader || st.Leader != NodeID(leader.id) || len(st.Members) != 3 {
			return fmt.Errorf("status %+v", st)
		}
		for _, m := range st.Members {
			if !m.Voter || !m.RecentActive || m.Addr == "" || time.Since(m.LastHeard) > time.Second {
				return fmt.Errorf("member %+v", m)
			}
			if seen, ok := leader.c.LastSeen(m.NodeID); !ok || time.Since(seen) > time.Second || !leader.c.CaughtUp(m.NodeID) {
				return fmt.Errorf("member %d: last seen %v (%v), caught up %v", m.NodeID, seen, ok, leader.c.CaughtUp(m.NodeID))
			}
		}
		if f.c.CaughtUp(NodeID(leader.id)) {
			return errors.New("a follower answered CaughtUp")
		}
		return nil
	})

	// Handing over leadership on request.
	to := tc.followers(leader)[1]
	if err := leader.c.TransferLeadership(ctx(t), to.id); err != nil {
		t.Fatalf("TransferLeadership: %v", err)
	}
	if leader = tc.waitLeader(); leader != to {
		t.Fatalf("leader %d after a transfer to %d", leader.id, to.id)
	}

	// Closing the leader hands leadership over first: another node leads
	// as soon as Close returns, with no election timeout to wait.
	old := tc.stop(leader.id)
	if !slices.ContainsFunc(tc.live(), func(nd *testNode) bool { return nd.c.IsLeader() }) {
		t.Fatal("no leader right after the old one closed")
	}
	leader = tc.waitLeader()
	if leader.id == old.id {
		t.Fatal("closed node still leader")
	}
	for _, nd := range tc.live() {
		proposeRetry(t, nd.c, createRec(fmt.Sprintf("after-%d", nd.id), 1))
	}
	tc.waitSameImage(leader.c.Image().Index)

	// The old leader comes back from its directory and catches up.
	tc.restart(old)
	want := tc.waitSameImage(leader.c.Image().Index)
	for _, name := range []string{"f0", "f4", "after-1", "after-2", "after-3"} {
		if name == fmt.Sprintf("after-%d", old.id) {
			continue
		}
		if !bytes.Contains(want, []byte(`"`+name+`"`)) {
			t.Fatalf("topic %s missing after the restart:\n%s", name, want)
		}
	}
}

// A node that was down while the log was compacted catches up through a
// snapshot from the leader.
func TestQuorumRestartThroughSnapshot(t *testing.T) {
	tc := newTestCluster(t, 3, 5)
	leader := tc.waitLeader()
	down := tc.stop(tc.followers(leader)[0].id)
	downIndex := down.c.Image().Index

	for i := range 40 {
		proposeRetry(t, leader.c, createRec(fmt.Sprintf("t%02d", i), 1))
	}
	leader = tc.waitLeader()
	first, _ := leader.c.ms.FirstIndex()
	if first <= downIndex+1 {
		t.Fatalf("leader's log starts at %d; the stopped node needs %d, so no snapshot would be needed", first, downIndex+1)
	}
	nd := tc.restart(down)
	want := tc.waitSameImage(leader.c.Image().Index)
	if !bytes.Contains(want, []byte(`"t39"`)) {
		t.Fatalf("t39 missing:\n%s", want)
	}
	// It follows normally after the snapshot, too.
	proposeRetry(t, nd.c, createRec("late", 1))
	tc.waitSameImage(nd.c.Image().Index)
}

// A node not in the voter list joins as an observer, receives the image
// (through a snapshot: the log is compacted), can be promoted to voter and
// removed again.
func TestQuorumObserverJoins(t *testing.T) {
	tc := newTestCluster(t, 3, 5)
	leader := tc.waitLeader()
	for i := range 20 {
		proposeRetry(t, leader.c, createRec(fmt.Sprintf("t%02d", i), 1))
	}

	obs := tc.open(4, t.TempDir(), "127.0.0.1:0")
	if err := tc.startNode(obs); err != nil {
		t.Fatalf("observer Start: %v", err)
	}
	if obs.c.Image().Topic("t19") == nil {
		t.Fatal("observer's Start returned before it caught up")
	}
	tc.waitSameImage(leader.c.Image().Index)
	poll.Until(t, 5*time.Second, func() error {
		m, ok := leader.c.Quorum().Member(NodeID(4))
		if !ok || m.Voter || m.Addr != obs.addr || !m.RecentActive {
			return fmt.Errorf("observer as the leader sees it: %+v (%v)", m, ok)
		}
		return nil
	})
	if leader.c.Image().Controllers[NodeID(4)] != obs.addr {
		t.Fatalf("observer address not in the image: %v", leader.c.Image().Controllers)
	}
	// The observer proposes like anyone else.
	proposeRetry(t, obs.c, createRec("from-observer", 1))
	tc.waitSameImage(obs.c.Image().Index)

	// Voter changes, one at a time, from any node.
	if err := obs.c.PromoteLearner(ctx(t), 1); !errors.Is(err, ErrInvalidQuorumChange) {
		t.Fatalf("promoting a voter: %v, want ErrInvalidQuorumChange", err)
	}
	leader = tc.waitLeader()
	if err := leader.c.PromoteLearner(ctx(t), 4); err != nil {
		t.Fatalf("PromoteLearner: %v", err)
	}
	poll.Until(t, 5*time.Second, func() error {
		for _, nd := range tc.live() {
			if m, ok := nd.c.Quorum().Member(NodeID(4)); !ok || !m.Voter {
				return fmt.Errorf("node %d sees node 4 as %+v", nd.id, m)
			}
		}
		return nil
	})
	if err := obs.c.RemoveMember(ctx(t), 4); !errors.Is(err, ErrInvalidQuorumChange) {
		t.Fatalf("a node removing itself: %v, want ErrInvalidQuorumChange", err)
	}
	// Decommissioning: stop the node, then remove it (three of four
	// voters are still a quorum).
	tc.stop(4)
	if err := tc.node(2).c.RemoveMember(ctx(t), 4); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
	leader = tc.waitLeader()
	poll.Until(t, 5*time.Second, func() error {
		for _, nd := range tc.live() {
			if m, ok := nd.c.Quorum().Member(NodeID(4)); ok {
				return fmt.Errorf("node %d still sees node 4: %+v", nd.id, m)
			}
			if _, ok := nd.c.Image().Controllers[NodeID(4)]; ok {
				return fmt.Errorf("node 4's address still in node %d's image", nd.id)
			}
		}
		return nil
	})
	proposeRetry(t, leader.c, createRec("after-removal", 1))
	tc.waitSameImage(leader.c.Image().Index)
}

// Cutting one node off: the majority keeps committing, a proposal on the
// cut-off node fails instead of hanging, and after healing the node
// catches up.
func TestQuorumIsolatedNode(t *testing.T) {
	tc := newTestCluster(t, 3, 1000)
	leader := tc.waitLeader()

	// Isolate the leader: it steps down (CheckQuorum), the others elect.
	cut := leader
	isolate := func(on bool) {
		for _, nd := range tc.live() {
			switch {
			case !on:
				nd.tr.SetDropFilter(nil)
			case nd == cut:
				nd.tr.SetDropFilter(func(uint64) bool { return true })
			default:
				nd.tr.SetDropFilter(func(to uint64) bool { return to == cut.id })
			}
		}
	}
	isolate(true)
	rest := tc.followers(cut)
	leader = tc.waitLeader(rest...)
	for i := range 10 {
		proposeRetry(t, rest[i%2].c, createRec(fmt.Sprintf("maj%d", i), 1))
	}
	tc.waitSameImage(leader.c.Image().Index, rest...)
	poll.Until(t, 5*time.Second, func() error {
		seen, _ := leader.c.LastSeen(NodeID(cut.id))
		if m, _ := leader.c.Quorum().Member(NodeID(cut.id)); m.RecentActive || leader.c.CaughtUp(NodeID(cut.id)) {
			return fmt.Errorf("leader still sees the cut node as active: %+v", m)
		}
		if time.Since(seen) < 10*quorumTick {
			return fmt.Errorf("cut node last seen %v ago", time.Since(seen))
		}
		return nil
	})

	short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := cut.c.Propose(short, createRec("isolated", 1)); err == nil {
		t.Fatal("a proposal on the isolated node committed")
	}
	if cut.c.Image().Topic("maj9") != nil {
		t.Fatal("isolated node applied entries")
	}

	isolate(false)
	tc.waitSameImage(leader.c.Image().Index)
	if cut.c.Image().Topic("maj9") == nil {
		t.Fatal("healed node did not catch up")
	}
	proposeRetry(t, cut.c, createRec("healed", 1))
	tc.waitSameImage(cut.c.Image().Index)
}

// A forwarded proposal that never reaches the leader fails with
// ErrProposalDropped rather than hanging until the caller's deadline.
func TestQuorumForwardedProposalLost(t *testing.T) {
	tc := newTestCluster(t, 3, 1000)
	leader := tc.waitLeader()
	f := tc.followers(leader)[0]
	f.tr.SetDropFilter(func(to uint64) bool { return to == leader.id })
	start := time.Now()
	err := f.c.Propose(ctx(t), createRec("lost", 1))
	if !errors.Is(err, ErrProposalDropped) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("lost proposal: %v, want ErrProposalDropped (and ErrNotLeader)", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("lost proposal took %v to fail", d)
	}
	f.tr.SetDropFilter(nil)
	proposeRetry(t, f.c, createRec("found", 1))
	tc.waitSameImage(f.c.Image().Index)
	if f.c.Image().Topic("lost") != nil {
		t.Fatal("a dropped proposal applied")
	}
}

// A restarted voter follows its log, not a changed voter list; and a
// one-voter directory from before clustering starts with Voters set to
// itself.
func TestQuorumRestartIgnoresVoterList(t *testing.T) {
	dir := t.TempDir()
	c := open(t, testConfig(dir)) // one voter, no addresses: the old layout
	if err := c.Propose(ctx(t), createRec("old", 1)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, c)

	addr := freeAddr(t)
	tr, err := NewTCPTransport(TCPConfig{NodeID: RaftID(0), Addr: addr, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	cfg := testConfig(dir)
	cfg.Transport = tr
	// Lists a second voter that the log never had: the log wins.
	cfg.Voters = []Voter{{ID: RaftID(0), Addr: addr}, {ID: RaftID(1), Addr: freeAddr(t)}}
	c = open(t, cfg)
	if c.Image().Topic("old") == nil || !c.IsLeader() {
		t.Fatal("old single-voter directory did not come back as leader with its data")
	}
	// The leader records its own address, which the old log lacked.
	poll.Until(t, 5*time.Second, func() error {
		if got := c.Image().Controllers[0]; got != addr {
			return fmt.Errorf("Controllers = %v, want node 0 at %s", c.Image().Controllers, addr)
		}
		return nil
	})
	if st := c.Quorum(); len(st.Members) != 1 || !st.Members[0].Voter {
		t.Fatalf("quorum %+v, want only node 0", st)
	}
}

func TestEnvelopeOrigin(t *testing.T) {
	for _, tc := range []struct{ node, id uint64 }{{1, 2}, {2147483648, 1<<63 - 1}, {7, 0}} {
		b, err := EncodeEntry(tc.node, tc.id, []Record{createRec("x", 1)})
		if err != nil {
			t.Fatal(err)
		}
		node, id, ok := envelopeOrigin(b)
		d, _ := decodeEntry(b)
		if tc.node != 0 && tc.id != 0 && (!ok || node != tc.node || id != tc.id) || ok && (node != d.Node || id != d.ID) {
			t.Fatalf("%s: got %d %d %v", b, node, id, ok)
		}
	}
	for _, s := range []string{`{"v":1,"node":1}`, `{"v":2,"node":1,"id":2,"records":[]}`, `{"v":1,"node":1,"id":2x`, `{"v":1,"node":,"id":2}`} {
		if _, _, ok := envelopeOrigin([]byte(s)); ok {
			t.Fatalf("%s: parsed", s)
		}
	}
}

// The documented way to grow: a one-voter cluster, new nodes join as
// observers and are promoted one at a time; the grown quorum then survives
// losing the original node.
func TestQuorumGrowFromOneVoter(t *testing.T) {
	tc := newTestCluster(t, 1, 1000)
	first := tc.node(1)
	proposeRetry(t, first.c, createRec("before", 1))
	for _, id := range []uint64{2, 3} {
		nd := tc.open(id, t.TempDir(), "127.0.0.1:0")
		if err := tc.startNode(nd); err != nil {
			t.Fatalf("node %d Start: %v", id, err)
		}
		leader := tc.waitLeader()
		// Promotion is refused while another change is pending, and
		// until the observer is caught up; retry as an operator would.
		poll.Until(t, 10*time.Second, func() error {
			return leader.c.PromoteLearner(ctx(t), id)
		})
	}
	poll.Until(t, 5*time.Second, func() error {
		for _, nd := range tc.live() {
			st := nd.c.Quorum()
			if len(st.Members) != 3 || !st.Members[0].Voter || !st.Members[1].Voter || !st.Members[2].Voter {
				return fmt.Errorf("node %d sees %+v", nd.id, st.Members)
			}
		}
		return nil
	})
	tc.stop(1)
	leader := tc.waitLeader()
	proposeRetry(t, leader.c, createRec("after", 1))
	want := tc.waitSameImage(leader.c.Image().Index)
	if !bytes.Contains(want, []byte(`"before"`)) {
		t.Fatalf("grown cluster lost the original data:\n%s", want)
	}
}

// Five voters keep committing with two of them down, stop with three down,
// and resume when one returns.
func TestQuorumFiveVoters(t *testing.T) {
	tc := newTestCluster(t, 5, 1000)
	leader := tc.waitLeader()
	down := []*testNode{tc.stop(leader.id), tc.stop(tc.followers(tc.waitLeader())[0].id)}
	leader = tc.waitLeader()
	proposeRetry(t, leader.c, createRec("two-down", 1))
	tc.waitSameImage(leader.c.Image().Index)

	down = append(down, tc.stop(leader.id))
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := tc.live()[0].c.Propose(short, createRec("three-down", 1)); err == nil {
		t.Fatal("a proposal committed with three of five voters down")
	}
	tc.restart(down[0])
	leader = tc.waitLeader()
	proposeRetry(t, leader.c, createRec("back", 1))
	want := tc.waitSameImage(leader.c.Image().Index)
	if !bytes.Contains(want, []byte(`"two-down"`)) {
		t.Fatalf("two-down lost:\n%s", want)
	}
}
