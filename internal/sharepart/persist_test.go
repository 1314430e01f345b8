package sharepart

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/share"
)

// fakeLog is a partition of single-record batches at offsets [0, hw).
type fakeLog struct {
	epoch  int32
	hw     int64
	start  int64
	failAt int64 // Read fails from this offset (0: never)
}

func (l *fakeLog) LeaderEpoch() int32      { return l.epoch }
func (l *fakeLog) LogStartOffset() int64   { return l.start }
func (l *fakeLog) HighWatermark() int64    { return l.hw }
func (l *fakeLog) LastStableOffset() int64 { return l.hw }
func (l *fakeLog) ReadCommitted(off int64, maxBytes int32, minOne bool, alloc func(int) []byte) (replica.ReadResult, error) {
	return l.Read(off, maxBytes, minOne, alloc)
}
func (l *fakeLog) OffsetForTimestamp(int64) (int64, int64, bool, error) {
	return l.start, 0, true, nil
}

func (l *fakeLog) Read(off int64, _ int32, _ bool, _ func(int) []byte) (replica.ReadResult, error) {
	var b []byte
	for o := off; o < l.hw; o++ {
		b = append(b, batchAt(o, 1)...)
	}
	return replica.ReadResult{Records: b, HighWatermark: l.hw}, nil
}

// memStore is a Store keeping the latest snapshot per key, built by the
// state machine's own replay (as the share coordinator does).
type memStore struct {
	mu     sync.Mutex
	states map[share.Key]share.Snapshot
	fail   error
	writes int
}

func (s *memStore) Read(_ context.Context, k share.Key, _ int32) (share.Snapshot, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return share.Snapshot{}, false, s.fail
	}
	snap, ok := s.states[k]
	return snap, ok, nil
}

func (s *memStore) Write(_ context.Context, k share.Key, u share.Update) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	base, ok := s.states[k]
	if !ok {
		base = share.Snapshot{StartOffset: u.StartOffset}
	}
	p, err := share.LoadPartition(share.PartitionDefaults(), base, nil)
	if err != nil {
		return err
	}
	if err := p.Apply(u); err != nil {
		return err
	}
	s.states[k] = p.Snapshot()
	s.writes++
	return nil
}

// parker is a DLQWriter failing its first fails calls.
type parker struct {
	mu     sync.Mutex
	fails  int
	parked []share.DLQAction
}

func (p *parker) Park(_ context.Context, _ share.Key, _, _ string, a share.DLQAction) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fails > 0 {
		p.fails--
		return errors.New("dlq topic unavailable")
	}
	p.parked = append(p.parked, a)
	return nil
}

func (p *parker) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.parked)
}

var testKey = share.Key{Group: "g", TopicID: [16]byte{7}, Partition: 0}

