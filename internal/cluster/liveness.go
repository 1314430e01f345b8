package cluster

import "time"

// WithLocal returns l, except that broker self (the active controller's
// own broker, which Raft progress says nothing about) always counts as
// heard from now. CatchUp passes through when l implements it; self has
// always caught up.
func WithLocal(l Liveness, self int32, now func() time.Time) Liveness {
	return local{l, self, now}
}

type local struct {
	Liveness
	self int32
	now  func() time.Time
}

func (l local) LastSeen(id int32) (time.Time, bool) {
	if id == l.self {
		return l.now(), true
	}
	return l.Liveness.LastSeen(id)
}

func (l local) CaughtUp(id int32) bool {
	c, ok := l.Liveness.(CatchUp)
	return id == l.self || !ok || c.CaughtUp(id)
}
