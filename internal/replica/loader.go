package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
)

// Coordinator is a coordinator that keeps its state in an internal topic
// (the group coordinator in __consumer_offsets, the share coordinator in
// __share_group_state, the transaction coordinator in
// __transaction_state): it serves the partitions of that topic this node
// leads, each loaded from the partition's records when this node becomes
// its leader. A Loader drives it.
//
// A coordinator that also wants the topic's partition count implements
// SetPartitions(n int32), which the Loader calls at every metadata change.
type Coordinator interface {
	// BeginLoad: this node leads partition p now. What the coordinator
	// held of p is dropped; requests for p answer
	// COORDINATOR_LOAD_IN_PROGRESS until FinishLoad.
	BeginLoad(p int32)
	// LoadRecord replays one record of p, in log order. An error is
	// logged and the record skipped.
	LoadRecord(p int32, key, value []byte) error
	// FinishLoad: every record of p up to its log end was replayed; p is
	// served from now on.
	FinishLoad(p int32)
	// Unload: this node no longer leads p.
	Unload(p int32)
}

// Loader keeps a coordinator's loaded partitions in line with the
// partitions of its internal topic this node leads: it replays a
// partition's records when the node becomes its leader and unloads it
// when it stops.
type Loader struct {
	replicas *Manager
	self     int32
	topic    string
	what     string // for logs
	c        Coordinator
	log      *slog.Logger

	mu      sync.Mutex // guards applied, loaded and runs
	applied uint64     // the index of the newest image reconciled
	loaded  map[int32]bool
	runs    map[int32]*loadRun // the replay of each partition, running or ended
	wg      sync.WaitGroup
}

// loadRun is one replay of a partition; a replay cancelled (the node lost
// the partition) stops at its next record and does not finish the load,
// and a new replay of the partition starts only after it has stopped.
type loadRun struct {
	cancelled atomic.Bool
	done      chan struct{}
}

// reconcile loads the partitions im says this node leads and unloads the
// others. The follow loop and the handlers (after a proposal, and
// FindCoordinator: Loaders.AwaitLoaded) both call it; an image older than
// one already reconciled is ignored, so a slower caller never unloads
// what a newer image loaded.
func (l *Loader) reconcile(im *metadata.Image) {
	t := im.Topic(l.topic)
	l.mu.Lock()
	defer l.mu.Unlock()
	// The follow loop and the node's propose (commit, then apply)
	// reconcile with images of their own; an older one arriving late must
	// not undo a newer one (unload what it loaded).
	if im.Index < l.applied {
		return
	}
	l.applied = im.Index
	lead := map[int32]bool{}
	if t != nil {
		if pc, ok := l.c.(interface{ SetPartitions(n int32) }); ok {
			pc.SetPartitions(int32(len(t.Partitions)))
		}
		for _, p := range t.Partitions {
			if p.Leader == l.self {
				lead[p.Index] = true
			}
		}
	}
	for p := range l.loaded {
		if !lead[p] {
			if run := l.runs[p]; run != nil {
				run.cancelled.Store(true)
			}
			l.c.Unload(p)
			delete(l.loaded, p)
		}
	}
	for p := range lead {
		if l.loaded[p] {
			continue
		}
		part := l.replicas.Get(l.topic, p)
		if part == nil {
			continue // not open yet; the next image applies it
		}
		if prev := l.runs[p]; prev != nil {
			<-prev.done // cancelled above or earlier: it stops at its next record
		}
		run := &loadRun{done: make(chan struct{})}
		if l.runs == nil {
			l.runs = map[int32]*loadRun{}
		}
		l.runs[p] = run
		l.loaded[p] = true
		l.c.BeginLoad(p)
		l.wg.Add(1)
		go func(p int32, part *Partition) {
			defer l.wg.Done()
			defer close(run.done)
			start := time.Now()
			n, err := replay(part, &run.cancelled, func(key, value []byte) {
				if err := l.c.LoadRecord(p, key, value); err != nil {
					l.log.Warn("skipping "+l.topic+" record", "partition", p, "err", err)
				}
			})
			if run.cancelled.Load() {
				return
			}
			if err != nil {
				l.log.Error("loading "+l.what, "topic", l.topic, "partition", p, "err", err)
			}
			l.c.FinishLoad(p)
			l.log.Debug(l.what+" loaded", "topic", l.topic, "partition", p, "records", n, "took", time.Since(start))
		}(p, part)
	}
}

