package tests

// A chained exactly-once pipeline (A -> B -> C) of kgo
// GroupTransactSessions, the shape of franz-go's own chained ETL test:
// several members per stage, each with its own transactional id; members
// quit (aborting the transaction of the records they polled last) and
// others join and take over their partitions while transactions run, so
// that partitions are also revoked in the middle of transactions; under
// the classic protocol (eager sticky, cooperative sticky with static
// members) and KIP-848 (dynamic and static). Transactions V2: every commit
// bumps the epoch, and a member that quits right after a commit aborts
// with the new epoch, typically with no produce through yet, while the
// commit's markers are still going out (issue 12: that abort was answered
// PRODUCER_FENCED). Every WriteTxnMarkers is delayed a little, as on a
// loaded broker, so that this happens in every run. No member may meet an
// error, and each stage's output holds every input record exactly once
// (read_committed).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// eosStage is one stage of the pipeline: a group reading in and writing
// out, and its members.
type eosStage struct {
	t       *testing.T
	addr    string
	name    string // the group, and the prefix of the members' ids
	in, out string
	opts    []kgo.Opt // the group protocol and balancer of the run
	static  bool

	mu      sync.Mutex // guards members, next
	members []*eosMember
	next    int // ids handed out

	txns    atomic.Int64 // transactions committed by any member
	aborted atomic.Int64 // transactions a revoke made the session abort
}

// eosMember is one GroupTransactSession running its loop.
type eosMember struct {
	sess     *kgo.GroupTransactSession
	txnID    string
	instance string
	stop     chan struct{}
	done     chan struct{}
}

// start adds a member; instance is its static member id (a new one when
// empty; none for dynamic members). Every member gets a new transactional
// id.
func (s *eosStage) start(instance string) {
	s.t.Helper()
	s.mu.Lock()
	s.next++
	n := s.next
	s.mu.Unlock()
	txnID := fmt.Sprintf("%s-tx-%d", s.name, n)
	opts := append([]kgo.Opt{kgo.SeedBrokers(s.addr), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(60 * time.Second), kgo.ConsumerGroup(s.name), kgo.ConsumeTopics(s.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.RequireStableFetchOffsets(), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.FetchMaxPartitionBytes(1), kgo.SessionTimeout(5 * time.Second), kgo.RebalanceTimeout(10 * time.Second),
		kgo.HeartbeatInterval(300 * time.Millisecond)}, s.opts...)
	if s.static {
		if instance == "" {
			instance = fmt.Sprintf("%s-member-%d", s.name, n)
		}
		opts = append(opts, kgo.InstanceID(instance))
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	must(s.t, "NewGroupTransactSession", err)
	m := &eosMember{sess: sess, txnID: txnID, instance: instance, stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.members = append(s.members, m)
	s.mu.Unlock()
	go s.run(m)
}

// run is a member's consume-transform-produce loop. Told to stop, a
// member aborts the transaction of the records it polled last, as an
// application shutting down does (franz-go's own chained ETL test quits
// so), and leaves.
func (s *eosStage) run(m *eosMember) {
	defer close(m.done)
	fail := func(what string, err error) { s.t.Errorf("%s: %s: %v", m.txnID, what, err) }
	for {
		var quit bool
		select {
		case <-m.stop:
			quit = true
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := m.sess.PollFetches(ctx)
		cancel()
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				fail(fmt.Sprintf("fetch %s/%d", topic, p), err)
			}
		})
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				recs = append(recs, r)
			}
		})
		if len(recs) == 0 {
			if quit {
				return
			}
			continue
		}
		if err := m.sess.Begin(); err != nil {
			fail("Begin", err) // the session is stuck
			return
		}
		for _, r := range recs {
			m.sess.Produce(context.Background(), &kgo.Record{Topic: s.out, Key: r.Key, Value: r.Value},
				func(_ *kgo.Record, err error) {
					if err != nil && !errors.Is(err, kgo.ErrAborting) {
						fail("produce", err)
					}
				})
		}
		endCtx, endCancel := context.WithTimeout(context.Background(), 30*time.Second)
		committed, err := m.sess.End(endCtx, kgo.TransactionEndTry(!quit))
		endCancel()
		switch {
		case err != nil:
			fail("End", err)
			return
		case quit:
			return
		case committed:
			s.txns.Add(1)
		default:
			s.aborted.Add(1)
		}
	}
}

