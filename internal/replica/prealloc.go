package replica

// Preallocation (log.preallocate.bytes, durability.mode=fsync): after each
// fsync the syncer asks for a runway of zeros past the partition's data
// when what is left of it is under half (internal/log/runway.go), and the
// preallocator goroutine writes and fsyncs it off the syncer's path, so
// the fsyncs that acknowledge produce requests write data only.
//
// Bounds: at most maxRunways partitions hold a runway at once (the disk
// space is theirs until their segment rolls or the runway is trimmed); a
// partition written faster than runwayMaxRate gets none, as its large
// appends amortise the journal commit and zeros would double its writes;
// the runway of a partition not written for runwayIdle is trimmed.

import (
	"context"
	"sync"
	"time"
)

const (
	maxRunways    = 64
	runwayMaxRate = 64 << 20 // bytes per second
	runwayIdle    = 30 * time.Second
	// runwayRateTau is the time constant of the write rate's average.
	runwayRateTau = 500 * time.Millisecond
)

// runways is the preallocator's state.
type runways struct {
	mu    sync.Mutex
	held  map[*Partition]*runwayState
	queue chan *Partition
}

type runwayState struct {
	queued bool
	// rate is the partition's write rate in bytes per second, a moving
	// average with time constant runwayRateTau (at, size: the last sample).
	rate float64
	at   time.Time
	size int64
}

// sample updates the write rate with the log's size now.
func (st *runwayState) sample(now time.Time, size int64) {
	if !st.at.IsZero() {
		if dt := now.Sub(st.at).Seconds(); dt > 0 {
			w := min(1, dt/runwayRateTau.Seconds()) // weight of this sample
			st.rate = w*float64(size-st.size)/dt + (1-w)*st.rate
		}
	}
	st.at, st.size = now, size
}

func (r *runways) init() {
	r.held = map[*Partition]*runwayState{}
	r.queue = make(chan *Partition, maxRunways)
}

// wantRunway is called by the syncer after fsyncing p: it queues p for a
// longer runway when p's is under half of log.preallocate.bytes.
func (m *Manager) wantRunway(p *Partition) {
	n := m.cfg.PreallocateBytes
	if n <= 0 || p.closed.Load() {
		return
	}
	r := &m.runways
	r.mu.Lock()
	st, ok := r.held[p]
	if !ok {
		if len(r.held) >= maxRunways {
			r.mu.Unlock()
			return
		}
		st = &runwayState{}
		r.held[p] = st
	}
	st.sample(time.Now(), p.log.Size()) // also when the runway is long enough: the idle trim goes by it
	if st.rate > runwayMaxRate || p.log.Runway() >= n/2 {
		r.mu.Unlock()
		return // writing too fast for zeros to pay, or runway enough
	}
	if st.queued {
		r.mu.Unlock()
		return
	}
	st.queued = true
	r.mu.Unlock()
	select {
	case r.queue <- p:
	default:
		r.mu.Lock()
		st.queued = false
		r.mu.Unlock()
	}
}

// preallocLoop extends the runways queued by wantRunway and trims idle ones.
func (m *Manager) preallocLoop(ctx context.Context) {
	defer m.wg.Done()
	r := &m.runways
	tick := time.NewTicker(runwayIdle / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.trimIdleRunways()
		case p := <-r.queue:
			var err error
			if !p.closed.Load() {
				_, err = p.log.ExtendRunway(m.cfg.PreallocateBytes)
			}
			r.mu.Lock()
			if st := r.held[p]; st != nil {
				st.queued = false
			}
			r.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				m.log.Warn("preallocating log space failed; appends extend the file instead", "topic", p.Topic, "partition", p.Index, "err", err)
			}
		}
	}
}

// trimIdleRunways gives back the runways of partitions that took no
// write for runwayIdle (a slow partition keeps its runway: it lasts), and
// forgets closed partitions.
func (m *Manager) trimIdleRunways() {
	r := &m.runways
	var idle []*Partition
	r.mu.Lock()
	for p, st := range r.held {
		if p.closed.Load() || (!st.queued && time.Since(st.at) > runwayIdle) {
			idle = append(idle, p)
			delete(r.held, p)
		}
	}
	r.mu.Unlock()
	for _, p := range idle {
		if p.closed.Load() {
			continue
		}
		if err := p.log.TrimRunway(); err != nil {
			m.log.Debug("trimming an idle preallocation", "topic", p.Topic, "partition", p.Index, "err", err)
		}
	}
}