// loading returns the replay of partition p when this loader has begun
// to load it (running or ended), else nil.
func (l *Loader) loading(p int32) *loadRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.loaded[p] {
		return nil
	}
	return l.runs[p]
}

// replay feeds every record of a partition, in order, to fn, until
// cancelled is set.
func replay(part *Partition, cancelled *atomic.Bool, fn func(key, value []byte)) (int, error) {
	scratch := batch.GetScratch()
	defer batch.PutScratch(scratch)
	n := 0
	// Up to the log end, not the high watermark: a new leader's log is the
	// partition's from now on, and its high watermark catches up only as
	// the followers fetch (Kafka's coordinator loads to the log end too).
	off := part.LogStartOffset()
	end := part.LogEndOffset()
	for off < end && !cancelled.Load() {
		records, err := part.Log().Read(off, 1<<20, end, true)
		if err != nil {
			return n, err
		}
		if len(records) == 0 {
			break
		}
		for b := records; len(b) > 0; {
			h, err := batch.ParseHeader(b)
			if err != nil || h.Size() > len(b) {
				return n, fmt.Errorf("offset %d: %v", off, errors.Join(err, batch.ErrCorrupt))
			}
			if h.BaseOffset+int64(h.LastOffsetDelta) >= off && h.Attributes&batch.AttrControl == 0 {
				recs, _, err := batch.Records(b[:h.Size()], scratch)
				if err != nil {
					return n, err
				}
				for _, r := range recs {
					if h.BaseOffset+r.OffsetDelta < off {
						continue
					}
					if cancelled.Load() {
						return n, nil
					}
					// Copy: the record may alias a decompression buffer.
					fn(clone(r.Key), clone(r.Value))
					n++
				}
			}
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			b = b[h.Size():]
		}
	}
	return n, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// Loaders are the Loaders of a node's coordinators, one per internal
// topic, reconciled together after every metadata change.
type Loaders struct {
	// Replicas holds the internal topics' partitions.
	Replicas *Manager
	// Image returns the current metadata image (AwaitLoaded).
	Image func() *metadata.Image
	// Before, if set, runs first in every Reconcile, with its image (the
	// node drops the share-partitions of deleted topics there).
	Before func(im *metadata.Image)
	Logger *slog.Logger

	list []*Loader
}

// Add makes the loader of topic's partitions into c; what names the state
// in logs. Add every loader before the first Reconcile; they reconcile in
// the order added.
func (ls *Loaders) Add(topic, what string, c Coordinator) *Loader {
	l := &Loader{replicas: ls.Replicas, self: ls.Replicas.cfg.NodeID, topic: topic, what: what, c: c, log: ls.Logger,
		loaded: map[int32]bool{}}
	ls.list = append(ls.list, l)
	return l
}

// Reconcile loads and unloads the coordinators' partitions after a
// metadata change (the follow loop, a handler's proposal).
func (ls *Loaders) Reconcile(im *metadata.Image) {
	if ls.Before != nil {
		ls.Before(im)
	}
	for _, l := range ls.list {
		l.reconcile(im)
	}
}

// AwaitLoaded returns once this node's coordinator of partition p of an
// internal topic has loaded it, or when ctx ends, or at once when this
// node does not lead p. FindCoordinator calls it before it names this
// node: it answers from the newest metadata image, which the follow loop
// may not have applied yet, and a client whose first request then met a
// coordinator that has not begun to load would be told to retry
// (kafka-go backs off 5 s). So it applies the image here first, as a
// proposal's handler does, and waits for the replay.
func (ls *Loaders) AwaitLoaded(ctx context.Context, topic string, p int32) {
	var l *Loader
	for _, x := range ls.list {
		if x.topic == topic {
			l = x
		}
	}
	if l == nil {
		return
	}
	run := l.loading(p)
	if run == nil {
		im := ls.Image()
		if mp := im.Topic(topic).Partition(p); mp == nil || mp.Leader != l.self {
			return
		}
		if err := ls.Replicas.Apply(im); err != nil {
			return
		}
		ls.Reconcile(im)
		if run = l.loading(p); run == nil {
			return
		}
	}
	select {
	case <-run.done:
	case <-ctx.Done():
	}
}

// Close waits for the replays running. Call it once nothing reconciles
// any more.
func (ls *Loaders) Close() {
	for _, l := range ls.list {
		l.wg.Wait()
	}
}
