package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/berthmq/berth/internal/metadata"
)

// Controller is what the Supervisor needs of *metadata.Controller.
type Controller interface {
	Image() *metadata.Image
	Propose(ctx context.Context, recs ...metadata.Record) error
	IsLeader() bool
	Subscribe() (<-chan struct{}, func())
}

var _ Controller = (*metadata.Controller)(nil)

// Liveness tells the active controller when it last heard from each
// broker. The metadata quorum implements it (from Raft progress: the last
// message or fetch from the broker's node).
//
// LastSeen returns false for a broker not heard from since this node
// became the active controller (or ever). Its times are on the same clock
// as Config.Now. The local broker of the active controller must count as
// seen, or it will be fenced like a silent one: wrap the Liveness with
// WithLocal.
type Liveness interface {
	LastSeen(brokerID int32) (time.Time, bool)
}

// CatchUp is optionally implemented by a Liveness: a fenced broker is then
// unfenced only once CaughtUp reports its metadata log has caught up with
// the controller's (Kafka unfences a broker when it has caught up).
type CatchUp interface {
	CaughtUp(brokerID int32) bool
}

// shutdownPhase is a broker's place in a controlled shutdown.
type shutdownPhase uint8

const (
	// draining: leaderships are moving off it; it is ShuttingDown (and
	// marked in controlled shutdown in the image, so that no leader adds
	// it to an ISR again and a new active controller keeps draining it).
	draining shutdownPhase = iota + 1
	// shutDown: ControlledShutdown fenced it. It stays fenced whatever
	// LastSeen says (the process talks to the quorum until it exits) until
	// it registers again (RegisterBroker unfences it) or goes silent for a
	// session, after which LastSeen unfences it as any returning broker.
	shutDown
)

// maxAttempts bounds how often one round re-plans after a proposal was
// refused because the image changed under it (metadata.ErrStaleEpoch).
const maxAttempts = 3

// Supervisor applies the cluster policies while this node is the active
// controller: it fences brokers that went silent and unfences those that
// return, moves leaderships off fenced and shutting-down brokers and out
// of their ISRs (Reconcile), runs controlled shutdowns, and rebalances
// leadership back to preferred replicas.
//
// Every round re-reads the image and proposes PartitionChanges fenced on
// the partition epoch, so rounds are idempotent: a decision made on a
// stale image is refused and made again from the new one.
//
// Tick runs one round and is what tests drive; Run calls Tick on a timer
// and after each metadata change. The fields below roundMu belong to
// whoever holds it.
type Supervisor struct {
	ctrl Controller
	live Liveness
	cfg  Config
	log  *slog.Logger

	roundMu sync.Mutex
	active  bool // this node was the active controller at the last round
	// unfencedSince is when a round of this term of activity first saw
	// each unfenced broker unfenced: a new active controller, and a
	// broker just registered or unfenced, give it a full session to be
	// heard from.
	unfencedSince map[int32]time.Time
	nextRebalance time.Time
	shutdown      map[int32]shutdownPhase
}

// New returns a Supervisor over ctrl and live; cfg is defaulted and
// validated.
func New(ctrl Controller, live Liveness, cfg Config) (*Supervisor, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Supervisor{
		ctrl:          ctrl,
		live:          live,
		cfg:           cfg,
		log:           cfg.Logger.With("component", "cluster"),
		shutdown:      map[int32]shutdownPhase{},
		unfencedSince: map[int32]time.Time{},
	}, nil
}

