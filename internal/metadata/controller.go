package metadata

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Controller runs the metadata Raft node: Open replays storage, Start runs
// the Ready loop, Propose appends records, Image reads the applied state.
//
// Ownership: the fields under "loop state" belong to the goroutine running
// run (between Start and its exit), and to Open/Close when it is not
// running. Other goroutines talk to it through propc, recvc and the
// reports queue (reportMu, reportc). image, leader, status and the
// subscriptions are safe for concurrent use.
type Controller struct {
	cfg Config
	log *slog.Logger

	image  atomic.Pointer[Image]
	leader atomic.Uint64 // raft id of the known leader, 0 = none (or removed)
	nextID atomic.Uint64 // proposal ids
	// removedAt is the index of the applied configuration change that
	// removed this node while it ran, 0 while it is a member (or joining).
	removedAt atomic.Uint64

	subMu sync.Mutex
	subs  map[*subscription]struct{}

	propc chan *proposal
	recvc chan *pb.Message
	cmdc  chan func() // run on the loop goroutine

	// Transport reports and join requests, queued for the loop; reportc
	// (buffer 1) signals that the queue is not empty.
	reportMu sync.Mutex
	reports  []report
	reportc  chan struct{}

	status atomic.Pointer[QuorumStatus]

	startMu  sync.Mutex
	started  bool
	closed   bool
	stopc    chan struct{} // closed by Close
	donec    chan struct{} // closed when run exits
	readyc   chan struct{} // closed when Start's condition first holds
	fatalErr error         // why run exited early; read after donec

	closeOnce sync.Once
	closeErr  error

	// loop state
	rn          *raft.RawNode
	ms          *raft.MemoryStorage
	wal         *wal
	hs          *pb.HardState // last persisted
	confState   *pb.ConfState
	appliedTerm uint64
	snapIndex   uint64 // index of the newest snapshot file
	waiters     map[uint64]*proposal
	isLeader    bool
	lead        uint64            // leader as of the last SoftState
	ticks       uint64            // ticks since run started
	seen        map[uint64]uint64 // log index -> id of a waiting proposal appended there
	confPending uint64            // index of the newest conf change appended to the local log
	lastHeard   map[uint64]time.Time
	joinAt      map[uint64]uint64 // raft id -> tick its join conf change was proposed
	peers       map[uint64]string // last given to Transport.SetPeers
	running     bool              // run has started
	confIndex   uint64            // index of the last applied conf change
	snapWanted  bool              // raft asked for a snapshot newer than snapIndex
	removed     bool              // applied a change removing this node (reset by Open)
	removedIdx  uint64            // index of that change
	staleLogged time.Time         // last "image is stale" warning
	leadLostAt  uint64            // tick when the leader was last lost (lead became 0)
	probing     bool              // leaderless long enough to ask whether it is still a member
	parting     map[uint64]parting
	statusDirty bool     // publishStatus is due at the end of the Ready
	answers     []answer // results to send once the Ready is handled
}

// parting is the address of a member just removed, kept in the
// Transport's peers for partingTicks so that the messages already queued
// to it (the commit index that tells it about its own removal) are sent
// rather than dropped with its connection.
type parting struct {
	addr  string
	until uint64 // tick
}

// partingTicks is how long a removed member's address stays with the
// Transport.
const partingTicks = 2 * ElectionTicks

// raftStorage is the MemoryStorage Raft reads, except that it withholds a
// snapshot older than the last applied configuration change and has the
// loop take a fresh one: a member added after the snapshot would refuse
// it (a snapshot must name its recipient in its ConfState), and Raft
// retries the send after ErrSnapshotTemporarilyUnavailable. Raft calls it
// from the loop goroutine only.
type raftStorage struct {
	*raft.MemoryStorage
	c *Controller
}

