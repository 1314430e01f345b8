package metadata

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// The quorum: voters and observers (Raft learners), their addresses, and
// changes to them.
//
// Every member's controller address travels in the Context of the Raft
// configuration change that adds it (confContext), so it is committed with
// the membership itself and every member learns it by applying the log.
// Applying builds Image.Controllers (node id -> address), which snapshots
// carry, and which the Controller hands to Transport.SetPeers.
//
// A node that is not a member, or whose address in the log is not the one
// it is configured with (and that has not seen its own removal since it
// started), sends a JoinRequest every election timeout to the
// leader (or to every address it knows while no leader is known). The
// leader answers by proposing the change itself: AddLearnerNode for a
// newcomer, or the member's current role with the new address. Voter
// changes are operator decisions (AddVoter, PromoteLearner, RemoveMember),
// one at a time: a change is refused while another is in the log and not
// yet applied.
//
// Removal. A node that applies its own removal while it runs stays out:
// it steps down if it led, Leader reports no leader, Propose fails with
// ErrRemoved, and it warns every minute that its image is stale, until an
// operator adds it back (AddVoter with its address) or restarts it. A
// node that starts and finds its removal in its log asks to rejoin as an
// observer, as above (KIP-853: a removed voter may continue as an
// observer). A voter that was down while it was removed starts believing
// it is a voter, and no leader talks to it (it is not in the leader's
// progress); after two election timeouts without a leader it sends
// JoinRequests too (probing), the leader adds it as an observer, and it
// catches up through its removal and re-addition. Meanwhile it cannot
// commit anything (a removal committed on a majority of the old voters
// denies it their votes) and the leader refuses proposals forwarded by
// non-members (refuseForwarded), since their proposer would never see them
// commit.

// confContext is the JSON Context of Berth's configuration changes:
//
//	{"addr":"host:port","node":<proposer raft id>,"id":<proposal id>}
//
// addr is the member's controller address (omitted: unchanged); node and
// id find the waiting caller, as in an entry's envelope.
type confContext struct {
	Addr string `json:"addr,omitempty"`
	Node uint64 `json:"node,omitempty"`
	ID   uint64 `json:"id,omitempty"`
}

// parseConfContext reads a Context; anything else (empty, or written by
// another tool) carries no address and no waiter.
func parseConfContext(b []byte) confContext {
	var c confContext
	if len(b) > 0 {
		if json.Unmarshal(b, &c) != nil {
			return confContext{}
		}
	}
	return c
}

func (cc confContext) encode() []byte {
	b, _ := json.Marshal(cc) // plain strings and numbers: cannot fail
	return b
}

// NodeID maps a Raft id back to the Kafka node.id (RaftID's inverse).
func NodeID(raftID uint64) int32 { return int32(raftID - 1) }

// entryOrigin returns the proposer and proposal id of an entry, or zeros.
func entryOrigin(e *pb.Entry) (node, id uint64) {
	switch e.GetType() {
	case pb.EntryNormal:
		if len(e.GetData()) == 0 {
			return 0, 0
		}
		if node, id, ok := envelopeOrigin(e.GetData()); ok {
			return node, id
		}
		var o struct {
			Node uint64 `json:"node"`
			ID   uint64 `json:"id"`
		}
		if json.Unmarshal(e.GetData(), &o) != nil {
			return 0, 0
		}
		return o.Node, o.ID
	case pb.EntryConfChange:
		var cc pb.ConfChange
		if proto.Unmarshal(e.GetData(), &cc) != nil {
			return 0, 0
		}
		ctx := parseConfContext(cc.GetContext())
		return ctx.Node, ctx.ID
	case pb.EntryConfChangeV2:
		var cc pb.ConfChangeV2
		if proto.Unmarshal(e.GetData(), &cc) != nil {
			return 0, 0
		}
		ctx := parseConfContext(cc.GetContext())
		return ctx.Node, ctx.ID
	}
	return 0, 0
}

