// Package latency keeps the produce path's per-stage latency histograms:
// lock-free, log-bucketed counts that /metrics exports as Prometheus
// histograms (berth_produce_stage_seconds) and `berth bench produce
// --breakdown` reads back, so one run shows where a produce request's
// time goes.
package latency

import (
	"math"
	"sort"
	"sync/atomic"
	"time"
)

// Stage is one step of a produce request, in the order a request meets them.
type Stage int

const (
	// Queue: from the request's last byte read to its handler starting
	// (header and body decoding; the read loop is busy meanwhile).
	Queue Stage = iota
	// Validate: the handler up to every batch staged (authorization,
	// lookup, batch validation, producer-state checks).
	Validate
	// FlushWait: a staged batch waiting for the flusher to take it.
	FlushWait
	// Write: the flusher's write of the batches it took into the page cache.
	Write
	// FsyncWait: written batches waiting for the syncer's next fsync.
	FsyncWait
	// Fsync: the fsync that made the batches durable on this node.
	Fsync
	// ReplicaWrite, on a follower, per partition of a fetch response with
	// data: from the response read to its batches written to the log.
	ReplicaWrite
	// ReplicaFsync, on a follower: from those batches written to their
	// fsync done (the wait for the sync round and the fsync).
	ReplicaFsync
	// ReplicaAck, on a follower: from those batches durable to the next
	// fetch sent, whose offset tells the leader they are.
	ReplicaAck
	// ISRWait: a leader's fsynced batch waiting for the high watermark
	// (every in-sync follower has fetched, written and fsynced it); about
	// zero without followers.
	ISRWait
	// Response: from the reply ready to its bytes handed to the socket.
	Response
	// Total: from the request's last byte read to its response written.
	Total
	numStages
)

var names = [numStages]string{"queue", "validate", "flush_wait", "write", "fsync_wait", "fsync",
	"replica_write", "replica_fsync", "replica_ack", "isr_wait", "response", "total"}

// Follower reports whether the stage is counted on followers (the
// replica_* stages), not on the leader that took the request.
func (s Stage) Follower() bool { return s >= ReplicaWrite && s <= ReplicaAck }

// String is the stage's label value in /metrics.
func (s Stage) String() string { return names[s] }

// Stages lists every stage in order.
func Stages() []Stage {
	out := make([]Stage, numStages)
	for i := range out {
		out[i] = Stage(i)
	}
	return out
}

// NumBuckets is the number of finite buckets: upper bounds of 2^(i/2)
// microseconds, i = 0..NumBuckets-1 (1 µs to about 11.9 s), so a bucket is
// at most 41% wider than the one before it.
const NumBuckets = 48

var boundsNanos = func() [NumBuckets]int64 {
	var b [NumBuckets]int64
	for i := range b {
		b[i] = int64(math.Round(math.Pow(2, float64(i)/2) * 1e3))
	}
	return b
}()

// Bounds returns the buckets' upper bounds in seconds.
func Bounds() []float64 {
	out := make([]float64, NumBuckets)
	for i, b := range boundsNanos {
		out[i] = float64(b) / 1e9
	}
	return out
}

// Hist counts durations. The zero value is ready; it is safe for
// concurrent use and never allocates.
type Hist struct {
	counts [NumBuckets + 1]atomic.Uint64 // the last is +Inf
	sum    atomic.Int64                  // nanoseconds
}

// Observe records one duration.
func (h *Hist) Observe(d time.Duration) { h.ObserveN(d, 1) }

// ObserveN records n requests or batches that each spent d.
func (h *Hist) ObserveN(d time.Duration, n int) {
	if n <= 0 {
		return
	}
	d = max(d, 0)
	i := sort.Search(NumBuckets, func(i int) bool { return boundsNanos[i] >= int64(d) })
	h.counts[i].Add(uint64(n))
	h.sum.Add(int64(d) * int64(n))
}

// Snapshot returns the cumulative counts per upper bound (as Prometheus
// histograms carry them, +Inf last), the total count and the sum in
// seconds.
func (h *Hist) Snapshot() (cumulative []uint64, count uint64, sum float64) {
	cumulative = make([]uint64, NumBuckets+1)
	for i := range h.counts {
		count += h.counts[i].Load()
		cumulative[i] = count
	}
	return cumulative, count, float64(h.sum.Load()) / 1e9
}

// Set is one broker's histograms, one per stage.
type Set [numStages]Hist

// Observe records d for stage s.
func (s *Set) Observe(st Stage, d time.Duration) { s[st].Observe(d) }

// ObserveN records n items that each spent d in stage st.
func (s *Set) ObserveN(st Stage, d time.Duration, n int) { s[st].ObserveN(d, n) }

// Since records the time from t to now for stage st and returns now.
func (s *Set) Since(st Stage, t time.Time) time.Time {
	now := time.Now()
	s[st].Observe(now.Sub(t))
	return now
}

// Quantile estimates quantile q (0 < q < 1) from cumulative bucket counts
// over upper bounds (seconds, +Inf last) as Prometheus's
// histogram_quantile does: linear within the bucket holding the rank. It
// returns NaN for an empty histogram.
func Quantile(q float64, bounds []float64, cumulative []uint64) float64 {
	if len(cumulative) == 0 || cumulative[len(cumulative)-1] == 0 {
		return math.NaN()
	}
	total := cumulative[len(cumulative)-1]
	rank := q * float64(total)
	i := sort.Search(len(cumulative), func(i int) bool { return float64(cumulative[i]) >= rank })
	if i >= len(bounds) { // in +Inf: the highest finite bound
		return bounds[len(bounds)-1]
	}
	lo, below := 0.0, uint64(0)
	if i > 0 {
		lo, below = bounds[i-1], cumulative[i-1]
	}
	in := cumulative[i] - below
	if in == 0 {
		return bounds[i]
	}
	return lo + (bounds[i]-lo)*(rank-float64(below))/float64(in)
}