func (s raftStorage) Snapshot() (*pb.Snapshot, error) {
	snap, err := s.MemoryStorage.Snapshot()
	if err == nil && snap.GetMetadata().GetIndex() < s.c.confIndex {
		s.c.snapWanted = true
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return snap, err
}

type subscription struct{ ch chan struct{} }

type proposal struct {
	id   uint64
	data []byte              // an EntryNormal's data, or
	cc   *pb.ConfChangeV2    // a configuration change (quorum.go)
	done chan proposalResult // buffered 1

	// loop state
	tick  uint64 // when handed to Raft
	index uint64 // log index where it was appended locally; 0 = not yet
}

type proposalResult struct {
	res Result
	err error
}

// Open replays the snapshot and WAL in cfg.Dir (creating it on first use,
// bootstrapping the Raft configuration from cfg.Voters, or a one-voter
// configuration of cfg.NodeID when Voters is empty) and applies every
// committed entry, so Image is current when Open returns. It starts no
// goroutines; Close releases the files (not the Transport, which belongs to
// the caller).
func Open(cfg Config) (*Controller, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "metadata"),
		subs:    map[*subscription]struct{}{},
		propc:   make(chan *proposal),
		cmdc:    make(chan func()),
		recvc:   make(chan *pb.Message, 256),
		reportc: make(chan struct{}, 1),
		stopc:   make(chan struct{}),
		donec:   make(chan struct{}),
		readyc:  make(chan struct{}),
		waiters: map[uint64]*proposal{},
		seen:    map[uint64]uint64{},

		lastHeard: map[uint64]time.Time{},
		joinAt:    map[uint64]uint64{},
		parting:   map[uint64]parting{},
	}
	var seed [8]byte
	rand.Read(seed[:])
	c.nextID.Store(binary.LittleEndian.Uint64(seed[:]) >> 1)

	r, err := recoverDir(cfg.FS, cfg.Dir, c.log)
	if err != nil {
		return nil, err
	}
	c.ms, c.wal, c.hs = r.ms, r.wal, r.hs
	im := emptyImage()
	c.confState = &pb.ConfState{}
	if r.snap != nil {
		if im, err = DecodeImage(r.snap.GetData()); err != nil {
			c.wal.close()
			return nil, err
		}
		if im.Index != r.snap.GetMetadata().GetIndex() {
			c.wal.close()
			return nil, fmt.Errorf("%w: snapshot %d holds image %d", ErrCorrupt, r.snap.GetMetadata().GetIndex(), im.Index)
		}
		c.confState = proto.Clone(r.snap.GetMetadata().GetConfState()).(*pb.ConfState)
		c.snapIndex = im.Index
		c.appliedTerm = r.snap.GetMetadata().GetTerm()
	}
	c.image.Store(im)

	err = c.startRaft(r.fresh)
	if err != nil {
		c.wal.close()
		return nil, err
	}
	if err := c.checkMembership(r.fresh); err != nil {
		c.wal.close()
		return nil, err
	}
	// A node that finds its own removal in its log asks to rejoin as an
	// observer (announce), like any node that is not a member; only a
	// removal applied while running keeps it out (quorum.go).
	c.removed, c.removedIdx = false, 0
	c.removedAt.Store(0)
	c.publishLeader()
	if got := c.Image().ClusterID; cfg.ClusterID != "" && got != "" && got != cfg.ClusterID {
		c.wal.close()
		return nil, fmt.Errorf("%w: configured %q, metadata log has %q", ErrClusterIDMismatch, cfg.ClusterID, got)
	}
	c.log.Debug("metadata: opened", "dir", cfg.Dir, "index", c.Image().Index, "snapshot", c.snapIndex)
	return c, nil
}

// startRaft creates the RawNode on the recovered storage, bootstraps a
// fresh log, and applies what is committed but not yet in the image
// (persisting the bootstrap entry when fresh). Raft panics on inconsistent
// state; here that can only come from damaged files, so it becomes an
// error.
func (c *Controller) startRaft(fresh bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: raft rejected the recovered state in %s: %v", ErrCorrupt, c.cfg.Dir, p)
		}
	}()
	c.rn, err = raft.NewRawNode(&raft.Config{
		ID:                        c.cfg.NodeID,
		ElectionTick:              ElectionTicks,
		HeartbeatTick:             HeartbeatTicks,
		Storage:                   raftStorage{c.ms, c},
		Applied:                   c.Image().Index,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{c.log},
	})
	if err == nil && fresh {
		if peers := c.bootstrapPeers(); len(peers) > 0 {
			err = c.rn.Bootstrap(peers)
		}
	}
	for err == nil && c.rn.HasReady() {
		err = c.handleReady(c.rn.Ready())
	}
	return err
}