// envelopeOrigin reads node and id from the start of an envelope as
// EncodeEntry writes it, {"v":1,"node":N,"id":M,..., without decoding the
// records; ok is false for any other layout.
func envelopeOrigin(b []byte) (node, id uint64, ok bool) {
	const p1, p2 = `{"v":1,"node":`, `,"id":`
	num := func(b []byte) (uint64, []byte, bool) {
		var n uint64
		i := 0
		for ; i < len(b) && i < 20 && b[i] >= '0' && b[i] <= '9'; i++ {
			n = n*10 + uint64(b[i]-'0')
		}
		return n, b[i:], i > 0 && i < 20
	}
	if !bytes.HasPrefix(b, []byte(p1)) {
		return 0, 0, false
	}
	node, b, ok = num(b[len(p1):])
	if !ok || !bytes.HasPrefix(b, []byte(p2)) {
		return 0, 0, false
	}
	id, b, ok = num(b[len(p2):])
	if !ok || len(b) == 0 || (b[0] != ',' && b[0] != '}') {
		return 0, 0, false
	}
	return node, id, true
}

// bootstrapPeers is the configuration a fresh directory starts with: every
// voter of Config.Voters in id order, with its address, so that all voters
// write identical first entries; just this node with no address when
// Voters is empty (as before clustering); none on an observer, which
// receives the configuration from the leader.
func (c *Controller) bootstrapPeers() []raft.Peer {
	if len(c.cfg.Voters) == 0 {
		return []raft.Peer{{ID: c.cfg.NodeID}}
	}
	if !c.inVoterList(c.cfg.NodeID) {
		return nil
	}
	vs := slices.SortedFunc(slices.Values(c.cfg.Voters), func(a, b Voter) int { return cmp.Compare(a.ID, b.ID) })
	peers := make([]raft.Peer, len(vs))
	for i, v := range vs {
		peers[i] = raft.Peer{ID: v.ID, Context: confContext{Addr: v.Addr}.encode()}
	}
	return peers
}

func (c *Controller) inVoterList(id uint64) bool {
	return slices.ContainsFunc(c.cfg.Voters, func(v Voter) bool { return v.ID == id })
}

func (c *Controller) isVoter(id uint64) bool   { return slices.Contains(c.confState.GetVoters(), id) }
func (c *Controller) isLearner(id uint64) bool { return slices.Contains(c.confState.GetLearners(), id) }

// checkMembership runs at Open, after the log is replayed: the log's
// configuration wins over Config.Voters, which only bootstraps.
func (c *Controller) checkMembership(fresh bool) error {
	cs := c.confState
	self := c.cfg.NodeID
	member := c.isVoter(self) || c.isLearner(self)
	if len(c.cfg.Voters) == 0 {
		if !member {
			return fmt.Errorf("metadata: node %d is not a member of the metadata quorum (voters %v) in %s; wrong node.id?",
				self, cs.GetVoters(), c.cfg.Dir)
		}
		return nil
	}
	if !fresh {
		want := make([]uint64, 0, len(c.cfg.Voters))
		for _, v := range c.cfg.Voters {
			want = append(want, v.ID)
		}
		slices.Sort(want)
		if got := slices.Sorted(slices.Values(cs.GetVoters())); !slices.Equal(want, got) {
			c.log.Warn("metadata: controller.quorum.voters differs from the voters in the metadata log; following the log "+
				"(the list is read only when the directory is empty; to change voters see docs/operations.md)",
				"configured", raftToNodeIDs(want), "log", raftToNodeIDs(got))
		}
	}
	switch {
	case member && fresh:
		c.log.Info("metadata: bootstrapped a new metadata quorum from controller.quorum.voters; "+
			"this is right only when creating a cluster: a node with an empty directory that joins an existing cluster "+
			"must not be in its own controller.quorum.voters (see docs/operations.md)", "voters", raftToNodeIDs(c.confState.GetVoters()))
	case member:
	case fresh:
		c.log.Info("metadata: node is not in controller.quorum.voters; it starts empty and joins the quorum as an observer",
			"node", NodeID(self), "addr", c.cfg.Addr)
	default:
		c.log.Warn("metadata: node is not a member of the quorum in its metadata log; asking the leader to add it as an observer",
			"node", NodeID(self), "voters", raftToNodeIDs(cs.GetVoters()), "observers", raftToNodeIDs(cs.GetLearners()))
	}
	return nil
}

func raftToNodeIDs(ids []uint64) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = NodeID(id)
	}
	return out
}

// peerAddrs is every known member address: Config.Voters, overridden by
// what the log says.
func (c *Controller) peerAddrs() map[uint64]string {
	m := map[uint64]string{}
	for _, v := range c.cfg.Voters {
		m[v.ID] = v.Addr
	}
	for id, p := range c.parting {
		m[id] = p.addr
	}
	for id, a := range c.Image().Controllers {
		m[RaftID(id)] = a
	}
	return m
}