// leave stops the oldest member (a static one without leaving the group,
// as a restarted process does) and returns its instance id.
func (s *eosStage) leave() string {
	s.mu.Lock()
	m := s.members[0]
	s.members = s.members[1:]
	s.mu.Unlock()
	close(m.stop)
	<-m.done
	m.sess.Close()
	return m.instance
}

// replace stops the oldest member and starts another in its place (for
// static members, with the same instance id and a new transactional id).
func (s *eosStage) replace() { s.start(s.leave()) }

// closeAll stops every member.
func (s *eosStage) closeAll() {
	for {
		s.mu.Lock()
		n := len(s.members)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		s.leave()
	}
}

// progressed waits until the stage committed more transactions than it
// had when called, so that the next change lands while it works.
func (s *eosStage) progressed(t *testing.T, from int64) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		if n := s.txns.Load(); n <= from {
			return fmt.Errorf("%s: %d transactions committed, waiting for more", s.name, n)
		}
		return nil
	})
}

// markerDelay is how long each WriteTxnMarkers waits before it is served.
const markerDelay = 30 * time.Millisecond

func TestTxnPipelineRebalancesExactlyOnce(t *testing.T) {
	n := tc.Start(t, tc.With("group.min.session.timeout.ms", "1000"),
		tc.With("group.consumer.heartbeat.interval.ms", "300"), tc.With("group.consumer.session.timeout.ms", "5000"))
	// The markers of every transaction take a while, as on a loaded
	// broker: a member's next transaction begins, and may be revoked or
	// aborted, while the previous one's markers are going out.
	n.Intercept(func(ctx context.Context, key int16) error {
		if key == kmsg.WriteTxnMarkers.Int16() {
			select {
			case <-time.After(markerDelay):
			case <-ctx.Done():
			}
		}
		return nil
	})
	const (
		partitions = 6
		perStage   = 3
		chunks     = 4
		perChunk   = 36
		total      = chunks * perChunk
	)
	for _, c := range []struct {
		name   string
		opts   []kgo.Opt
		static bool
	}{
		{"classic-sticky", []kgo.Opt{kgo.Balancers(kgo.StickyBalancer())}, false},
		{"classic-coop-static", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}, true},
		{"kip848-sticky", []kgo.Opt{kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer()}, false},
		{"kip848-sticky-static", []kgo.Opt{kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer()}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // one broker: the runs mostly wait (markers, session timeouts)
			topic := func(s string) string { return c.name + "-" + s }
			for _, s := range []string{"a", "b", "c"} {
				tc.CreateTopic(t, n.Addr(), topic(s), partitions, nil)
			}
			stages := []*eosStage{
				{t: t, addr: n.Addr(), name: topic("ab"), in: topic("a"), out: topic("b"), opts: c.opts, static: c.static},
				{t: t, addr: n.Addr(), name: topic("bc"), in: topic("b"), out: topic("c"), opts: c.opts, static: c.static},
			}
			for _, s := range stages {
				for range perStage {
					s.start("")
				}
				defer s.closeAll()
			}
			prod := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic(topic("a")))
			want := map[string]bool{}
			// Each chunk of input is followed, while the stages work on
			// it, by a change of membership in every stage: a member
			// replaced, one more member, a member replaced again, one
			// fewer.
			changes := []func(s *eosStage){
				(*eosStage).replace,
				func(s *eosStage) { s.start("") },
				(*eosStage).replace,
				func(s *eosStage) { s.leave() },
			}
			for chunk := range chunks {
				from := make([]int64, len(stages))
				for i, s := range stages {
					from[i] = s.txns.Load()
				}
				recs := make([]*kgo.Record, perChunk)
				for i := range recs {
					v := strconv.Itoa(chunk*perChunk + i)
					recs[i] = &kgo.Record{Key: []byte(v), Value: []byte(v)}
					want[v] = true
				}
				for i := 0; i < len(recs); i += partitions { // small batches: many transactions
					produceSync(t, prod, recs[i:min(i+partitions, len(recs))]...)
				}
				for i, s := range stages {
					s.progressed(t, from[i])
					changes[chunk](s)
				}
			}
			for _, s := range []string{"b", "c"} {
				out := newConsumer(t, n.Addr(), topic(s), kgo.ReadCommitted())
				out.waitForSet(t, want)
				if got := out.poll(t, 300*time.Millisecond); len(got) != total {
					t.Fatalf("%s: read_committed saw %d records, want exactly %d", topic(s), len(got), total)
				}
			}
			for _, s := range stages {
				t.Logf("%s: %d transactions committed, %d aborted", s.name, s.txns.Load(), s.aborted.Load())
			}
		})
	}
}