// Start starts the Transport and runs the Raft loop. With one voter it
// campaigns, and returns once this node is leader, every entry of the log
// is applied and the cluster id is set (generated and proposed if neither
// the log nor the Config has one). With several voters, and on an observer,
// it returns once a leader is known, this node has applied an entry of the
// leader's term (so it holds everything committed before) and the cluster
// id is set. It returns ctx's error if that takes longer than ctx allows
// (the loop keeps running; call Close).
func (c *Controller) Start(ctx context.Context) error {
	c.startMu.Lock()
	switch {
	case c.closed:
		c.startMu.Unlock()
		return ErrClosed
	case c.started:
		c.startMu.Unlock()
		return errors.New("metadata: controller already started")
	}
	c.started = true
	c.cfg.Transport.Start(receiver{c})
	c.updatePeers()
	c.publishStatus()
	go c.run()
	c.startMu.Unlock()

	select {
	case <-c.readyc:
	case <-c.donec:
		return c.loopErr()
	case <-ctx.Done():
		return fmt.Errorf("metadata: waiting for a quorum leader and to catch up with its log: %w", ctx.Err())
	}
	id := c.cfg.ClusterID
	if id == "" {
		id = NewClusterID()
	}
	for c.Image().ClusterID == "" {
		err := c.Propose(ctx, Record{SetClusterID: &SetClusterID{ID: id}})
		switch {
		case errors.Is(err, ErrClusterIDMismatch) && c.cfg.ClusterID == "":
			return nil // another proposer set one first
		case errors.Is(err, ErrProposalDropped) && ctx.Err() == nil:
			continue // lost in a leader change; the loop re-checks
		case err != nil:
			return fmt.Errorf("metadata: setting the cluster id: %w", err)
		}
	}
	if got := c.Image().ClusterID; c.cfg.ClusterID != "" && got != c.cfg.ClusterID {
		return fmt.Errorf("%w: configured %q, metadata log has %q", ErrClusterIDMismatch, c.cfg.ClusterID, got)
	}
	return nil
}

// Close stops the loop, takes a snapshot if anything was applied since the
// last one, syncs and closes the files. The active controller of a quorum
// with other voters first hands leadership to the most up-to-date one
// (waiting at most two election timeouts), so the quorum does not wait an
// election timeout to notice it is gone. It is idempotent; pending and
// later proposals fail with ErrClosed.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.resign()
		c.startMu.Lock()
		c.closed = true
		started := c.started
		close(c.stopc)
		c.startMu.Unlock()
		if started {
			<-c.donec
		}
		// The loop is gone: its state is ours.
		if c.fatalErr == nil && c.Image().Index > c.snapIndex {
			c.closeErr = c.snapshot()
		}
		if err := c.wal.close(); c.closeErr == nil {
			c.closeErr = err
		}
	})
	return c.closeErr
}

// Image returns the current image; never nil after Open. Do not modify it.
func (c *Controller) Image() *Image { return c.image.Load() }

// Leader returns the Raft id of the current leader as far as this node
// knows, or 0; always 0 on a node removed from the quorum (Removed), which
// no longer hears from the leader.
func (c *Controller) Leader() uint64 { return c.leader.Load() }

// IsLeader reports whether this node is the Raft leader, i.e. the active
// controller that accepts proposals.
func (c *Controller) IsLeader() bool { return c.leader.Load() == c.cfg.NodeID }

// Removed returns an error wrapping ErrRemoved (and so ErrNotLeader) when
// this node was removed from the metadata quorum while it ran, and nil
// otherwise. A removed node's image no longer advances; the error says
// how to bring the node back.
func (c *Controller) Removed() error {
	if idx := c.removedAt.Load(); idx != 0 {
		return c.removedError(idx)
	}
	return nil
}