// expireParting forgets removed members' addresses after partingTicks.
// Loop only.
func (c *Controller) expireParting() {
	n := len(c.parting)
	maps.DeleteFunc(c.parting, func(_ uint64, p parting) bool { return c.ticks >= p.until })
	if len(c.parting) != n {
		c.updatePeers()
	}
}

// membershipChanged runs at the end of a Ready that removed this node, or
// added it back, while it runs: it publishes the state, fails the waiting
// proposals (their outcome is unknown: this node will not see them
// commit) and says so loudly. Loop only.
func (c *Controller) membershipChanged() {
	c.statusDirty = true
	if !c.removed {
		if c.running {
			c.log.Warn("metadata: this node is a member of the metadata quorum again", "node", NodeID(c.cfg.NodeID),
				"voter", c.isVoter(c.cfg.NodeID), "index", c.Image().Index)
		}
		return
	}
	if !c.running {
		return
	}
	c.staleLogged = time.Now()
	c.log.Error("metadata: this node was removed from the metadata quorum: it no longer receives metadata changes, "+
		"its metadata image is stale from now on and its proposals fail", "node", NodeID(c.cfg.NodeID),
		"index", c.removedIdx, "fix", c.removedAdvice())
	err := fmt.Errorf("%w; the proposal may still commit (outcome unknown)", c.removedError(c.removedIdx))
	for id := range c.waiters {
		c.finish(id, proposalResult{err: err})
	}
}

// publishLeader publishes the leader Leader and IsLeader report: none on a
// removed node, whose Raft still names the leader it last followed. Loop
// only.
func (c *Controller) publishLeader() {
	if c.removed {
		c.leader.Store(0)
	} else {
		c.leader.Store(c.lead)
	}
}

// publishRemoved publishes what Removed reports, after the leader and
// the status: whoever sees ErrRemoved sees no leader. Loop only.
func (c *Controller) publishRemoved() {
	if c.removed {
		c.removedAt.Store(c.removedIdx)
	} else {
		c.removedAt.Store(0)
	}
}

// removedError is ErrRemoved with the index of the removal and the advice.
func (c *Controller) removedError(idx uint64) error {
	return fmt.Errorf("%w at index %d: node %d no longer receives metadata changes; %s",
		ErrRemoved, idx, NodeID(c.cfg.NodeID), c.removedAdvice())
}

func (c *Controller) removedAdvice() string {
	n, addr := NodeID(c.cfg.NodeID), c.cfg.Addr
	if addr == "" {
		addr = "HOST:PORT"
	}
	return fmt.Sprintf("to add it back as a voter run `berth cluster quorum add-voter --node-id %d --address %s`; "+
		"or restart it and it rejoins as an observer (or stop it for good)", n, addr)
}

// refuseForwarded drops, on a leader whose configuration is current (it
// applied an entry of its term), a proposal forwarded by a node that is
// not a member: a removed node that does not know it yet would never see
// its entry commit, so its caller would retry an entry that did apply.
// Loop only.
func (c *Controller) refuseForwarded(m *pb.Message) bool {
	from := m.GetFrom()
	if m.GetType() != pb.MsgProp || !c.isLeader || from == c.cfg.NodeID || c.isVoter(from) || c.isLearner(from) ||
		c.appliedTerm != c.hs.GetTerm() {
		return false
	}
	c.log.Warn("metadata: refused a proposal forwarded by a node that is not a member of the quorum",
		"node", NodeID(from), "entries", len(m.GetEntries()))
	return true
}

// updatePeers gives the Transport the current addresses when they changed.
func (c *Controller) updatePeers() {
	m := c.peerAddrs()
	if c.peers != nil && maps.Equal(m, c.peers) {
		return
	}
	c.peers = m
	c.cfg.Transport.SetPeers(m)
}

