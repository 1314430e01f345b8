package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/group"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/sharestate"
	"github.com/berthmq/berth/internal/txn"
)

// OffsetsTopic is the internal topic of group metadata and committed offsets.
const OffsetsTopic = "__consumer_offsets"

// offsetsStore writes group records into the local __consumer_offsets
// partitions: an append through the normal replica path (validation,
// group-committed fsync), then done once the high watermark covers it.
type offsetsStore struct {
	replicas *replica.Manager
	now      func() time.Time
}

func (s *offsetsStore) Write(p int32, recs []group.Record, done func(error)) {
	part := s.replicas.Get(OffsetsTopic, p)
	if part == nil {
		done(kerr.NotCoordinator)
		return
	}
	kvs := make([]batch.KV, len(recs))
	for i, r := range recs {
		kvs[i] = batch.KV{Key: r.Key, Value: r.Value}
	}
	res, err := part.Append(batch.Build(kvs, s.now().UnixMilli()), nil)
	if err != nil {
		done(err)
		return
	}
	go func() {
		done(part.WaitDurable(res.Durable, res.Gen, time.Now().Add(30*time.Second), true))
	}()
}

// topicResolver answers the coordinator's topic questions from the
// current metadata image.
type topicResolver struct{ ctrl *metadata.Controller }

func (r topicResolver) PartitionExists(topic string, p int32) bool {
	return r.ctrl.Image().Topic(topic).Partition(p) != nil
}

func (r topicResolver) TopicName(id [16]byte) (string, bool) {
	if t := r.ctrl.Image().TopicByID(id); t != nil {
		return t.Name, true
	}
	return "", false
}

func (r topicResolver) TopicID(name string) ([16]byte, bool) {
	if t := r.ctrl.Image().Topic(name); t != nil {
		return t.ID, true
	}
	return [16]byte{}, false
}

// Topics lists every topic for consumer group (KIP-848) assignment.
func (r topicResolver) Topics() []group.TopicInfo {
	im := r.ctrl.Image()
	out := make([]group.TopicInfo, 0, len(im.Topics))
	for _, t := range im.Topics {
		out = append(out, group.TopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
	}
	return out
}

// partitionLoader keeps a coordinator's loaded partitions in line with the
// partitions of an internal topic this node leads: it replays a
// partition's records when the node becomes its leader and unloads it
// when it stops. The group coordinator (__consumer_offsets) and the share
// coordinator (__share_group_state) each have one.
type partitionLoader struct {
	n      *Node
	topic  string
	what   string // for logs
	begin  func(p int32)
	record func(p int32, key, value []byte)
	finish func(p int32)
	unload func(p int32)
	// partitions, if set, learns the topic's partition count.
	partitions func(n int32)

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
// FindCoordinator: awaitLoaded) both call it; an image older than one
// already reconciled is ignored, so a slower caller never unloads what a
// newer image loaded.
func (l *partitionLoader) reconcile(im *metadata.Image) {
	t := im.Topic(l.topic)
	l.mu.Lock()
	defer l.mu.Unlock()
	// The follow loop and a handler's propose (AfterApply) reconcile with
	// images of their own; an older one arriving late must not undo a
	// newer one (unload what it loaded).
	if im.Index < l.applied {
		return
	}
	l.applied = im.Index
	lead := map[int32]bool{}
	if t != nil {
		if l.partitions != nil {
			l.partitions(int32(len(t.Partitions)))
		}
		for _, p := range t.Partitions {
			if p.Leader == l.n.nodeID {
				lead[p.Index] = true
			}
		}
	}
	for p := range l.loaded {
		if !lead[p] {
			if run := l.runs[p]; run != nil {
				run.cancelled.Store(true)
			}
			l.unload(p)
			delete(l.loaded, p)
		}
	}
	for p := range lead {
		if l.loaded[p] {
			continue
		}
		part := l.n.replicas.Get(l.topic, p)
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
		l.begin(p)
		l.wg.Add(1)
		go func(p int32, part *replica.Partition) {
			defer l.wg.Done()
			defer close(run.done)
			start := time.Now()
			n, err := l.replay(p, part, run)
			if run.cancelled.Load() {
				return
			}
			if err != nil {
				l.n.log.Error("loading "+l.what, "topic", l.topic, "partition", p, "err", err)
			}
			l.finish(p)
			l.n.log.Debug(l.what+" loaded", "topic", l.topic, "partition", p, "records", n, "took", time.Since(start))
		}(p, part)
	}
}

// loading returns the replay of partition p when this loader has begun
// to load it (running or ended), else nil.
func (l *partitionLoader) loading(p int32) *loadRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.loaded[p] {
		return nil
	}
	return l.runs[p]
}

// replay feeds every record of a partition, in order, to the coordinator.
func (l *partitionLoader) replay(p int32, part *replica.Partition, run *loadRun) (int, error) {
	scratch := batch.GetScratch()
	defer batch.PutScratch(scratch)
	n := 0
	// Up to the log end, not the high watermark: a new leader's log is the
	// partition's from now on, and its high watermark catches up only as
	// the followers fetch (Kafka's coordinator loads to the log end too).
	off := part.LogStartOffset()
	end := part.LogEndOffset()
	for off < end && !run.cancelled.Load() {
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
					if run.cancelled.Load() {
						return n, nil
					}
					// Copy: the record may alias a decompression buffer.
					l.record(p, clone(r.Key), clone(r.Value))
					n++
				}
			}
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			b = b[h.Size():]
		}
	}
	return n, nil
}

