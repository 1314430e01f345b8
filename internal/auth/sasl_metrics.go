package auth

import "sync"

// SASLMetrics counts authentications by mechanism and result. Safe for
// concurrent use.
type SASLMetrics struct {
	mu        sync.Mutex
	successes map[string]uint64
	failures  map[string]uint64
}

// Success counts a successful authentication with mech.
func (m *SASLMetrics) Success(mech string) { m.add(&m.successes, mech) }

// Failure counts a failed one.
func (m *SASLMetrics) Failure(mech string) { m.add(&m.failures, mech) }

func (m *SASLMetrics) add(to *map[string]uint64, mech string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if *to == nil {
		*to = map[string]uint64{}
	}
	(*to)[mech]++
}

// Snapshot returns copies of the counts by mechanism.
func (m *SASLMetrics) Snapshot() (successes, failures map[string]uint64) {
	successes, failures = map[string]uint64{}, map[string]uint64{}
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.successes {
		successes[k] = v
	}
	for k, v := range m.failures {
		failures[k] = v
	}
	return
}