// applyConfEntry applies a committed configuration change: to Raft, to
// c.confState and to Image.Controllers. A change Raft rejects (it cannot
// happen for changes proposed through this package, which validates them,
// but the log is input) leaves the configuration as it was, on every
// member alike. Loop goroutine only.
func (c *Controller) applyConfEntry(e *pb.Entry) (bool, error) {
	idx := e.GetIndex()
	var cci pb.ConfChangeI
	var ctxb []byte
	if e.GetType() == pb.EntryConfChange {
		cc := &pb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return false, fmt.Errorf("metadata: entry %d: conf change: %w", idx, err)
		}
		cci, ctxb = cc, cc.GetContext()
	} else {
		cc := &pb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return false, fmt.Errorf("metadata: entry %d: conf change: %w", idx, err)
		}
		cci, ctxb = cc, cc.GetContext()
	}
	cctx := parseConfContext(ctxb)
	cs, err := c.applyConfChange(cci)
	im := c.Image()
	next := *im
	next.Index = idx
	changed := false
	if err == nil {
		c.confState, c.confIndex = cs, idx
		c.statusDirty = true
		if ctrls := nextControllers(im.Controllers, cci.AsV2(), cctx.Addr); !maps.Equal(ctrls, im.Controllers) {
			next.Controllers, changed = ctrls, true
		}
		for _, ch := range cci.AsV2().GetChanges() {
			id := ch.GetNodeId()
			switch {
			case id == c.cfg.NodeID:
				c.removed = ch.GetType() == pb.ConfChangeRemoveNode
				c.removedIdx = 0
				if c.removed {
					c.removedIdx = idx
				}
			case ch.GetType() == pb.ConfChangeRemoveNode && im.Controllers[NodeID(id)] != "":
				c.parting[id] = parting{addr: im.Controllers[NodeID(id)], until: c.ticks + partingTicks}
			default:
				delete(c.parting, id)
			}
		}
		if c.running {
			c.log.Info("metadata: quorum configuration changed", "index", idx,
				"voters", raftToNodeIDs(cs.GetVoters()), "observers", raftToNodeIDs(cs.GetLearners()))
		}
	} else {
		c.log.Warn("metadata: quorum change rejected", "index", idx, "err", err)
	}
	c.image.Store(&next)
	if cctx.Node == c.cfg.NodeID && cctx.ID != 0 {
		c.finish(cctx.ID, proposalResult{err: err})
	}
	if changed {
		c.updatePeers()
	}
	return changed, nil
}

// applyConfChange applies cc to Raft. Raft panics on a change its current
// configuration does not allow, before changing anything, so the panic
// becomes an error.
func (c *Controller) applyConfChange(cc pb.ConfChangeI) (cs *pb.ConfState, err error) {
	defer func() {
		if p := recover(); p != nil {
			cs, err = nil, fmt.Errorf("%w: %v", ErrInvalidQuorumChange, p)
		}
	}()
	return c.rn.ApplyConfChange(cc), nil
}

// nextControllers is Image.Controllers after cc: an added or updated
// member takes addr (when the change names one member and addr is set), a
// removed one leaves.
func nextControllers(cur map[int32]string, cc *pb.ConfChangeV2, addr string) map[int32]string {
	next := maps.Clone(cur)
	if next == nil {
		next = map[int32]string{}
	}
	for _, ch := range cc.GetChanges() {
		id := NodeID(ch.GetNodeId())
		switch ch.GetType() {
		case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode, pb.ConfChangeUpdateNode:
			if addr != "" && len(cc.GetChanges()) == 1 {
				next[id] = addr
			}
		case pb.ConfChangeRemoveNode:
			delete(next, id)
		}
	}
	return next
}

// announce asks the leader to add this node, or to record its address,
// when the log does not have it as a member at Config.Addr, or when no
// leader has been known for two election timeouts (a voter removed while
// it was down hears from no leader; the leader ignores the request of a
// member at its recorded address). Never after this node applied its own
// removal while running. Loop only.
func (c *Controller) announce() {
	self := c.cfg.NodeID
	if len(c.cfg.Voters) == 0 || c.cfg.Addr == "" || c.removed {
		return
	}
	leaderless := c.lead == raft.None && c.ticks-c.leadLostAt >= 2*ElectionTicks
	if (c.isVoter(self) || c.isLearner(self)) && c.Image().Controllers[NodeID(self)] == c.cfg.Addr && !leaderless {
		return
	}
	if leaderless && !c.probing {
		c.probing = true
		c.log.Warn("metadata: no active controller for two election timeouts; asking the quorum to add this node "+
			"(a node removed while it was down rejoins as an observer; a member is left as it is)",
			"node", NodeID(self), "applied", c.Image().Index)
	}
	req := JoinRequest{ID: self, Addr: c.cfg.Addr}
	if c.isLeader {
		c.handleJoin(req)
		return
	}
	if c.lead != 0 {
		c.cfg.Transport.SendJoin(c.lead, req)
		return
	}
	for id := range c.peers {
		if id != self {
			c.cfg.Transport.SendJoin(id, req)
		}
	}
}