// Step hands a Raft message received from a peer to the loop; it is the
// receiving end of a Transport. A one-voter cluster never receives any.
func (c *Controller) Step(ctx context.Context, m *pb.Message) error {
	select {
	case c.recvc <- m:
		return nil
	case <-c.stopc:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Propose appends recs as one Raft entry and waits until it is applied on
// this node. Any member may propose: a follower forwards the entry to the
// leader. The batch applies atomically; the returned error is the apply
// error (e.g. ErrTopicExists), ErrProposalDropped, ErrNotLeader (not
// started), ErrRemoved (this node is no longer a member of the quorum;
// errors.Is(err, ErrNotLeader) holds), ErrClosed or ctx's error. While no
// leader is known Propose waits for one (until ctx ends). After a ctx
// error or ErrProposalDropped the outcome is unknown: the entry may still
// apply, so retry with that in mind (a repeated create gets
// ErrTopicExists).
func (c *Controller) Propose(ctx context.Context, recs ...Record) error {
	_, err := c.propose(ctx, recs)
	return err
}

func (c *Controller) propose(ctx context.Context, recs []Record) (Result, error) {
	id := c.nextID.Add(1)
	data, err := EncodeEntry(c.cfg.NodeID, id, recs)
	if err != nil {
		return Result{}, err
	}
	return c.submit(ctx, &proposal{id: id, data: data})
}

// submit hands p to the loop and waits for its result, retrying (with a
// fresh id) while no leader is known: nothing was proposed then.
func (c *Controller) submit(ctx context.Context, p *proposal) (Result, error) {
	for {
		res, err := c.submitOnce(ctx, p)
		if !errors.Is(err, errNoLeader) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return Result{}, fmt.Errorf("%w (%w)", ctx.Err(), err)
		case <-c.donec:
			return Result{}, c.loopErr()
		case <-time.After(c.cfg.TickInterval):
		}
		// Nothing was proposed: resubmit p as it is.
	}
}

func (c *Controller) submitOnce(ctx context.Context, p *proposal) (Result, error) {
	c.startMu.Lock()
	started, closed := c.started, c.closed
	c.startMu.Unlock()
	switch {
	case closed:
		return Result{}, ErrClosed
	case !started:
		return Result{}, fmt.Errorf("%w: controller not started", ErrNotLeader)
	}
	if err := c.Removed(); err != nil {
		return Result{}, err
	}
	p.done = make(chan proposalResult, 1)
	select {
	case c.propc <- p:
	case <-c.donec:
		return Result{}, c.loopErr()
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	select {
	case r := <-p.done:
		return r.res, r.err
	case <-c.donec:
		select { // the result may have raced the exit
		case r := <-p.done:
			return r.res, r.err
		default:
			return Result{}, c.loopErr()
		}
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// loopErr is the error for callers after run exited: call it after donec,
// or from run itself as it exits.
func (c *Controller) loopErr() error {
	if c.fatalErr != nil {
		return fmt.Errorf("%w: %v", ErrClosed, c.fatalErr)
	}
	return ErrClosed
}

// AllocateProducerIDs reserves count producer ids through a ProducerIDBlock
// record and returns the first; the block is [first, first+count). Ids are
// never handed out twice, across restarts too.
func (c *Controller) AllocateProducerIDs(ctx context.Context, count int64) (first int64, err error) {
	res, err := c.propose(ctx, []Record{{ProducerIDBlock: &ProducerIDBlock{Count: count}}})
	if err != nil {
		return 0, err
	}
	return res.ProducerIDs[0], nil
}

// Subscribe returns a channel that receives after each image change. Sends
// never block and coalesce (buffer 1): after a receive, read Image for the
// latest state. cancel unsubscribes; it is idempotent.
func (c *Controller) Subscribe() (<-chan struct{}, func()) {
	s := &subscription{ch: make(chan struct{}, 1)}
	c.subMu.Lock()
	c.subs[s] = struct{}{}
	c.subMu.Unlock()
	return s.ch, func() {
		c.subMu.Lock()
		delete(c.subs, s)
		c.subMu.Unlock()
	}
}

func (c *Controller) notify() {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	for s := range c.subs {
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
}

// maxBatch bounds the proposals taken into one Ready (one WAL write and
// fsync for all of them: group commit).
const maxBatch = 1024

// run is the Ready loop: the only goroutine touching loop state.
func (c *Controller) run() {
	defer close(c.donec)
	// Waiting proposers learn why the loop stopped (a failed WAL write,
	// say), not only that it did.
	defer func() { c.failWaiters(c.loopErr()) }()
	tick := time.NewTicker(c.cfg.TickInterval)
	defer tick.Stop()
	c.running = true

	if slices.Equal(c.confState.GetVoters(), []uint64{c.cfg.NodeID}) {
		if err := c.rn.Campaign(); err != nil {
			c.fatalErr = err
			return
		}
	}
	c.announce()
	for {
		err := c.drainReady()
		c.deliver()
		if err != nil {
			c.fatalErr = err
			c.log.Error("metadata: controller stopped", "err", err)
			return
		}
		select {
		case <-c.stopc:
			return
		case <-tick.C:
			c.onTick()
		case m := <-c.recvc:
			c.lastHeard[m.GetFrom()] = time.Now()
			if c.refuseForwarded(m) {
				break
			}
			if err := c.rn.Step(m); err != nil {
				c.log.Debug("metadata: dropped raft message", "type", m.GetType(), "from", m.GetFrom(), "err", err)
			}
		case <-c.reportc:
			c.drainReports()
		case f := <-c.cmdc:
			f()
		case p := <-c.propc:
			c.proposeLocked(p)
		more:
			for range maxBatch - 1 {
				select {
				case p := <-c.propc:
					c.proposeLocked(p)
				default:
					break more
				}
			}
		}
	}
}

// proposeLocked hands a proposal to raft; loop goroutine only. On a
// follower Raft forwards it to the leader; with no leader known it is
// refused at once (errNoLeader, which submit retries).
func (c *Controller) proposeLocked(p *proposal) {
	if c.removed {
		p.done <- proposalResult{err: c.removedError(c.removedIdx)}
		return
	}
	var err error
	if p.cc != nil {
		var skip bool
		if skip, err = c.checkConfChange(p.cc); err == nil && skip {
			p.done <- proposalResult{}
			return
		}
		if err == nil {
			err = c.rn.ProposeConfChange(p.cc)
		}
	} else {
		err = c.rn.Propose(p.data)
	}
	if err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			err = errNoLeader
		}
		p.done <- proposalResult{err: err}
		return
	}
	p.tick, p.index = c.ticks, 0
	c.waiters[p.id] = p
}

// finish takes proposal id, if any, out of the waiters and queues its
// answer; deliver sends the answers after the Ready is handled, so a
// caller whose Propose returns finds subscribers already notified.
func (c *Controller) finish(id uint64, r proposalResult) {
	if p := c.waiters[id]; p != nil {
		delete(c.waiters, id)
		if p.index != 0 && c.seen[p.index] == id {
			delete(c.seen, p.index)
		}
		c.answers = append(c.answers, answer{p, r})
	}
}

type answer struct {
	p *proposal
	r proposalResult
}

func (c *Controller) deliver() {
	for i, a := range c.answers {
		a.p.done <- a.r
		c.answers[i] = answer{}
	}
	c.answers = c.answers[:0]
}

// dropped fails proposal id with ErrProposalDropped.
func (c *Controller) dropped(id uint64, why string) {
	c.finish(id, proposalResult{err: fmt.Errorf("%w: %s", ErrProposalDropped, why)})
}

// proposalTimeoutTicks is how long a proposal may stay out of the local
// log (a forwarded proposal lost on the way, or one Raft refused) before
// it fails with ErrProposalDropped.
const proposalTimeoutTicks = 3 * ElectionTicks

// onTick advances Raft's clock and does the loop's periodic work.
func (c *Controller) onTick() {
	c.rn.Tick()
	c.ticks++
	for id, p := range c.waiters {
		if p.index == 0 && c.ticks-p.tick > proposalTimeoutTicks {
			c.dropped(id, "not appended to the log in time; outcome unknown, retry")
		}
	}
	if c.ticks%ElectionTicks == 0 {
		c.announce()
	}
	c.expireParting()
	if c.removed && time.Since(c.staleLogged) >= staleLogEvery {
		c.staleLogged = time.Now()
		c.log.Warn("metadata: this node is not a member of the metadata quorum: its metadata image is stale and proposals fail",
			"node", NodeID(c.cfg.NodeID), "removed_at", c.removedIdx, "applied", c.Image().Index,
			"fix", c.removedAdvice())
	}
	c.publishStatus()
}

// staleLogEvery is how often a removed node repeats that its image is
// stale.
const staleLogEvery = time.Minute

// trackAppended notes where this node's waiting proposals land in the
// local log, and fails those whose entry was overwritten (a new leader
// replaced an uncommitted tail).
func (c *Controller) trackAppended(ents []*pb.Entry) {
	for _, e := range ents {
		idx := e.GetIndex()
		if e.GetType() != pb.EntryNormal {
			c.confPending = max(c.confPending, idx)
		}
		if len(c.waiters) == 0 && len(c.seen) == 0 {
			continue
		}
		node, id := entryOrigin(e)
		if old, ok := c.seen[idx]; ok && (node != c.cfg.NodeID || old != id) {
			delete(c.seen, idx)
			c.dropped(old, "overwritten by a new leader's log")
		}
		if p := c.waiters[id]; p != nil && node == c.cfg.NodeID {
			p.index = idx
			c.seen[idx] = id
		}
	}
}

func (c *Controller) drainReady() error {
	for c.rn.HasReady() {
		if err := c.handleReady(c.rn.Ready()); err != nil {
			return err
		}
	}
	st := c.rn.BasicStatus()
	if st.Lead != raft.None && c.appliedTerm == st.HardState.GetTerm() {
		select {
		case <-c.readyc:
		default:
			close(c.readyc)
		}
	}
	return nil
}

func (c *Controller) failWaiters(err error) {
	for id := range c.waiters {
		c.finish(id, proposalResult{err: err})
	}
	c.deliver()
}

// handleReady does what Raft asks, in its order: persist the snapshot,
// entries and HardState (synced when MustSync), send messages, apply
// committed entries, Advance. Then it snapshots when due.
func (c *Controller) handleReady(rd raft.Ready) error {
	removed := c.removed
	if rd.SoftState != nil {
		c.isLeader = rd.SoftState.RaftState == raft.StateLeader
		if rd.SoftState.Lead != c.lead {
			c.leaderChanged(rd.SoftState.Lead)
		}
		c.statusDirty = true
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := c.installSnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	var hs *pb.HardState
	if !raft.IsEmptyHardState(rd.HardState) {
		hs = rd.HardState
	}
	c.trackAppended(rd.Entries)
	if err := c.wal.append(rd.Entries, hs, rd.MustSync); err != nil {
		return err
	}
	if err := c.ms.Append(rd.Entries); err != nil {
		return err
	}
	if hs != nil {
		if err := c.ms.SetHardState(hs); err != nil {
			return err
		}
		c.hs = hs
	}
	if len(rd.Messages) > 0 {
		c.cfg.Transport.Send(rd.Messages)
	}
	changed := false
	for _, e := range rd.CommittedEntries {
		ch, err := c.applyEntry(e)
		if err != nil {
			return err
		}
		changed = changed || ch
	}
	c.rn.Advance(rd)
	if c.removed != removed {
		c.membershipChanged()
	}
	if c.statusDirty {
		// Status first: whoever sees the new leader sees the new status.
		c.statusDirty = false
		c.publishStatus()
		c.publishLeader()
		c.publishRemoved()
	}
	if changed {
		c.notify()
	}
	if c.Image().Index-c.snapIndex >= c.cfg.SnapshotEvery || (c.snapWanted && c.Image().Index > c.snapIndex) {
		c.snapWanted = false
		return c.snapshot()
	}
	return nil
}

// applyEntry applies one committed entry and answers its waiter. It
// reports whether the image content changed. An error is fatal.
func (c *Controller) applyEntry(e *pb.Entry) (bool, error) {
	im := c.Image()
	idx := e.GetIndex()
	if idx != im.Index+1 {
		return false, fmt.Errorf("metadata: applying entry %d after %d", idx, im.Index)
	}
	bump := func() {
		next := *im
		next.Index = idx
		c.image.Store(&next)
	}
	c.appliedTerm = e.GetTerm()
	if pid, ok := c.seen[idx]; ok {
		if node, id := entryOrigin(e); node != c.cfg.NodeID || id != pid {
			delete(c.seen, idx)
			c.dropped(pid, "overwritten by a new leader's log")
		}
	}
	switch e.GetType() {
	case pb.EntryConfChange, pb.EntryConfChangeV2:
		return c.applyConfEntry(e)
	}
	if len(e.GetData()) == 0 {
		bump()
		return false, nil
	}
	d, err := decodeEntry(e.GetData())
	var next *Image
	var res Result
	if err == nil {
		next, res, err = Apply(im, idx, d.Records)
	} else {
		next = &Image{}
		*next = *im
		next.Index = idx
	}
	c.image.Store(next)
	if d.Node == c.cfg.NodeID {
		c.finish(d.ID, proposalResult{res: res, err: err})
	}
	if err != nil {
		c.log.Debug("metadata: entry rejected", "index", idx, "err", err)
	}
	return err == nil, nil
}

// snapshot writes a snapshot of the current image, compacts the Raft log
// up to it and rewrites the WAL with what remains.
func (c *Controller) snapshot() error {
	im := c.Image()
	snap, err := c.ms.CreateSnapshot(im.Index, c.confState, EncodeImage(im))
	if err != nil {
		return fmt.Errorf("metadata: snapshot %d: %w", im.Index, err)
	}
	if err := writeSnapshot(c.cfg.FS, c.cfg.Dir, snap); err != nil {
		return err
	}
	if err := c.ms.Compact(im.Index); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return err
	}
	if err := c.rewriteWAL(); err != nil {
		return err
	}
	c.removeSnapshotsBefore(im.Index)
	c.snapIndex = im.Index
	c.log.Debug("metadata: snapshot", "index", im.Index)
	return nil
}

// rewriteWAL replaces the WAL with the HardState and the entries still in
// the (compacted) MemoryStorage.
func (c *Controller) rewriteWAL() error {
	first, _ := c.ms.FirstIndex()
	last, _ := c.ms.LastIndex()
	var ents []*pb.Entry
	if last >= first {
		var err error
		if ents, err = c.ms.Entries(first, last+1, ^uint64(0)); err != nil {
			return err
		}
	}
	return c.wal.rewrite(c.hs, ents)
}

func (c *Controller) removeSnapshotsBefore(index uint64) {
	idx, err := listSnapshots(c.cfg.FS, c.cfg.Dir)
	if err != nil {
		return
	}
	for _, i := range idx {
		if i < index {
			removeFile(c.cfg.FS, c.cfg.Dir, snapName(i))
		}
	}
}

// installSnapshot persists and applies a snapshot received from the leader.
func (c *Controller) installSnapshot(snap *pb.Snapshot) error {
	im, err := DecodeImage(snap.GetData())
	if err != nil {
		return err
	}
	if err := writeSnapshot(c.cfg.FS, c.cfg.Dir, snap); err != nil {
		return err
	}
	if err := c.ms.ApplySnapshot(snap); err != nil {
		return err
	}
	if err := c.rewriteWAL(); err != nil {
		return err
	}
	c.removeSnapshotsBefore(snap.GetMetadata().GetIndex())
	c.snapIndex = snap.GetMetadata().GetIndex()
	c.confState = proto.Clone(snap.GetMetadata().GetConfState()).(*pb.ConfState)
	c.appliedTerm = snap.GetMetadata().GetTerm()
	c.image.Store(im)
	if c.removed && (c.isVoter(c.cfg.NodeID) || c.isLearner(c.cfg.NodeID)) {
		c.removed, c.removedIdx = false, 0 // added back since
	}
	c.statusDirty = true
	for idx, id := range c.seen {
		if idx <= c.snapIndex {
			delete(c.seen, idx)
			c.dropped(id, "the log was replaced by the leader's snapshot; outcome unknown")
		}
	}
	c.updatePeers()
	c.notify()
	c.log.Info("metadata: installed snapshot from the leader", "index", c.snapIndex)
	return nil
}

// Err reports why the controller stopped serving, or nil while it runs.
func (c *Controller) Err() error {
	select {
	case <-c.donec:
		return c.loopErr()
	default:
		return nil
	}
}