func newTestRegistry(t *testing.T, st Store, dlq DLQWriter) *Registry {
	t.Helper()
	pc := share.PartitionDefaults()
	pc.Backoff.Initial = 0
	r, err := New(Config{Partition: pc, Store: st, DLQ: dlq,
		Settings: func(string) GroupSettings {
			return GroupSettings{Partition: pc, DLQTopic: "dlq.jobs", AutoOffsetReset: "earliest"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func acquire(t *testing.T, r *Registry, l PartitionLog, member string) []share.AcquiredRange {
	t.Helper()
	f, err := r.Acquire(testKey, "jobs", member, l, 1<<20, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f.Acquired
}

// A broker that restarts (a new registry over the same store) or a
// leader that changes (a new leader epoch) neither loses work nor
// forgets deliveries; a failed write answers the request with an error
// and drops the in-memory state, which is loaded again.
func TestPersistAcrossRegistriesAndFailedWrites(t *testing.T) {
	st := &memStore{states: map[share.Key]share.Snapshot{}}
	l := &fakeLog{epoch: 1, hw: 6}
	r := newTestRegistry(t, st, nil)
	got := acquire(t, r, l, "m1")
	if len(got) != 1 || got[0].First != 0 || got[0].Last != 5 || got[0].DeliveryCount != 1 {
		t.Fatalf("first acquisition %v", got)
	}
	if err := r.Acknowledge(testKey, "m1", []share.Ack{{First: 0, Last: 2, Types: []share.AckType{share.AckAccept}}}); err != nil {
		t.Fatal(err)
	}

	// Restart: 0-2 done, 3-5 come back (once their lock would have
	// expired: the test moves the clock) with delivery count 2.
	r2 := newTestRegistry(t, st, nil)
	var shift atomic.Int64 // the test's clock runs ahead of the real one
	shift.Store(int64(time.Minute))
	r2.cfg.Now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	got = acquire(t, r2, l, "m2")
	if len(got) != 1 || got[0].First != 3 || got[0].Last != 5 || got[0].DeliveryCount != 2 {
		t.Fatalf("after the restart: %v, want 3-5 at delivery 2", got)
	}

	// The store fails: the acquisition is not handed out and the state is
	// dropped; once the store is back the state is loaded again.
	l.hw = 8
	st.fail = errors.New("coordinator unavailable")
	if _, err := r2.Acquire(testKey, "jobs", "m2", l, 1<<20, 100, nil); !errors.Is(err, ErrStateUnavailable) {
		t.Fatalf("acquire with a failing store: %v", err)
	}
	if _, ok := r2.Stats(testKey); ok {
		t.Fatal("state kept in memory after a failed write")
	}
	st.fail = nil
	got = acquire(t, r2, l, "m2")
	if len(got) != 1 || got[0].First != 6 || got[0].Last != 7 || got[0].DeliveryCount != 1 {
		t.Fatalf("after the store came back: %v, want 6-7 (3-5 are still locked by m2 in the store's view)", got)
	}

	// A new leader epoch reloads from the store (after the locks of
	// 3-7 would have expired).
	shift.Store(int64(3 * time.Minute))
	l.epoch = 2
	got = acquire(t, r2, l, "m3")
	if len(got) == 0 || got[0].First != 3 || got[0].DeliveryCount != 3 {
		t.Fatalf("after a leader change: %v, want 3-5 at delivery 3", got)
	}
}

// A rejected record is parked through the DLQ writer (retried until it
// succeeds) and archived only then; a load that finds records still
// archiving parks them again.
func TestPersistDLQParksThenArchives(t *testing.T) {
	st := &memStore{states: map[share.Key]share.Snapshot{}}
	l := &fakeLog{epoch: 1, hw: 3}
	pk := &parker{fails: 2}
	r := newTestRegistry(t, st, pk)
	acquire(t, r, l, "m1")
	if err := r.Acknowledge(testKey, "m1", []share.Ack{{First: 1, Last: 1, Types: []share.AckType{share.AckReject}, ErrorText: "bad address"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, _ := r.Stats(testKey)
		if s.Archived == 1 && s.Archiving == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("record not archived after its DLQ write: %+v, parked %d", s, pk.count())
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	if pk.count() != 1 || pk.parked[0].First != 1 || pk.parked[0].ErrorText != "bad address" || pk.parked[0].Reason != share.ReasonRejected {
		t.Fatalf("parked %+v", pk.parked)
	}
	// The archived state is written after the in-memory one changes:
	// poll the store too.
	for {
		st.mu.Lock()
		snap := st.states[testKey]
		st.mu.Unlock()
		if i := slices.IndexFunc(snap.StateBatches, func(b share.StateBatch) bool { return b.FirstOffset <= 1 && 1 <= b.LastOffset }); i >= 0 && snap.StateBatches[i].DeliveryState == int8(share.Archived) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("persisted state %+v: offset 1 not archived", snap)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}

	// A state left archiving (a crash between the two writes) is parked
	// again on load.
	st.mu.Lock()
	st.states[testKey] = share.Snapshot{StartOffset: 0, StateBatches: []share.StateBatch{
		{FirstOffset: 0, LastOffset: 0, DeliveryState: int8(share.Archiving), DeliveryCount: 5, Reason: share.ReasonDeliveryLimit}}}
	st.mu.Unlock()
	pk2 := &parker{}
	r2 := newTestRegistry(t, st, pk2)
	acquire(t, r2, l, "m1")
	deadline = time.Now().Add(10 * time.Second)
	for pk2.count() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("archiving record not parked after the load")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a := pk2.parked[0]; a.First != 0 || a.Reason != share.ReasonDeliveryLimit || a.DeliveryCount != 5 {
		t.Fatalf("parked after the load: %+v", a)
	}
}

func TestParseISODuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"P1D": 24 * time.Hour, "PT2H": 2 * time.Hour, "PT30M": 30 * time.Minute, "PT1.5S": 1500 * time.Millisecond,
		"P1DT1H": 25 * time.Hour, "pt10m": 10 * time.Minute,
	} {
		if got, err := ParseISODuration(in); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "P", "PT", "1D", "P1H", "PT1D", "PTT1H", "P-1D", "PTxS"} {
		if _, err := ParseISODuration(in); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}

// gatedStore holds each write until the test lets it through.
type gatedStore struct {
	*memStore
	gate chan struct{}
}

func (s *gatedStore) Write(ctx context.Context, k share.Key, u share.Update) error {
	<-s.gate
	return s.memStore.Write(ctx, k, u)
}

// Changes made while a write is in flight wait for the next write, which
// carries them all at once (the whole state): fewer writes than changes,
// each request answered only once its change is durable, and the store
// ends with the state in memory.
func TestPersistCoalescesConcurrentChanges(t *testing.T) {
	st := &gatedStore{memStore: &memStore{states: map[share.Key]share.Snapshot{}}, gate: make(chan struct{})}
	l := &fakeLog{epoch: 1, hw: 20}
	r := newTestRegistry(t, st, nil)
	setup := make(chan struct{})
	go func() { // the initial write and the acquisition's
		for {
			select {
			case st.gate <- struct{}{}:
			case <-setup:
				return
			}
		}
	}()
	acquire(t, r, l, "m1")
	close(setup)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for o := range int64(20) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- r.Acknowledge(testKey, "m1", []share.Ack{{First: o, Last: o, Types: []share.AckType{share.AckAccept}}})
		}()
	}
	// Let writes through one at a time until every ack is answered.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	writes := 0
	for loop := true; loop; {
		select {
		case st.gate <- struct{}{}:
			writes++
		case <-done:
			loop = false
		}
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if writes >= 20 {
		t.Fatalf("%d writes for 20 acknowledgements made while writes were held", writes)
	}
	if s := st.states[testKey]; s.StartOffset != 20 || len(s.StateBatches) != 0 {
		t.Fatalf("store has %+v, want everything acknowledged (start 20)", s)
	}
	t.Logf("20 acknowledgements in %d writes", writes)
}