// handleJoin proposes what a JoinRequest asks for, on the leader. Repeats
// within an election timeout, and requests while another change is
// pending, are ignored: the node asks again. Loop only.
func (c *Controller) handleJoin(req JoinRequest) {
	if !c.isLeader || req.ID == 0 || req.ID > 1<<31 || req.Addr == "" {
		return
	}
	if at, ok := c.joinAt[req.ID]; ok && c.ticks-at < ElectionTicks {
		return
	}
	voter, learner := c.isVoter(req.ID), c.isLearner(req.ID)
	if (voter || learner) && c.Image().Controllers[NodeID(req.ID)] == req.Addr {
		return
	}
	if c.confPending > c.Image().Index {
		return
	}
	typ := pb.ConfChangeAddLearnerNode
	if voter {
		typ = pb.ConfChangeAddNode
	}
	cc := &pb.ConfChangeV2{
		Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(req.ID)}},
		Context: confContext{Addr: req.Addr}.encode(),
	}
	if err := c.rn.ProposeConfChange(cc); err != nil {
		c.log.Debug("metadata: join not proposed", "node", NodeID(req.ID), "err", err)
		return
	}
	c.joinAt[req.ID] = c.ticks
	if voter || learner {
		c.log.Info("metadata: recording a member's new controller address", "node", NodeID(req.ID), "addr", req.Addr)
	} else {
		c.log.Info("metadata: adding observer to the quorum", "node", NodeID(req.ID), "addr", req.Addr)
	}
}

// promoteMaxLag is how far (in entries) an observer may trail the leader's
// commit index and still be promoted to voter.
const promoteMaxLag = 100

// checkConfChange validates an operator's change against the current
// configuration (loop only). skip means there is nothing to do.
func (c *Controller) checkConfChange(cc *pb.ConfChangeV2) (skip bool, err error) {
	if len(cc.GetChanges()) != 1 {
		return false, fmt.Errorf("%w: one member at a time", ErrInvalidQuorumChange)
	}
	if c.confPending > c.Image().Index {
		return false, ErrQuorumChangePending
	}
	ch := cc.GetChanges()[0]
	id := ch.GetNodeId()
	addr := parseConfContext(cc.GetContext()).Addr
	known := c.Image().Controllers[NodeID(id)]
	voter, learner := c.isVoter(id), c.isLearner(id)
	switch ch.GetType() {
	case pb.ConfChangeAddNode:
		switch {
		case voter:
			return addr == "" || addr == known, nil
		case learner:
			if c.isLeader {
				return false, c.checkCaughtUp(id)
			}
		case addr == "" && known == "":
			return false, fmt.Errorf("%w: node %d is not a member and no address was given", ErrInvalidQuorumChange, NodeID(id))
		}
	case pb.ConfChangeAddLearnerNode:
		switch {
		case voter:
			return false, fmt.Errorf("%w: node %d is a voter; turning a voter into an observer is not supported (remove it instead)",
				ErrInvalidQuorumChange, NodeID(id))
		case learner:
			return addr == "" || addr == known, nil
		case addr == "" && known == "":
			return false, fmt.Errorf("%w: node %d is not a member and no address was given", ErrInvalidQuorumChange, NodeID(id))
		}
	case pb.ConfChangeRemoveNode:
		switch {
		case !voter && !learner:
			return true, nil
		case id == c.cfg.NodeID:
			// It might never learn that its removal committed.
			return false, fmt.Errorf("%w: node %d cannot remove itself; call RemoveMember on another member",
				ErrInvalidQuorumChange, NodeID(id))
		case voter && len(c.confState.GetVoters()) == 1:
			return false, fmt.Errorf("%w: node %d is the last voter", ErrInvalidQuorumChange, NodeID(id))
		}
	default:
		return false, fmt.Errorf("%w: change type %v", ErrInvalidQuorumChange, ch.GetType())
	}
	return false, nil
}

// checkCaughtUp refuses to promote an observer that the leader has not
// heard from recently or that trails the commit index.
func (c *Controller) checkCaughtUp(id uint64) error {
	var match uint64
	active, found := false, false
	c.rn.WithProgress(func(pid uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pid == id {
			match, active, found = pr.Match, pr.RecentActive, true
		}
	})
	commit := c.rn.BasicStatus().HardState.GetCommit()
	active = active || time.Since(c.lastHeard[id]) < c.electionTimeout()
	switch {
	case !found:
		return fmt.Errorf("%w: the leader has no progress for node %d", ErrInvalidQuorumChange, NodeID(id))
	case !active || match+promoteMaxLag < commit:
		return fmt.Errorf("%w: observer %d has not caught up (at index %d, committed %d, recently active %v); wait and retry",
			ErrInvalidQuorumChange, NodeID(id), match, commit, active)
	}
	return nil
}

