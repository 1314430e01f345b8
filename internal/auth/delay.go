package auth

import (
	"sync"
	"time"
)

// FailureDelay is how long to hold the answer to a failed authentication,
// per client address: Base (connection.failed.authentication.delay.ms)
// doubling with each failure from the same address up to Max, and
// decaying by one doubling per Decay without failures. Safe for
// concurrent use.
type FailureDelay struct {
	Base, Max, Decay time.Duration

	mu    sync.Mutex
	addrs map[string]*failures
}

type failures struct {
	n    int
	last time.Time
}

// Fail records a failure from host at now and returns the delay to apply.
func (f *FailureDelay) Fail(host string, now time.Time) time.Duration {
	if f.Base <= 0 {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.addrs == nil {
		f.addrs = map[string]*failures{}
	}
	if len(f.addrs) > 10000 { // forget quiet addresses rather than grow
		for h, e := range f.addrs {
			if now.Sub(e.last) > f.decay()*8 {
				delete(f.addrs, h)
			}
		}
	}
	e := f.addrs[host]
	if e == nil {
		e = &failures{}
		f.addrs[host] = e
	}
	if !e.last.IsZero() {
		e.n -= int(now.Sub(e.last) / f.decay())
		e.n = max(e.n, 0)
	}
	e.last = now
	d := f.Base
	for i := 0; i < e.n && d < f.Max; i++ {
		d *= 2
	}
	e.n++
	if f.Max > 0 && d > f.Max {
		d = f.Max
	}
	return d
}

func (f *FailureDelay) decay() time.Duration {
	if f.Decay > 0 {
		return f.Decay
	}
	return 30 * time.Second
}
