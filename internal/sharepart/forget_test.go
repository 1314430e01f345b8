package sharepart

import (
	"context"
	"errors"
	"testing"

	"github.com/berthmq/berth/internal/share"
)

// adminStore is a memStore that is also a StateAdmin: Delete and
// DeleteStates remove states (the share coordinator's deletion).
type adminStore struct {
	memStore
	deleted []share.Key
	failDel error
}

func (s *adminStore) Initialize(context.Context, share.Key, int64) error {
	return errors.New("not used")
}

func (s *adminStore) Delete(ctx context.Context, k share.Key) error {
	return s.DeleteStates(ctx, []share.Key{k})
}

func (s *adminStore) DeleteStates(_ context.Context, keys []share.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failDel != nil {
		return s.failDel
	}
	for _, k := range keys {
		delete(s.states, k)
		s.deleted = append(s.deleted, k)
	}
	return nil
}

func (r *Registry) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.parts)
}

// ForgetGroup and ForgetTopics take the entries out of the registry
// (which used to keep one per share-partition ever used) and drop their
// in-memory state; the next use loads from the store.
func TestForgetGroupAndTopics(t *testing.T) {
	st := &adminStore{memStore: memStore{states: map[share.Key]share.Snapshot{}}}
	r := newTestRegistry(t, st, nil)
	l := &fakeLog{epoch: 1, hw: 5}
	other := share.Key{Group: "h", TopicID: [16]byte{8}, Partition: 0}
	for _, k := range []share.Key{testKey, {Group: "g", TopicID: [16]byte{8}, Partition: 0}, other} {
		if _, err := r.Acquire(k, "jobs", "m", l, 1<<20, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := r.Sessions.Fetch("g", "m", 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	if r.size() != 3 {
		t.Fatalf("%d entries, want 3", r.size())
	}

	r.ForgetTopics(func(id [16]byte) bool { return id != [16]byte{8} })
	if r.size() != 1 {
		t.Fatalf("%d entries after topic 8 was deleted, want 1 (g's on topic 7)", r.size())
	}
	if _, ok := r.Stats(other); ok {
		t.Fatal("a share-partition of the deleted topic is still held")
	}

	r.ForgetGroup("g")
	if r.size() != 0 {
		t.Fatalf("%d entries after g was forgotten, want 0", r.size())
	}
	if _, _, err := r.Sessions.Fetch("g", "m", 1, nil, nil); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("g's share session after the group was forgotten: %v", err)
	}
	// The next use loads from the store: records 0-1 are still acquired
	// there (written as available at their lock deadline), 2-4 are not.
	got := acquire(t, r, l, "m2")
	if len(got) != 1 || got[0].First != 2 || got[0].Last != 4 {
		t.Fatalf("acquired %+v after a reload from the store, want 2-4", got)
	}
}

// DeleteGroup deletes the states at the store before it forgets the
// copies here and tells the other brokers; a failed deletion keeps both
// and reports the error.
func TestDeleteGroupDeletesStateThenForgets(t *testing.T) {
	st := &adminStore{memStore: memStore{states: map[share.Key]share.Snapshot{}}}
	r := newTestRegistry(t, st, nil)
	l := &fakeLog{epoch: 1, hw: 5}
	acquire(t, r, l, "m")

	del := func() (error, bool) {
		told := false
		done := make(chan error, 1)
		r.DeleteGroup("g", []share.Key{testKey}, func(context.Context) {
			st.mu.Lock()
			_, kept := st.states[testKey]
			st.mu.Unlock()
			if kept || r.size() != 0 {
				t.Error("other brokers told before the state was deleted here and at the store")
			}
			told = true
		}, func(err error) { done <- err })
		err := <-done
		return err, told
	}

	st.failDel = errors.New("coordinator unavailable")
	if err, told := del(); !errors.Is(err, ErrStateUnavailable) || told {
		t.Fatalf("failed deletion: %v (others told: %v)", err, told)
	}
	if r.size() != 1 {
		t.Fatal("the copy was dropped although the state was not deleted")
	}

	st.failDel = nil
	if err, told := del(); err != nil || !told {
		t.Fatalf("deletion: %v (others told: %v)", err, told)
	}
	if _, ok := st.states[testKey]; ok || r.size() != 0 {
		t.Fatalf("after the deletion: state kept %v, %d entries", ok, r.size())
	}
	// The group made again starts fresh: earliest (the test settings).
	if got := acquire(t, r, l, "m"); len(got) != 1 || got[0].First != 0 || got[0].Last != 4 {
		t.Fatalf("acquired %+v by the new group, want 0-4", got)
	}
}

// Fetches and acknowledgements racing ForgetGroup: no data race (run
// under -race), no deadlock between the entries' locks and the
// registry's, every call answered, and the registry never keeps an entry
// marked removed.
func TestForgetRacingAcquire(t *testing.T) {
	st := &adminStore{memStore: memStore{states: map[share.Key]share.Snapshot{}}}
	r := newTestRegistry(t, st, nil)
	l := &fakeLog{epoch: 1, hw: 1000}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				r.ForgetGroup("g")
			}
		}
	}()
	for i := range 200 {
		f, err := r.Acquire(testKey, "jobs", "m", l, 1<<20, 1, nil)
		if err != nil && !errors.Is(err, ErrStateUnavailable) {
			t.Fatalf("acquire %d: %v", i, err)
		}
		for _, a := range f.Acquired {
			_ = r.Acknowledge(testKey, "m", []share.Ack{{First: a.First, Last: a.Last, Types: []share.AckType{share.AckAccept}}})
		}
	}
	close(stop)
	<-done
	r.mu.Lock()
	e := r.parts[testKey]
	r.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		removed := e.removed
		e.mu.Unlock()
		if removed {
			t.Fatal("the registry holds an entry marked removed")
		}
	}
}