// TransferLeadership asks the active controller to hand leadership to
// voter to (a Raft id), or with to == 0 to the voter with the most of the
// log among those recently active, and waits until another voter leads or
// ctx ends. Raft completes the transfer once the target has the whole log;
// proposals wait meanwhile. A no-op on a node that is not the leader.
func (c *Controller) TransferLeadership(ctx context.Context, to uint64) error {
	t := time.NewTicker(c.cfg.TickInterval / 2)
	defer t.Stop()
	tick := func() error {
		select {
		case <-t.C:
			return nil
		case <-c.donec:
			return c.loopErr()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// A voter counts as recently active once the leader heard from it
	// since its last quorum check (every election timeout), so a live
	// voter can look inactive for up to a heartbeat: look again for a
	// little over an election timeout before giving up.
	giveUp := time.Now().Add(c.electionTimeout() + 2*c.cfg.TickInterval)
	for {
		started := make(chan uint64, 1)
		select {
		case c.cmdc <- func() { started <- c.transferLocked(to) }:
		case <-c.donec:
			return c.loopErr()
		case <-ctx.Done():
			return ctx.Err()
		}
		if <-started != 0 {
			break
		}
		if !c.IsLeader() {
			return nil
		}
		if time.Now().After(giveUp) {
			return fmt.Errorf("%w: no other voter to hand leadership to", ErrInvalidQuorumChange)
		}
		if err := tick(); err != nil {
			return err
		}
	}
	for {
		if l := c.Leader(); l != 0 && l != c.cfg.NodeID {
			return nil
		}
		if err := tick(); err != nil {
			return err
		}
	}
}

// transferLocked starts a leadership transfer and returns its target, or 0
// when this node is not the leader or has no voter to hand over to. Loop
// only.
func (c *Controller) transferLocked(to uint64) uint64 {
	if !c.isLeader {
		return 0
	}
	if to == 0 {
		var best uint64
		c.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
			if id == c.cfg.NodeID || typ != raft.ProgressTypePeer || !pr.RecentActive {
				return
			}
			if to == 0 || pr.Match > best {
				to, best = id, pr.Match
			}
		})
	}
	if to == 0 || to == c.cfg.NodeID || !c.isVoter(to) {
		return 0
	}
	c.log.Info("metadata: handing the active controller role over", "to", NodeID(to))
	c.rn.TransferLeader(to)
	return to
}

// resign hands leadership over before Close, when this node leads a
// quorum with other voters. Best effort: at most two election timeouts.
func (c *Controller) resign() {
	c.startMu.Lock()
	running := c.started && !c.closed
	c.startMu.Unlock()
	if !running || !c.IsLeader() || len(c.Quorum().Members) < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.electionTimeout())
	defer cancel()
	if err := c.TransferLeadership(ctx, 0); err != nil {
		c.log.Debug("metadata: leadership not handed over before closing", "err", err)
	}
}

// electionTimeout is ElectionTicks ticks.
func (c *Controller) electionTimeout() time.Duration { return ElectionTicks * c.cfg.TickInterval }

// AddVoter makes node id (a Raft id, RaftID(node.id)) a voter: it promotes
// an observer, or adds a new node at addr directly. Prefer letting the new
// node join as an observer first and then PromoteLearner, so it never
// counts towards the quorum before it holds the log. addr "" keeps the
// known address. A voter already at that address is a no-op.
func (c *Controller) AddVoter(ctx context.Context, id uint64, addr string) error {
	return c.changeQuorum(ctx, pb.ConfChangeAddNode, id, addr)
}

// PromoteLearner makes observer id a voter. Proposed on the leader, it is
// refused until the observer has caught up with the log.
func (c *Controller) PromoteLearner(ctx context.Context, id uint64) error {
	if m, ok := c.Quorum().Member(NodeID(id)); !ok || m.Voter {
		return fmt.Errorf("%w: node %d is not an observer", ErrInvalidQuorumChange, NodeID(id))
	}
	return c.AddVoter(ctx, id, "")
}