// newOffsetsLoader loads __consumer_offsets into the group coordinator.
func newOffsetsLoader(n *Node) *partitionLoader {
	return &partitionLoader{n: n, topic: OffsetsTopic, what: "group metadata", loaded: map[int32]bool{},
		begin: n.groups.BeginLoad, finish: n.groups.FinishLoad, unload: n.groups.Unload,
		record: func(p int32, key, value []byte) { n.groups.LoadRecord(p, group.Record{Key: key, Value: value}) }}
}

// leadership is what the current metadata says of partition p of an
// internal topic, for a coordinator that does not own p (the coordinators'
// Leader hooks): led by this node, by another, or by none (no such topic
// yet, or no leader).
func (n *Node) leadership(topic string, p int32) metadata.Leadership {
	mp := n.ctrl.Image().Topic(topic).Partition(p)
	switch {
	case mp == nil || mp.Leader == metadata.NoLeader:
		return metadata.LeaderNone
	case mp.Leader == n.nodeID:
		return metadata.LeaderSelf
	}
	return metadata.LeaderOther
}

// awaitLoaded returns once this node's coordinator of partition p of an
// internal topic has loaded it, or when ctx ends, or at once when this
// node does not lead p. FindCoordinator calls it before it names this
// node: it answers from the newest metadata image, which the follow loop
// may not have applied yet, and a client whose first request then met a
// coordinator that has not begun to load would be told to retry
// (kafka-go backs off 5 s). So it applies the image here first, as a
// proposal's handler does, and waits for the replay.
func (n *Node) awaitLoaded(ctx context.Context, topic string, p int32) {
	var l *partitionLoader
	switch {
	case topic == OffsetsTopic:
		l = n.loader
	case topic == sharestate.Topic && n.states != nil:
		l = n.states.loader
	case topic == txn.Topic && n.txns != nil:
		l = n.txns.loader
	}
	if l == nil {
		return
	}
	run := l.loading(p)
	if run == nil {
		im := n.ctrl.Image()
		if mp := im.Topic(topic).Partition(p); mp == nil || mp.Leader != n.nodeID {
			return
		}
		if err := n.replicas.Apply(im); err != nil {
			return
		}
		n.reconcileLoaders(im)
		if run = l.loading(p); run == nil {
			return
		}
	}
	select {
	case <-run.done:
	case <-ctx.Done():
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// shareGroupBounds is Kafka's check of the share group broker settings:
// the session timeout and heartbeat interval within their min/max bounds,
// and the interval below the timeout.
func shareGroupBounds(cfg *config.Config) error {
	within := func(name, minName, maxName string) error {
		v, lo, hi := cfg.Int(name), cfg.Int(minName), cfg.Int(maxName)
		if v < lo || v > hi {
			return fmt.Errorf("%s (%d) must be between %s (%d) and %s (%d)", name, v, minName, lo, maxName, hi)
		}
		return nil
	}
	errs := []error{
		within("group.share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
		within("group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
	}
	if hb, st := cfg.Int("group.share.heartbeat.interval.ms"), cfg.Int("group.share.session.timeout.ms"); hb >= st {
		errs = append(errs, fmt.Errorf("group.share.heartbeat.interval.ms (%d) must be less than group.share.session.timeout.ms (%d)", hb, st))
	}
	return errors.Join(errs...)
}
