package sharepart

import "github.com/berthmq/berth/internal/share"

// Annotate attaches text, a member's error and stack, to the records
// [first, last] of share-partition k that member holds, for the REJECT
// that follows (share.SharePartition.Annotate; Berth's
// BerthAnnotateShareRecords). Nothing is persisted, so nothing waits on
// the store and no fetch is woken.
func (r *Registry) Annotate(k share.Key, member string, first, last int64, text string) error {
	e := r.get(k)
	if e == nil {
		return ErrUnknownSharePartition
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p == nil {
		return ErrUnknownSharePartition
	}
	return e.p.Annotate(member, first, last, text, r.cfg.Now())
}