// AddLearner adds node id as an observer at addr (nodes not listed in the
// voters do this themselves when they start).
func (c *Controller) AddLearner(ctx context.Context, id uint64, addr string) error {
	return c.changeQuorum(ctx, pb.ConfChangeAddLearnerNode, id, addr)
}

// RemoveMember removes voter or observer id from the quorum. Call it on
// another member than id (a removed node may never hear that its removal
// committed). Removing the leader makes it step down once the change
// applies. The last voter cannot be removed; a non-member is a no-op.
func (c *Controller) RemoveMember(ctx context.Context, id uint64) error {
	return c.changeQuorum(ctx, pb.ConfChangeRemoveNode, id, "")
}

// changeQuorum proposes one configuration change and waits until it
// applies on this node.
func (c *Controller) changeQuorum(ctx context.Context, typ pb.ConfChangeType, id uint64, addr string) error {
	if id == 0 || id > 1<<31 {
		return fmt.Errorf("%w: raft id %d out of range", ErrInvalidQuorumChange, id)
	}
	pid := c.nextID.Add(1)
	cc := &pb.ConfChangeV2{
		Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(id)}},
		Context: confContext{Addr: addr, Node: c.cfg.NodeID, ID: pid}.encode(),
	}
	_, err := c.submit(ctx, &proposal{id: pid, cc: cc})
	return err
}

// leaderChanged fails the proposals that never reached the local log: the
// leader they were forwarded to is gone. Those in the log resolve when
// their index applies. Loop only.
func (c *Controller) leaderChanged(lead uint64) {
	c.lead = lead
	if lead == raft.None {
		c.leadLostAt = c.ticks
	}
	c.probing = false
	for id, p := range c.waiters {
		if p.index == 0 {
			c.dropped(id, "the leader changed before it reached the log")
		}
	}
	if c.running && lead != raft.None {
		c.log.Info("metadata: active controller", "node", NodeID(lead), "term", c.rn.BasicStatus().GetTerm())
	}
}

// report is a Transport report or a join request queued for the loop.
type report struct {
	kind uint8 // reportUnreachable, reportSnapshot or reportJoin
	id   uint64
	snap raft.SnapshotStatus
	join JoinRequest
}

const (
	reportUnreachable = iota
	reportSnapshot
	reportJoin
)

// maxReports bounds the queue; unreachable reports and join requests
// beyond it are dropped (both repeat), snapshot reports never are.
const maxReports = 4096

func (c *Controller) queueReport(r report) {
	c.reportMu.Lock()
	if len(c.reports) < maxReports || r.kind == reportSnapshot {
		c.reports = append(c.reports, r)
	}
	c.reportMu.Unlock()
	select {
	case c.reportc <- struct{}{}:
	default:
	}
}

func (c *Controller) drainReports() {
	c.reportMu.Lock()
	rs := c.reports
	c.reports = nil
	c.reportMu.Unlock()
	for _, r := range rs {
		switch r.kind {
		case reportUnreachable:
			c.rn.ReportUnreachable(r.id)
		case reportSnapshot:
			c.rn.ReportSnapshot(r.id, r.snap)
		case reportJoin:
			c.handleJoin(r.join)
		}
	}
}

// receiver is the Controller as a Transport's Receiver.
type receiver struct{ c *Controller }

func (r receiver) Step(ctx context.Context, m *pb.Message) error { return r.c.Step(ctx, m) }
func (r receiver) ReportUnreachable(id uint64) {
	r.c.queueReport(report{kind: reportUnreachable, id: id})
}
func (r receiver) ReportSnapshot(id uint64, st raft.SnapshotStatus) {
	r.c.queueReport(report{kind: reportSnapshot, id: id, snap: st})
}
func (r receiver) Join(req JoinRequest) { r.c.queueReport(report{kind: reportJoin, join: req}) }

// QuorumStatus describes the metadata quorum as one node sees it,
// refreshed every Raft tick (TickInterval), and at once when a
// configuration change applies, leadership changes or a snapshot is
// installed: a caller whose AddVoter, RemoveMember or TransferLeadership
// returned sees the change.
type QuorumStatus struct {
	// Leader is the node id of the active controller, -1 when none is
	// known (always on a removed node); Term its Raft term.
	Leader int32
	Term   uint64
	// Removed: this node was removed from the quorum while it ran (see
	// Controller.Removed); Members is the last configuration it applied.
	Removed bool
	// Committed and Applied are this node's commit index and the index of
	// the last entry it applied.
	Committed, Applied uint64
	// IsLeader: this node is the active controller, so Match and
	// RecentActive below are filled in.
	IsLeader bool
	// Members lists voters and observers by node id.
	Members []QuorumMember
}