// Run calls Tick every CheckInterval and after every metadata change until
// ctx is done, then returns nil. It does nothing while this node is not the
// active controller. Errors of a round are logged; the next round retries.
func (s *Supervisor) Run(ctx context.Context) error {
	changed, cancel := s.ctrl.Subscribe()
	defer cancel()
	tick := time.NewTicker(s.cfg.CheckInterval)
	defer tick.Stop()
	for {
		if err := s.Tick(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, metadata.ErrNotLeader) {
			s.log.Warn("cluster: supervisor round failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-changed:
		}
	}
}

// Tick runs one round if this node is the active controller: fence and
// unfence brokers by liveness, reconcile every partition with the brokers'
// states, and, when due, rebalance preferred leaders. It returns after its
// proposals applied, or with the error that stopped them.
func (s *Supervisor) Tick(ctx context.Context) error {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	if !s.activate() {
		return nil
	}
	_, err := s.round(ctx, true)
	return err
}

// activate tracks whether this node is the active controller; a new term
// of activity starts the brokers' sessions afresh (a new controller has
// not heard from anyone yet) and forgets controlled shutdowns. roundMu held.
func (s *Supervisor) activate() bool {
	if !s.ctrl.IsLeader() {
		if s.active {
			s.log.Info("cluster: no longer the active controller")
		}
		s.active = false
		return false
	}
	if !s.active {
		now := s.cfg.Now()
		s.active = true
		s.nextRebalance = now.Add(s.cfg.LeaderImbalanceCheckInterval)
		clear(s.shutdown)
		clear(s.unfencedSince)
		s.log.Info("cluster: active controller; supervising brokers")
	}
	return true
}

// item is one record of a round and what to log once it applied.
type item struct {
	rec  metadata.Record
	note func()
}

// round plans from the current image and proposes until the plan applied
// or maxAttempts plans were refused; it returns the number of records
// applied. roundMu held.
//
// The first attempt proposes the plan in entries of MaxRecordsPerProposal
// records, but an entry applies atomically, so one partition changed
// under the plan (by a leader's AlterPartition, say) refuses the whole
// entry. Later attempts therefore propose each record of the new plan on
// its own and skip the refused ones, so that a busy cluster cannot starve
// the others.
func (s *Supervisor) round(ctx context.Context, rebalance bool) (int, error) {
	applied := 0
	for attempt := 1; ; attempt++ {
		now := s.cfg.Now()
		due := rebalance && !s.cfg.DisableAutoLeaderRebalance && !now.Before(s.nextRebalance)
		items := s.plan(s.ctrl.Image(), now, due)
		n, err := s.propose(ctx, items, attempt > 1)
		applied += n
		if err == nil {
			if due {
				s.nextRebalance = now.Add(s.cfg.LeaderImbalanceCheckInterval)
			}
			return applied, nil
		}
		if !retryable(err) || attempt == maxAttempts {
			return applied, err
		}
		s.log.Debug("cluster: proposal refused; planning again", "err", err)
	}
}

// retryable reports an error of applying the records (the image changed
// under the plan, e.g. metadata.ErrStaleEpoch or a deleted topic), as
// opposed to this node losing leadership, closing or ctx ending.
func retryable(err error) bool {
	return !errors.Is(err, metadata.ErrNotLeader) && !errors.Is(err, metadata.ErrClosed) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// propose proposes items in order, in entries of at most
// MaxRecordsPerProposal records, and logs each item once its entry
// applied. It stops at the first error, or with single, proposes one
// record per entry, goes on past refused records and returns the first
// refusal at the end. It returns the number of records applied.
func (s *Supervisor) propose(ctx context.Context, items []item, single bool) (int, error) {
	size := s.cfg.MaxRecordsPerProposal
	if single {
		size = 1
	}
	done := 0
	var refused error
	for len(items) > 0 {
		chunk := items[:min(len(items), size)]
		items = items[len(chunk):]
		recs := make([]metadata.Record, len(chunk))
		for i, it := range chunk {
			recs[i] = it.rec
		}
		if err := s.ctrl.Propose(ctx, recs...); err != nil {
			if !single || !retryable(err) {
				return done, err
			}
			if refused == nil {
				refused = err
			}
			continue
		}
		for _, it := range chunk {
			if it.note != nil {
				it.note()
			}
		}
		done += len(chunk)
	}
	return done, refused
}

// plan decides the round's records from im: broker fencing first, then
// the partitions' reconciliation, then (when due) preferred-leader moves.
func (s *Supervisor) plan(im *metadata.Image, now time.Time, rebalance bool) []item {
	states, items := s.brokerStates(im, now)
	touched := map[TopicPartition]bool{}
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		unclean := UncleanEnabled(im, t, s.cfg.UncleanLeaderElection)
		for i := range t.Partitions {
			p := &t.Partitions[i]
			d, changed := Reconcile(p, states, unclean)
			if !changed {
				if c, done := completion(name, p, states); done {
					touched[TopicPartition{name, p.Index}] = true
					items = append(items, s.reassignItem(p, c))
				}
				continue
			}
			touched[TopicPartition{name, p.Index}] = true
			items = append(items, s.changeItem(name, p, d, "reconcile"))
		}
	}
	if rebalance {
		items = append(items, s.rebalance(im, states, touched)...)
	}
	return items
}

// reassignItem is the record completing p's reassignment with c.
func (s *Supervisor) reassignItem(p *metadata.Partition, c *metadata.PartitionChange) item {
	old := *p
	return item{
		rec: metadata.Record{PartitionChange: c},
		note: func() {
			s.log.Info("cluster: reassignment complete", "topic", c.Topic, "partition", old.Index,
				"replicas", old.Replicas, "new_replicas", c.Replicas, "leader", old.Leader, "new_leader", *c.Leader)
		},
	}
}

// Reassign starts or cancels partition reassignments
// (AlterPartitionReassignments), each proposed on its own; they complete
// in later rounds once the new replicas are in sync. It fails as a whole
// only with metadata.ErrNotLeader (or ctx's error).
func (s *Supervisor) Reassign(ctx context.Context, reqs []Reassignment) ([]ReassignResult, error) {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	if !s.activate() {
		return nil, fmt.Errorf("%w: reassign partitions", metadata.ErrNotLeader)
	}
	out := make([]ReassignResult, len(reqs))
	for i, r := range reqs {
		out[i].TopicPartition = r.TopicPartition
		for attempt := 1; ; attempt++ {
			c, err := PlanReassignment(s.ctrl.Image(), r)
			if err == nil && c != nil {
				err = s.ctrl.Propose(ctx, metadata.Record{PartitionChange: c})
				if err == nil {
					s.log.Info("cluster: reassignment started", "topic", r.Topic, "partition", r.Partition,
						"target", r.Target, "adding", c.AddingReplicas, "removing", c.RemovingReplicas)
				}
			}
			if err != nil && retryable(err) && attempt < maxAttempts {
				continue
			}
			if errors.Is(err, metadata.ErrNotLeader) {
				return nil, err
			}
			out[i].Err = err
			break
		}
	}
	return out, nil
}

// changeItem is the record taking p to d, logged as reason.
func (s *Supervisor) changeItem(topic string, p *metadata.Partition, d Decision, reason string) item {
	old := *p
	return item{
		rec: metadata.Record{PartitionChange: d.Change(topic, p)},
		note: func() {
			args := []any{"topic", topic, "partition", old.Index, "reason", reason,
				"leader", old.Leader, "new_leader", d.Leader, "isr", old.ISR, "new_isr", d.ISR}
			switch {
			case d.Unclean:
				s.log.Warn("cluster: unclean leader election: records acknowledged by the old ISR may be lost", args...)
			case d.Leader == metadata.NoLeader && old.Leader != metadata.NoLeader:
				s.log.Warn("cluster: partition offline: no live in-sync replica", args...)
			default:
				s.log.Info("cluster: partition changed", args...)
			}
		},
	}
}

// brokerStates decides each registered broker's state for this round and
// the FenceBroker records that bring the image in line with it. roundMu
// held (it forgets finished shutdowns).
func (s *Supervisor) brokerStates(im *metadata.Image, now time.Time) (Brokers, []item) {
	states := make(Brokers, len(im.Brokers))
	var items []item
	timeout := s.cfg.SessionTimeout
	for _, id := range im.BrokerIDs() {
		b := im.Brokers[id]
		seen, ok := s.live.LastSeen(id)
		heard := ok && now.Sub(seen) < timeout
		since, seenUnfenced := s.unfencedSince[id]
		switch {
		case b.Fenced:
			delete(s.unfencedSince, id)
		case !seenUnfenced:
			since = now
			s.unfencedSince[id] = now
		}
		alive := heard || now.Sub(since) < timeout
		phase := s.shutdown[id]
		if phase == shutDown && (!b.Fenced || !heard) {
			delete(s.shutdown, id) // registered again, or gone for a session
			phase = 0
		}
		switch {
		case !b.Fenced && !alive:
			states[id] = Offline
			items = append(items, s.fenceItem(id, true, b.InControlledShutdown, "not heard from for broker.session.timeout.ms", seen, ok))
		case !b.Fenced && (phase == draining || b.InControlledShutdown):
			states[id] = ShuttingDown
		case !b.Fenced:
			states[id] = Live
		case phase == 0 && heard && s.caughtUp(id):
			states[id] = Live
			items = append(items, s.fenceItem(id, false, false, "heard from again", seen, ok))
		default:
			states[id] = Offline
		}
	}
	return states, items
}

func (s *Supervisor) caughtUp(id int32) bool {
	c, ok := s.live.(CatchUp)
	return !ok || c.CaughtUp(id)
}

func (s *Supervisor) fenceItem(id int32, fenced, shutdown bool, why string, seen time.Time, ok bool) item {
	return item{
		rec: metadata.Record{FenceBroker: &metadata.FenceBroker{ID: id, Fenced: fenced, InControlledShutdown: shutdown}},
		note: func() {
			msg := "cluster: broker unfenced"
			if fenced {
				msg = "cluster: broker fenced"
			}
			args := []any{"broker", id, "reason", why}
			if ok {
				args = append(args, "last_seen", seen)
			}
			s.log.Info(msg, args...)
		},
	}
}

// rebalance returns the preferred-leader moves of the automatic rebalance:
// for each broker whose share of preferred partitions led elsewhere is
// above leader.imbalance.per.broker.percentage, every such partition whose
// preferred replica can lead again (ElectPreferred), except partitions this
// round already changes.
func (s *Supervisor) rebalance(im *metadata.Image, states Brokers, touched map[TopicPartition]bool) []item {
	type tally struct {
		preferred, elsewhere int
		moves                []item
	}
	per := map[int32]*tally{}
	for _, name := range im.TopicNames() {
		for i := range im.Topics[name].Partitions {
			p := &im.Topics[name].Partitions[i]
			if len(p.Replicas) == 0 {
				continue
			}
			pref := p.Replicas[0]
			t := per[pref]
			if t == nil {
				t = &tally{}
				per[pref] = t
			}
			t.preferred++
			if p.Leader == pref {
				continue
			}
			t.elsewhere++
			if touched[TopicPartition{name, p.Index}] {
				continue
			}
			if d, err := ElectPreferred(p, states); err == nil {
				t.moves = append(t.moves, s.changeItem(name, p, d, "preferred leader rebalance"))
			}
		}
	}
	var items []item
	pct := s.cfg.imbalancePercent()
	for _, id := range slices.Sorted(maps.Keys(per)) {
		t := per[id]
		if t.elsewhere*100 > pct*t.preferred {
			items = append(items, t.moves...)
		}
	}
	return items
}

// ControlledShutdown moves every leadership the broker holds to another
// in-sync replica, removes it from the ISRs it follows in, and then fences
// it; the broker process may exit once it returns. Leaderships no other
// in-sync replica can take stay with the broker until the fence, and then
// follow the rule for a fenced leader (offline, or an unclean election
// where the topic allows it): ControlledShutdown returns those partitions.
//
// It fails with metadata.ErrNotLeader on a node that is not the active
// controller and metadata.ErrUnknownBroker for an unregistered broker.
func (s *Supervisor) ControlledShutdown(ctx context.Context, id int32) ([]TopicPartition, error) {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	if !s.activate() {
		return nil, fmt.Errorf("%w: controlled shutdown of broker %d", metadata.ErrNotLeader, id)
	}
	b, ok := s.ctrl.Image().Broker(id)
	if !ok {
		return nil, fmt.Errorf("%w: %d", metadata.ErrUnknownBroker, id)
	}
	if b.Fenced {
		s.shutdown[id] = shutDown
		return nil, nil
	}
	s.log.Info("cluster: controlled shutdown", "broker", id)
	// Recorded first (KIP-841): from here on the broker is not eligible
	// for an ISR, so the leaders it follows do not add it back while
	// the rounds below take it out.
	if !b.InControlledShutdown {
		rec := metadata.Record{FenceBroker: &metadata.FenceBroker{ID: id, InControlledShutdown: true}}
		if err := s.ctrl.Propose(ctx, rec); err != nil {
			return nil, err
		}
	}
	s.shutdown[id] = draining
	// One round moves everything movable; more rounds only when the image
	// changed under it. Stop when a round has nothing left to do.
	for i := 0; i < maxAttempts; i++ {
		n, err := s.round(ctx, false)
		if err != nil {
			delete(s.shutdown, id) // the broker will retry or time out
			return nil, err
		}
		if n == 0 {
			break
		}
	}
	var stuck []TopicPartition
	im := s.ctrl.Image()
	for _, name := range im.TopicNames() {
		for _, p := range im.Topics[name].Partitions {
			if p.Leader == id {
				stuck = append(stuck, TopicPartition{name, p.Index})
			}
		}
	}
	if err := s.ctrl.Propose(ctx, metadata.Record{FenceBroker: &metadata.FenceBroker{ID: id, Fenced: true, InControlledShutdown: true}}); err != nil {
		delete(s.shutdown, id)
		return nil, err
	}
	s.shutdown[id] = shutDown
	s.log.Info("cluster: broker fenced after controlled shutdown", "broker", id, "still_leading", len(stuck))
	// Handle what it still led (and the ISRs it was last in) now rather
	// than at the next tick.
	_, err := s.round(ctx, false)
	return stuck, err
}

// ElectLeaders runs an ElectLeaders request (PlanElections with the
// Supervisor's view of the brokers) and proposes each election on its own,
// so one partition's refusal does not fail the others; a partition whose
// epoch moved under the decision is decided once more from the new image.
// It fails as a whole only with metadata.ErrNotLeader (or ctx's error).
func (s *Supervisor) ElectLeaders(ctx context.Context, typ ElectionType, parts []TopicPartition) ([]ElectionResult, error) {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	if !s.activate() {
		return nil, fmt.Errorf("%w: elect leaders", metadata.ErrNotLeader)
	}
	states, _ := s.brokerStates(s.ctrl.Image(), s.cfg.Now())
	res := PlanElections(s.ctrl.Image(), states, typ, parts)
	for i := range res {
		r := &res[i]
		for attempt := 1; r.Err == nil; attempt++ {
			err := s.ctrl.Propose(ctx, metadata.Record{PartitionChange: r.Change})
			if err == nil {
				if r.Decision.Unclean {
					s.log.Warn("cluster: unclean leader election requested: records acknowledged by the old ISR may be lost",
						"topic", r.Topic, "partition", r.Partition, "new_leader", r.Decision.Leader)
				}
				break
			}
			if !retryable(err) {
				return nil, err
			}
			if attempt == maxAttempts {
				r.Err, r.Change = err, nil
				break
			}
			*r = PlanElections(s.ctrl.Image(), states, typ, []TopicPartition{r.TopicPartition})[0]
		}
	}
	return res, nil
}
