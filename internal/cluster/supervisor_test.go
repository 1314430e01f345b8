package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berthmq/berth/internal/metadata"

	"github.com/berthmq/berth/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeLiveness reports what the test says it heard.
type fakeLiveness struct {
	mu   sync.Mutex
	seen map[int32]time.Time
}

func (l *fakeLiveness) LastSeen(id int32) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.seen[id]
	return t, ok
}

func (l *fakeLiveness) hear(at time.Time, ids ...int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.seen[id] = at
	}
}

// env is a real single-voter controller with a Supervisor over it.
type env struct {
	t     *testing.T
	ctrl  *metadata.Controller
	clock *fakeClock
	live  *fakeLiveness
	sup   *Supervisor
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv opens a controller in a temp dir, registers brokers, and builds
// a Supervisor with a fake clock and liveness (ctrl may be wrapped by
// wrap, for fault injection).
func newEnv(t *testing.T, brokers []int32, cfg Config, wrap func(*metadata.Controller) Controller) *env {
	t.Helper()
	ctrl, err := metadata.Open(metadata.Config{
		Dir: t.TempDir(), NodeID: metadata.RaftID(0), TickInterval: 10 * time.Millisecond, Logger: discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	if err := ctrl.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	e := &env{
		t:     t,
		ctrl:  ctrl,
		clock: &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		live:  &fakeLiveness{seen: map[int32]time.Time{}},
	}
	for _, id := range brokers {
		e.propose(register(id, ""))
	}
	cfg.Now = e.clock.Now
	cfg.Logger = discard()
	var c Controller = ctrl
	if wrap != nil {
		c = wrap(ctrl)
	}
	if e.sup, err = New(c, e.live, cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

func ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) propose(recs ...metadata.Record) {
	e.t.Helper()
	if err := e.ctrl.Propose(ctx(e.t), recs...); err != nil {
		e.t.Fatalf("propose %v: %v", recs, err)
	}
}

func (e *env) tick() {
	e.t.Helper()
	if err := e.sup.Tick(ctx(e.t)); err != nil {
		e.t.Fatalf("Tick: %v", err)
	}
}

// hear marks brokers as heard from now.
func (e *env) hear(ids ...int32) { e.live.hear(e.clock.Now(), ids...) }

func (e *env) part(topic string, p int32) metadata.Partition {
	e.t.Helper()
	pp := e.ctrl.Image().Topic(topic).Partition(p)
	if pp == nil {
		e.t.Fatalf("no partition %s-%d", topic, p)
	}
	checkPartition(e.t, topic, pp)
	return *pp
}

// want checks a partition's leader, ISR and leader epoch.
func (e *env) want(topic string, p int32, leader int32, isr []int32, leaderEpoch int32) {
	e.t.Helper()
	got := e.part(topic, p)
	if got.Leader != leader || !slices.Equal(got.ISR, isr) || got.LeaderEpoch != leaderEpoch {
		e.t.Fatalf("%s-%d: %s; want leader=%d isr=%s leader-epoch=%d",
			topic, p, fmtPartition(&got), leader, fmtIDs(isr), leaderEpoch)
	}
}

func (e *env) fenced(id int32) bool {
	e.t.Helper()
	b, ok := e.ctrl.Image().Broker(id)
	if !ok {
		e.t.Fatalf("broker %d not registered", id)
	}
	return b.Fenced
}

func setISR(topic string, p int32, isr ...int32) metadata.Record {
	return metadata.Record{PartitionChange: &metadata.PartitionChange{Topic: topic, Partition: p, ISR: isr}}
}

// TestSupervisorFencesSilentBroker: a broker never heard from is fenced a
// session after the controller became active, not before; its leaderships
// move to the first live ISR member with a bumped leader epoch, it leaves
// every ISR, and partitions it was the only ISR member of go offline,
// except on a topic that allows unclean election.
func TestSupervisorFencesSilentBroker(t *testing.T) {
	e := newEnv(t, []int32{0, 1, 2, 3}, Config{}, nil)
	e.propose(
		createTopic("a", [][]int32{{1, 2, 3}, {2, 1, 3}, {3, 1, 2}}, nil),
		createTopic("solo", [][]int32{{1}}, nil),
		createTopic("offline", [][]int32{{1, 2}}, nil),
		createTopic("unclean", [][]int32{{1, 3}}, map[string]string{UncleanConfig: "true"}),
	)
	e.propose(setISR("offline", 0, 1), setISR("unclean", 0, 1))

	e.hear(0, 2, 3)
	e.tick() // becomes active: broker 1 gets a full session from now
	for _, step := range []time.Duration{5 * time.Second, 4*time.Second - time.Millisecond} {
		e.clock.Advance(step)
		e.hear(0, 2, 3)
		e.tick()
		if e.fenced(1) {
			t.Fatalf("broker 1 fenced before its session timeout")
		}
	}
	e.want("a", 0, 1, []int32{1, 2, 3}, 0)

	e.clock.Advance(time.Millisecond) // 9s after activation
	e.hear(0, 2, 3)
	e.tick()
	if !e.fenced(1) {
		t.Fatalf("broker 1 not fenced after broker.session.timeout.ms")
	}
	for _, id := range []int32{0, 2, 3} {
		if e.fenced(id) {
			t.Fatalf("live broker %d fenced", id)
		}
	}
	e.want("a", 0, 2, []int32{2, 3}, 1)     // moved to the next replica, epoch bumped
	e.want("a", 1, 2, []int32{2, 3}, 0)     // follower removed, leader kept
	e.want("a", 2, 3, []int32{3, 2}, 0)     // ISR order kept
	e.want("solo", 0, -1, []int32{1}, 1)    // offline, last ISR member kept
	e.want("offline", 0, -1, []int32{1}, 1) // broker 2 is live but out of sync
	e.want("unclean", 0, 3, []int32{3}, 1)  // the topic allows it
	if p := e.part("a", 0); p.PartitionEpoch != 1 {
		t.Fatalf("a-0 partition epoch %d, want 1 (one change)", p.PartitionEpoch)
	}

	// Idempotent: another round changes nothing.
	before := e.ctrl.Image().Index
	e.clock.Advance(time.Second)
	e.hear(0, 2, 3)
	e.tick()
	if after := e.ctrl.Image().Index; after != before {
		t.Fatalf("a round with nothing to do proposed entries (index %d -> %d)", before, after)
	}
}

// TestSupervisorUnfencesReturningBroker: a fenced broker heard from again
// is unfenced, the partitions it was the last ISR member of elect it back,
// and once the leader has added it back to an ISR the preferred-leader
// rebalance returns its leadership, not before
// leader.imbalance.check.interval.seconds.
func TestSupervisorUnfencesReturningBroker(t *testing.T) {
	e := newEnv(t, []int32{0, 1, 2}, Config{}, nil)
	e.propose(
		createTopic("a", [][]int32{{1, 2}, {2, 1}}, nil),
		createTopic("solo", [][]int32{{1}}, nil),
	)
	e.hear(0, 1, 2)
	e.tick()
	e.clock.Advance(10 * time.Second)
	e.hear(0, 2)
	e.tick()
	if !e.fenced(1) {
		t.Fatal("broker 1 not fenced")
	}
	e.want("a", 0, 2, []int32{2}, 1)
	e.want("solo", 0, -1, []int32{1}, 1)

	e.clock.Advance(time.Second)
	e.hear(0, 1, 2)
	e.tick()
	if e.fenced(1) {
		t.Fatal("broker 1 heard from again but still fenced")
	}
	e.want("solo", 0, 1, []int32{1}, 2) // clean: it is the ISR
	e.want("a", 0, 2, []int32{2}, 1)    // not back in the ISR yet: no move

	// The leader adds broker 1 back (AlterPartition).
	e.propose(setISR("a", 0, 2, 1))
	e.clock.Advance(280 * time.Second) // 291s after activation
	e.hear(0, 1, 2)
	e.tick()
	e.want("a", 0, 2, []int32{2, 1}, 1)

	e.clock.Advance(9 * time.Second) // 300s
	e.hear(0, 1, 2)
	e.tick()
	e.want("a", 0, 1, []int32{2, 1}, 2)
	e.want("a", 1, 2, []int32{2}, 0) // its leader never added 1 back
}

// TestSupervisorRebalanceThreshold: leadership moves back only for brokers
// whose imbalance is above leader.imbalance.per.broker.percentage, and not
// at all with auto.leader.rebalance.enable=false.
func TestSupervisorRebalanceThreshold(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		moved bool
	}{
		{"1 of 4 is 25% > 10%", Config{}, true},
		{"1 of 4 is 25% <= 25%", Config{LeaderImbalancePerBrokerPercentage: 25}, false},
		{"disabled", Config{DisableAutoLeaderRebalance: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, []int32{1, 2}, tc.cfg, nil)
			e.propose(createTopic("a", [][]int32{{1, 2}, {1, 2}, {1, 2}, {1, 2}}, nil))
			l := int32(2)
			e.propose(metadata.Record{PartitionChange: &metadata.PartitionChange{Topic: "a", Partition: 3, Leader: &l}})
			e.hear(1, 2)
			e.tick()
			e.clock.Advance(300 * time.Second)
			e.hear(1, 2)
			e.tick()
			want := int32(2)
			if tc.moved {
				want = 1
			}
			if got := e.part("a", 3).Leader; got != want {
				t.Fatalf("a-3 leader %d, want %d", got, want)
			}
		})
	}
}

// TestSupervisorControlledShutdown: every leadership another ISR member can
// take moves, the broker leaves the ISRs, then it is fenced; what it alone
// could lead is returned and goes offline. It stays fenced while it is
// still heard from, and is back once it registers again.
func TestSupervisorControlledShutdown(t *testing.T) {
	e := newEnv(t, []int32{1, 2, 3}, Config{}, nil)
	e.propose(
		createTopic("a", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {2, 1, 3}}, nil),
		createTopic("solo", [][]int32{{2}}, nil),
	)
	e.hear(1, 2, 3)
	e.tick()

	stuck, err := e.sup.ControlledShutdown(ctx(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []TopicPartition{{"solo", 0}}; !slices.Equal(stuck, want) {
		t.Fatalf("still led at shutdown: %v, want %v", stuck, want)
	}
	if !e.fenced(2) {
		t.Fatal("broker 2 not fenced after controlled shutdown")
	}
	if b, _ := e.ctrl.Image().Broker(2); !b.InControlledShutdown {
		t.Fatal("broker 2 not marked in controlled shutdown in the image")
	}
	e.want("a", 0, 1, []int32{1, 3}, 0)
	e.want("a", 1, 3, []int32{3, 1}, 1)
	e.want("a", 2, 3, []int32{3, 1}, 0)
	e.want("a", 3, 1, []int32{1, 3}, 1)
	e.want("solo", 0, -1, []int32{2}, 1)
	im := e.ctrl.Image()
	for _, name := range im.TopicNames() {
		for _, p := range im.Topics[name].Partitions {
			if p.Leader == 2 {
				t.Fatalf("%s-%d still led by the shut-down broker", name, p.Index)
			}
		}
	}

	// The exiting process is still heard from: it must stay fenced.
	e.clock.Advance(time.Second)
	e.hear(1, 2, 3)
	e.tick()
	if !e.fenced(2) {
		t.Fatal("broker 2 unfenced while it shuts down")
	}

	// It restarts and registers again.
	e.propose(register(2, ""))
	e.clock.Advance(time.Second)
	e.hear(1, 2, 3)
	e.tick()
	if e.fenced(2) {
		t.Fatal("broker 2 fenced again after registering")
	}
	if b, _ := e.ctrl.Image().Broker(2); b.InControlledShutdown {
		t.Fatal("broker 2 still in controlled shutdown after registering")
	}
	e.want("solo", 0, 2, []int32{2}, 2)
}

// TestSupervisorShuttingDownBrokerCannotRejoin: from the start of a
// controlled shutdown the image marks the broker (KIP-841), so a leader's
// ISR change adding it back is refused while the moves run, and an active
// controller that takes over mid-shutdown (a new Supervisor, knowing
// nothing of it) keeps treating it as shutting down.
func TestSupervisorShuttingDownBrokerCannotRejoin(t *testing.T) {
	e := newEnv(t, []int32{1, 2, 3}, Config{}, nil)
	e.propose(createTopic("a", [][]int32{{1, 2, 3}, {2, 1, 3}}, nil))
	e.hear(1, 2, 3)
	e.tick()

	// The previous controller recorded the shutdown and died.
	e.propose(metadata.Record{FenceBroker: &metadata.FenceBroker{ID: 2, InControlledShutdown: true}})
	sup, err := New(e.ctrl, e.live, Config{Now: e.clock.Now, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	e.sup = sup
	e.tick()
	e.want("a", 0, 1, []int32{1, 3}, 0)
	e.want("a", 1, 1, []int32{1, 3}, 1)
	if e.fenced(2) {
		t.Fatal("broker 2 fenced while heard from; only its shutdown fences it")
	}

	// Leader 1 sees broker 2 fetching and proposes it back.
	epoch := e.part("a", 0).PartitionEpoch
	err = e.ctrl.Propose(ctx(t), metadata.Record{PartitionChange: &metadata.PartitionChange{
		Topic: "a", Partition: 0, ISR: []int32{1, 2, 3}, ExpectPartitionEpoch: &epoch, EligibleISR: true}})
	if !errors.Is(err, metadata.ErrIneligibleReplica) {
		t.Fatalf("adding a broker in controlled shutdown to an ISR: %v, want ErrIneligibleReplica", err)
	}
	e.want("a", 0, 1, []int32{1, 3}, 0)

	// It registers again (a restart): eligible again.
	e.propose(register(2, ""))
	err = e.ctrl.Propose(ctx(t), metadata.Record{PartitionChange: &metadata.PartitionChange{
		Topic: "a", Partition: 0, ISR: []int32{1, 2, 3}, ExpectPartitionEpoch: &epoch, EligibleISR: true}})
	if err != nil {
		t.Fatalf("adding a registered broker to an ISR: %v", err)
	}
	e.want("a", 0, 1, []int32{1, 2, 3}, 0)
}

// TestSupervisorShutdownThenSilence: a shut-down broker that never
// registers again is unfenced by liveness once it was gone for a session
// and then heard from.
func TestSupervisorShutdownThenSilence(t *testing.T) {
	e := newEnv(t, []int32{1, 2}, Config{}, nil)
	e.hear(1, 2)
	e.tick()
	if _, err := e.sup.ControlledShutdown(ctx(t), 2); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Second)
	e.hear(1)
	e.tick()
	if !e.fenced(2) {
		t.Fatal("broker 2 unfenced while silent")
	}
	e.clock.Advance(time.Second)
	e.hear(1, 2)
	e.tick()
	if e.fenced(2) {
		t.Fatal("broker 2 back after a session of silence but still fenced")
	}
	if b, _ := e.ctrl.Image().Broker(2); b.InControlledShutdown {
		t.Fatal("broker 2 unfenced but still in controlled shutdown")
	}
}

// notLeader is a Controller that is not the active controller.
type notLeader struct{ *metadata.Controller }

func (notLeader) IsLeader() bool { return false }

func TestSupervisorInactive(t *testing.T) {
	e := newEnv(t, []int32{1}, Config{}, func(c *metadata.Controller) Controller { return notLeader{c} })
	e.clock.Advance(time.Hour)
	e.tick()
	if e.fenced(1) {
		t.Fatal("a node that is not the active controller fenced a broker")
	}
	if _, err := e.sup.ControlledShutdown(ctx(t), 1); !errors.Is(err, metadata.ErrNotLeader) {
		t.Fatalf("ControlledShutdown on a follower: %v, want ErrNotLeader", err)
	}
	if _, err := e.sup.ElectLeaders(ctx(t), Preferred, nil); !errors.Is(err, metadata.ErrNotLeader) {
		t.Fatalf("ElectLeaders on a follower: %v, want ErrNotLeader", err)
	}
}

// racer proposes a concurrent ISR change (as a leader's AlterPartition
// would) just before the Supervisor's first proposal, so that proposal
// carries a stale partition epoch.
type racer struct {
	*metadata.Controller
	t    *testing.T
	once sync.Once
	errs []error
}

func (r *racer) Propose(ctx context.Context, recs ...metadata.Record) error {
	r.once.Do(func() {
		if err := r.Controller.Propose(ctx, setISR("a", 0, 1, 2, 3)); err != nil {
			r.t.Errorf("racing proposal: %v", err)
		}
	})
	err := r.Controller.Propose(ctx, recs...)
	r.errs = append(r.errs, err)
	return err
}

// TestSupervisorStaleEpochReplans: a round whose proposal is refused with
// ErrStaleEpoch plans again from the new image and keeps the racing
// change.
func TestSupervisorStaleEpochReplans(t *testing.T) {
	var r *racer
	e := newEnv(t, []int32{1, 2, 3}, Config{}, func(c *metadata.Controller) Controller {
		r = &racer{Controller: c, t: t}
		return r
	})
	e.propose(createTopic("a", [][]int32{{1, 2, 3}}, nil), setISR("a", 0, 1, 2))
	e.hear(1, 2, 3)
	e.tick()
	e.clock.Advance(9 * time.Second)
	e.hear(2, 3)
	e.tick()
	if len(r.errs) < 2 || !errors.Is(r.errs[0], metadata.ErrStaleEpoch) || r.errs[len(r.errs)-1] != nil {
		t.Fatalf("proposal results %v, want a stale epoch and then success", r.errs)
	}
	// The racing change added 3 to the ISR; the re-planned one removed 1.
	e.want("a", 0, 2, []int32{2, 3}, 1)
	if !e.fenced(1) {
		t.Fatal("broker 1 not fenced")
	}
}

// TestSupervisorElectLeaders: ElectLeaders through the Supervisor proposes
// each election and reports the Kafka outcome per partition.
func TestSupervisorElectLeaders(t *testing.T) {
	e := newEnv(t, []int32{1, 2, 3}, Config{}, nil)
	e.propose(createTopic("a", [][]int32{{1, 2}, {2, 1}, {3, 1}}, nil))
	l := int32(1)
	e.propose(metadata.Record{PartitionChange: &metadata.PartitionChange{Topic: "a", Partition: 1, Leader: &l}},
		metadata.Record{PartitionChange: &metadata.PartitionChange{Topic: "a", Partition: 2, Leader: &l, ISR: []int32{1}}})
	e.hear(1, 2, 3)
	e.tick()
	res, err := e.sup.ElectLeaders(ctx(t), Preferred, []TopicPartition{{"a", 0}, {"a", 1}, {"a", 2}, {"a", 7}, {"b", 0}})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{ErrElectionNotNeeded, nil, ErrPreferredLeaderNotAvailable, ErrUnknownPartition, ErrUnknownPartition}
	for i, r := range res {
		if !errors.Is(r.Err, want[i]) || (want[i] == nil) != (r.Err == nil) {
			t.Errorf("%s-%d: %v, want %v", r.Topic, r.Partition, r.Err, want[i])
		}
	}
	e.want("a", 1, 2, []int32{2, 1}, 2)
}

// TestSupervisorRun: Run fences a silent broker on its own timer and stops
// when its context ends.
func TestSupervisorRun(t *testing.T) {
	e := newEnv(t, []int32{1, 2}, Config{CheckInterval: 5 * time.Millisecond}, nil)
	e.propose(createTopic("a", [][]int32{{1, 2}}, nil))
	e.hear(2)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.sup.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor(t, func() bool { return e.sup.isActive() })
	e.clock.Advance(time.Minute)
	e.hear(2)
	waitFor(t, func() bool { return e.fenced(1) && e.part("a", 0).Leader == 2 })
}

func (s *Supervisor) isActive() bool {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	return s.active
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// catchUpLiveness adds CatchUp: brokers in behind have not caught up.
type catchUpLiveness struct {
	*fakeLiveness
	behind map[int32]bool
}

func (l catchUpLiveness) CaughtUp(id int32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.behind[id]
}

// TestSupervisorUnfenceWaitsForCatchUp: with a Liveness that implements
// CatchUp, a returning broker stays fenced until it has caught up.
func TestSupervisorUnfenceWaitsForCatchUp(t *testing.T) {
	e := newEnv(t, []int32{1, 2}, Config{}, nil)
	cl := catchUpLiveness{e.live, map[int32]bool{2: true}}
	sup, err := New(e.ctrl, cl, Config{Now: e.clock.Now, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	e.sup = sup
	e.propose(fence(2, true))
	e.hear(1, 2)
	e.tick()
	if !e.fenced(2) {
		t.Fatal("broker 2 unfenced before it caught up")
	}
	cl.mu.Lock()
	cl.behind[2] = false
	cl.mu.Unlock()
	e.tick()
	if e.fenced(2) {
		t.Fatal("broker 2 caught up and heard from but still fenced")
	}
}

// churner changes partition churn-0 just before every proposal that touches
// it, so every decision about it is stale.
type churner struct {
	*metadata.Controller
	t    *testing.T
	flip bool
}

func (c *churner) Propose(ctx context.Context, recs ...metadata.Record) error {
	for _, r := range recs {
		if pc := r.PartitionChange; pc != nil && pc.Topic == "churn" {
			isr := []int32{2, 3, 1} // 1 stays in: always a change to make
			if c.flip = !c.flip; c.flip {
				isr = []int32{3, 2, 1} // differs from the initial ISR
			}
			if err := c.Controller.Propose(ctx, setISR("churn", 0, isr...)); err != nil {
				c.t.Errorf("churn: %v", err)
			}
			break
		}
	}
	return c.Controller.Propose(ctx, recs...)
}

// TestSupervisorChurnDoesNotStarveOthers: a partition that changes under
// every decision fails the round with ErrStaleEpoch, but the broker is
// fenced and the other partitions are reconciled all the same.
func TestSupervisorChurnDoesNotStarveOthers(t *testing.T) {
	e := newEnv(t, []int32{1, 2, 3}, Config{}, func(c *metadata.Controller) Controller {
		return &churner{Controller: c, t: t}
	})
	e.propose(
		createTopic("steady", [][]int32{{1, 2, 3}}, nil),
		createTopic("churn", [][]int32{{2, 3, 1}}, nil), // planned first: names sort

	)
	e.hear(1, 2, 3)
	e.tick()
	e.clock.Advance(9 * time.Second)
	e.hear(2, 3)
	if err := e.sup.Tick(ctx(t)); !errors.Is(err, metadata.ErrStaleEpoch) {
		t.Fatalf("Tick: %v, want ErrStaleEpoch", err)
	}
	if !e.fenced(1) {
		t.Fatal("broker 1 not fenced")
	}
	e.want("steady", 0, 2, []int32{2, 3}, 1)
}

func TestWithLocal(t *testing.T) {
	clock := &fakeClock{now: time.Unix(100, 0)}
	l := &fakeLiveness{seen: map[int32]time.Time{1: time.Unix(5, 0)}}
	w := WithLocal(catchUpLiveness{l, map[int32]bool{1: true, 0: true}}, 0, clock.Now)
	if at, ok := w.LastSeen(0); !ok || !at.Equal(clock.Now()) {
		t.Fatalf("self: %v %v", at, ok)
	}
	if at, ok := w.LastSeen(1); !ok || !at.Equal(time.Unix(5, 0)) {
		t.Fatalf("broker 1: %v %v", at, ok)
	}
	if _, ok := w.LastSeen(2); ok {
		t.Fatal("broker 2 never heard from but seen")
	}
	c := w.(CatchUp)
	if !c.CaughtUp(0) || c.CaughtUp(1) || !c.CaughtUp(2) {
		t.Fatalf("CaughtUp(0, 1, 2) = %v %v %v, want true false true", c.CaughtUp(0), c.CaughtUp(1), c.CaughtUp(2))
	}
	if !WithLocal(l, 0, clock.Now).(CatchUp).CaughtUp(1) {
		t.Fatal("without CatchUp underneath, everyone has caught up")
	}
}

// TestSupervisorGraceForNewBroker: a broker registered long after the
// controller became active gets a full session to be heard from, counted
// from the first round that saw it.
func TestSupervisorGraceForNewBroker(t *testing.T) {
	e := newEnv(t, []int32{1}, Config{}, nil)
	e.hear(1)
	e.tick()
	e.clock.Advance(time.Minute)
	e.hear(1)
	e.propose(register(2, ""))
	e.tick()
	if e.fenced(2) {
		t.Fatal("a broker registered a moment ago was fenced at once")
	}
	e.clock.Advance(9*time.Second - time.Millisecond)
	e.hear(1)
	e.tick()
	if e.fenced(2) {
		t.Fatal("broker 2 fenced before its first session ended")
	}
	e.clock.Advance(time.Millisecond)
	e.hear(1)
	e.tick()
	if !e.fenced(2) {
		t.Fatal("broker 2 never heard from but not fenced after a session")
	}
}