// QuorumMember is one voter or observer.
type QuorumMember struct {
	NodeID int32
	RaftID uint64
	Addr   string // controller address, "" when unknown
	Voter  bool   // false: observer (Raft learner)
	// Match is the last log index known to be on the member, and
	// RecentActive whether the leader heard from it within the last
	// election timeout (controller.quorum.election.timeout.ms). Only on
	// the leader; the local node counts as active.
	Match        uint64
	RecentActive bool
	// LastHeard is when this node last received a Raft message from the
	// member (zero: never since start). The leader hears from every
	// member at least once per heartbeat (one tick), so on the leader
	// time.Since(LastHeard) is how long a member has been silent.
	LastHeard time.Time
}

// Member returns the member with this node id.
func (s QuorumStatus) Member(nodeID int32) (QuorumMember, bool) {
	for _, m := range s.Members {
		if m.NodeID == nodeID {
			return m, true
		}
	}
	return QuorumMember{}, false
}

// Quorum returns the quorum as this node sees it. The active controller
// (IsLeader) uses it to tell which members are alive: RecentActive and
// LastHeard.
func (c *Controller) Quorum() QuorumStatus {
	if s := c.status.Load(); s != nil {
		return *s
	}
	return QuorumStatus{Leader: -1}
}

// publishStatus refreshes what Quorum returns. Loop (or Start before the
// loop runs) only.
func (c *Controller) publishStatus() {
	st := c.rn.BasicStatus()
	s := &QuorumStatus{Leader: -1, Term: st.GetTerm(), Committed: st.GetCommit(), Applied: c.Image().Index, IsLeader: c.isLeader,
		Removed: c.removed}
	if st.Lead != raft.None && !c.removed {
		s.Leader = NodeID(st.Lead)
	}
	var progress map[uint64]tracker.Progress
	if c.isLeader {
		progress = map[uint64]tracker.Progress{}
		c.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { progress[id] = pr })
	}
	now := time.Now()
	add := func(id uint64, voter bool) {
		m := QuorumMember{NodeID: NodeID(id), RaftID: id, Addr: c.Image().Controllers[NodeID(id)], Voter: voter,
			LastHeard: c.lastHeard[id]}
		if pr, ok := progress[id]; ok {
			m.Match, m.RecentActive = pr.Match, pr.RecentActive
		}
		if id == c.cfg.NodeID {
			m.LastHeard, m.RecentActive = now, c.isLeader
		}
		s.Members = append(s.Members, m)
	}
	for _, id := range c.confState.GetVoters() {
		add(id, true)
	}
	for _, id := range c.confState.GetLearners() {
		add(id, false)
	}
	for id := range c.lastHeard { // bounded by the membership
		if !c.isVoter(id) && !c.isLearner(id) {
			delete(c.lastHeard, id)
		}
	}
	slices.SortFunc(s.Members, func(a, b QuorumMember) int { return cmp.Compare(a.NodeID, b.NodeID) })
	c.status.Store(s)
}

// LastSeen reports when this node last received a Raft message from
// member nodeID (for the local node: now), and false when it never did
// since start or nodeID is not a member. It is meaningful on the active
// controller, which every member answers at each heartbeat, so there
// time.Since(LastSeen) is how long a broker has been silent. As of the
// last tick.
func (c *Controller) LastSeen(nodeID int32) (time.Time, bool) {
	m, ok := c.Quorum().Member(nodeID)
	if !ok || m.LastHeard.IsZero() {
		return time.Time{}, false
	}
	return m.LastHeard, true
}

// CaughtUp reports, on the active controller, whether member nodeID was
// heard from within the last election timeout (Raft's RecentActive, or a
// message received) and holds the metadata log
// to within a few entries of the commit index (as for PromoteLearner).
// Always true for the local node; false on a node that is not the leader.
func (c *Controller) CaughtUp(nodeID int32) bool {
	q := c.Quorum()
	if !q.IsLeader {
		return false
	}
	m, ok := q.Member(nodeID)
	if !ok {
		return false
	}
	active := m.RecentActive || time.Since(m.LastHeard) < c.electionTimeout()
	return RaftID(nodeID) == c.cfg.NodeID || active && m.Match+promoteMaxLag >= q.Committed
}
