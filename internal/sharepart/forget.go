package sharepart

// Forgetting share-partitions: a deleted share group (DeleteGroups) and
// the share-partitions of deleted topics leave the registry, so that it
// holds an entry only for share-partitions that can still be used.

import (
	"context"
	"fmt"
	"time"

	"github.com/berthmq/berth/internal/share"
)

// groupDeleteTimeout bounds the deletion of a share group's state at the
// share coordinators, within a DeleteGroups request (clients such as kgo
// give a request without a timeout field 10 s): a healthy deletion takes
// milliseconds, and one that cannot finish is answered
// COORDINATOR_NOT_AVAILABLE, which the client retries.
const groupDeleteTimeout = 5 * time.Second

// DeleteGroup deletes the share group's state: first the state of each
// of keys (its share-partitions) at its share coordinator, then this
// broker's copies (ForgetGroup), then, through elsewhere, the other
// brokers' copies. It runs on its own goroutine and calls done once, with
// nil or the error that stopped it (the states it deleted stay deleted;
// a retry deletes the rest). The group's coordinator calls it while the
// group is being deleted (no member can join), before it writes the
// group's tombstones: a crash in between leaves an empty group with no
// state, never state without a group, which a group created again under
// the same id would resume from.
func (r *Registry) DeleteGroup(group string, keys []share.Key, elsewhere func(ctx context.Context), done func(error)) {
	a, ok := r.cfg.Store.(StateAdmin)
	if r.cfg.Store != nil && !ok {
		done(ErrNoStateAdmin)
		return
	}
	started := r.spawn(func() {
		ctx, cancel := context.WithTimeout(r.ctx, groupDeleteTimeout)
		defer cancel()
		if a != nil && len(keys) > 0 {
			if err := a.DeleteStates(ctx, keys); err != nil {
				done(fmt.Errorf("%w: deleting the state of share group %s: %v", ErrStateUnavailable, group, err))
				return
			}
		}
		r.ForgetGroup(group)
		if elsewhere != nil {
			elsewhere(ctx)
		}
		r.log.Info("share group state deleted", "group", group, "share_partitions", len(keys))
		done(nil)
	})
	if !started {
		done(fmt.Errorf("%w: shutting down", ErrStateUnavailable))
	}
}

// ForgetGroup drops every share-partition of group this broker holds, and
// the group's share sessions (the group was deleted): in-flight state,
// timers and changes not yet written are dropped, and the entries leave
// the registry.
func (r *Registry) ForgetGroup(group string) {
	r.Sessions.DropGroup(group)
	r.forget(func(k share.Key) bool { return k.Group == group })
}

// ForgetTopics drops every share-partition of a topic that exists no more
// (exists reports whether a topic id does): after a topic is deleted, its
// share-partitions are of no use.
func (r *Registry) ForgetTopics(exists func(id [16]byte) bool) {
	r.forget(func(k share.Key) bool { return !exists(k.TopicID) })
}

// forget removes the entries whose keys match. Lock order: an entry's mu
// before Registry.mu, so the entries leave the map first and are unloaded
// after, each under its own mu; a caller that looked one up before (an
// Acquire waiting for its mu) sees it removed and looks again.
func (r *Registry) forget(match func(share.Key) bool) {
	r.mu.Lock()
	var gone []*entry
	for k, e := range r.parts {
		if match(k) {
			gone = append(gone, e)
			delete(r.parts, k)
		}
	}
	r.mu.Unlock()
	for _, e := range gone {
		e.mu.Lock()
		e.removed = true
		if e.p != nil {
			e.unload()
		}
		e.mu.Unlock()
	}
	if len(gone) > 0 {
		r.log.Debug("share-partitions forgotten", "count", len(gone))
		r.signal() // fetches waiting on them look again
	}
}
