package auth

import (
	"sort"
	"sync"
	"sync/atomic"
)

// OtherPrincipals is the label the per-principal metrics give every
// principal past ClientMetrics' cap.
const OtherPrincipals = "other"

// ClientMetrics counts, per principal, what clients moved and how they
// were held back: bytes and records in and out, throttle time by quota
// and refused requests by reason. The number of distinct principals is
// capped (quota.metrics.max.principals): those seen after the cap is
// reached are counted together under OtherPrincipals, so a cluster with
// many principals cannot blow up its metrics.
type ClientMetrics struct {
	max int
	mu  sync.RWMutex // guards m; the counters inside are atomics
	m   map[Principal]*PrincipalCounters
}

// otherKey is the map key of the "other" bucket (no real principal has
// an empty type).
var otherKey = Principal{Name: OtherPrincipals}

// PrincipalCounters are one principal's counters.
type PrincipalCounters struct {
	BytesIn, BytesOut, RecordsIn, RecordsOut atomic.Int64
	mu                                       sync.Mutex // guards the two maps
	throttleNanos                            map[string]int64
	rejected                                 map[string]int64
}

// NewClientMetrics makes the counters with a cap of max principals
// (at least 1).
func NewClientMetrics(max int) *ClientMetrics {
	if max < 1 {
		max = 1
	}
	return &ClientMetrics{max: max, m: map[Principal]*PrincipalCounters{}}
}

// For returns the counters of principal p, or the "other" bucket's once
// the cap is reached.
func (c *ClientMetrics) For(p Principal) *PrincipalCounters {
	c.mu.RLock()
	pc := c.m[p]
	c.mu.RUnlock()
	if pc != nil {
		return pc
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if pc = c.m[p]; pc != nil {
		return pc
	}
	if len(c.m) >= c.max {
		p = otherKey
		if pc = c.m[p]; pc != nil {
			return pc
		}
	}
	pc = &PrincipalCounters{throttleNanos: map[string]int64{}, rejected: map[string]int64{}}
	c.m[p] = pc
	return pc
}

// Throttled adds a throttle of nanos for quota.
func (pc *PrincipalCounters) Throttled(quota string, nanos int64) {
	pc.mu.Lock()
	pc.throttleNanos[quota] += nanos
	pc.mu.Unlock()
}

// Rejected counts one refused request for reason.
func (pc *PrincipalCounters) Rejected(reason string) {
	pc.mu.Lock()
	pc.rejected[reason]++
	pc.mu.Unlock()
}

// PrincipalSnapshot is one principal's counters at one moment.
type PrincipalSnapshot struct {
	Principal                                string
	BytesIn, BytesOut, RecordsIn, RecordsOut int64
	ThrottleNanos                            map[string]int64 // by quota key
	Rejected                                 map[string]int64 // by reason
}

// Snapshot copies every principal's counters, sorted by principal.
func (c *ClientMetrics) Snapshot() []PrincipalSnapshot {
	c.mu.RLock()
	out := make([]PrincipalSnapshot, 0, len(c.m))
	for p, pc := range c.m {
		label := OtherPrincipals
		if p != otherKey {
			label = p.String()
		}
		s := PrincipalSnapshot{Principal: label, BytesIn: pc.BytesIn.Load(), BytesOut: pc.BytesOut.Load(),
			RecordsIn: pc.RecordsIn.Load(), RecordsOut: pc.RecordsOut.Load(),
			ThrottleNanos: map[string]int64{}, Rejected: map[string]int64{}}
		pc.mu.Lock()
		for k, v := range pc.throttleNanos {
			s.ThrottleNanos[k] = v
		}
		for k, v := range pc.rejected {
			s.Rejected[k] = v
		}
		pc.mu.Unlock()
		out = append(out, s)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Principal < out[j].Principal })
	return out
}
