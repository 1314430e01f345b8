package replica

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/berthmq/berth/internal/latency"
	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/peer"
	"github.com/berthmq/berth/internal/vfs"
)

// ManagerConfig configures the replica manager.
type ManagerConfig struct {
	// Dial opens follower fetch connections to leaders (nil: plain TCP;
	// TLS when the inter-broker listener is SSL).
	Dial   peer.Dialer
	Dir    string // log.dirs
	NodeID int32
	Fsync  bool // durability.mode=fsync
	// PreallocateBytes is log.preallocate.bytes: the zeros kept written
	// past a busy partition's data in fsync mode (prealloc.go); 0: none.
	PreallocateBytes int64
	FlushInterval    time.Duration // log.flush.interval.ms, for durability.mode=os
	// SyncFilesystemPartitions is log.flush.filesystem.partitions: in fsync
	// mode, a sync round with at least this many partitions syncs the log
	// directory's whole filesystem once instead of fsyncing each; 0: never.
	SyncFilesystemPartitions int
	RetentionCheck           time.Duration // log.retention.check.interval.ms
	// IndexCheckpoint is how often the active segments' indexes of
	// durable data are written out (log.flush.offset.checkpoint.interval.ms),
	// bounding what recovery after a crash re-checks; 0: a minute.
	IndexCheckpoint time.Duration
	ProducerExpiry  time.Duration // producer.id.expiration.ms
	// MinFreeBytes: below this much free space in Dir, produce is refused
	// with KAFKA_STORAGE_ERROR until space returns.
	MinFreeBytes int64
	// Resolve computes a topic's effective config: its overrides, and the
	// defaults that depend on its replication factor.
	Resolve func(t *metadata.Topic) TopicConfig
	Logger  *slog.Logger
	Now     func() time.Time
	// CleanerEnable runs log compaction (log.cleaner.enable) every
	// CleanerBackoff (log.cleaner.backoff.ms).
	CleanerEnable  bool
	CleanerBackoff time.Duration
	// FS is the filesystem for partition logs and the files beside them
	// (high-watermark checkpoint, partition.metadata); nil is the OS. Tests
	// pass a vfs.FaultFS to inject full disks and failed fsyncs.
	FS vfs.FS

	// Replication. AlterPartition proposes a new ISR for a partition this
	// node leads (Kafka's AlterPartition: a PartitionChange with the
	// partition epoch); nil keeps ISRs as they are.
	AlterPartition               func(ctx context.Context, topic string, partition int32, isr []int32, partitionEpoch int32) error
	ReplicaLagMax                time.Duration // replica.lag.time.max.ms
	ReplicaFetchWait             time.Duration // replica.fetch.wait.max.ms
	ReplicaFetchMaxBytes         int32         // replica.fetch.max.bytes
	ReplicaFetchResponseMaxBytes int32         // replica.fetch.response.max.bytes
	// ThrottleRate returns follower.replication.throttled.rate (bytes per
	// second) for replicas a reassignment is adding; nil or <= 0: none.
	ThrottleRate func() int64

	// PeerSASL authenticates the followers' fetch connections to a SASL
	// listener (peer.DialSASL); nil: none.
	PeerSASL sasl.Mechanism
}

// Manager owns this node's partition replicas, the group-commit syncer and
// the retention loop. It follows the metadata image: partitions appear when
// a topic is created and go (with their files) when it is deleted.
type Manager struct {
	cfg            ManagerConfig
	log            *slog.Logger
	applied        atomic.Pointer[metadata.Image] // last image applied
	now            func() time.Time
	producerExpiry time.Duration

	applyMu sync.Mutex // serialises Apply
	// openHook, when set (tests), runs before each partition log opens.
	openHook func(topic string, partition int32)
	// syncHook, when set (tests), runs in a sync round between reading a
	// partition's staging generation and its fsync.
	syncHook func(p *Partition)
	// flushHook, when set (tests), runs in a write round before a
	// partition's staged batches are taken and written.
	flushHook atomic.Pointer[func(p *Partition)]
	// takenHook, when set (tests), runs in Partition.flush once the
	// staged batches are taken, before they are written (flushMu held).
	takenHook func(p *Partition)
	mu        sync.RWMutex // guards parts and byID
	parts     map[string][]*Partition
	byID      map[[16]byte]string

	dirtyMu  sync.Mutex // guards dirty and written
	dirty    []*Partition
	written  []*Partition // flushed, waiting for the syncer
	kick     chan struct{}
	syncKick chan struct{}

	diskLow atomic.Bool

	ctx      context.Context // set by Start; fetchers run under it
	fmu      sync.Mutex      // guards fetchers
	fetchers map[int32]*fetcher

	wg     sync.WaitGroup
	cancel context.CancelFunc

	Metrics ManagerMetrics

	runways runways // prealloc.go

	// fsys syncs the filesystem of cfg.Dir for rounds of at least
	// cfg.SyncFilesystemPartitions partitions; nil: each is fsynced.
	fsys vfs.Filesystem
}

// ManagerMetrics are counters read by /metrics.
type ManagerMetrics struct {
	CleanerRuns       atomic.Int64
	CleanerBytesFreed atomic.Int64
	Fsyncs            atomic.Int64
	FsyncNanos        atomic.Int64
	SyncRounds        atomic.Int64
	// FilesystemSyncs counts sync rounds that synced the log directory's
	// filesystem once instead of fsyncing each partition.
	FilesystemSyncs atomic.Int64
	RetentionSegs   atomic.Int64
	ISRShrinks      atomic.Int64
	ISRExpands      atomic.Int64
	// ISRChangeFailures counts ISR changes that the controller refused or
	// that did not commit.
	ISRChangeFailures atomic.Int64
	// Stages are the produce path's latency histograms (groupcommit.go
	// records the flusher's and syncer's, the Produce handler the rest).
	Stages latency.Set
}

// NewManager makes a manager; Start loads existing partitions.
func NewManager(cfg ManagerConfig) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FS == nil {
		cfg.FS = vfs.OS()
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = time.Second
	}
	if cfg.IndexCheckpoint <= 0 {
		cfg.IndexCheckpoint = time.Minute
	}
	if cfg.RetentionCheck <= 0 {
		cfg.RetentionCheck = 5 * time.Minute
	}
	if cfg.CleanerBackoff <= 0 {
		cfg.CleanerBackoff = 15 * time.Second
	}
	if cfg.ProducerExpiry <= 0 {
		cfg.ProducerExpiry = 24 * time.Hour
	}
	if cfg.ReplicaLagMax <= 0 {
		cfg.ReplicaLagMax = 30 * time.Second
	}
	if cfg.ReplicaFetchWait <= 0 {
		cfg.ReplicaFetchWait = 500 * time.Millisecond
	}
	if cfg.ReplicaFetchMaxBytes <= 0 {
		cfg.ReplicaFetchMaxBytes = 1 << 20
	}
	if cfg.ReplicaFetchResponseMaxBytes <= 0 {
		cfg.ReplicaFetchResponseMaxBytes = 10 << 20
	}
	m := &Manager{
		cfg: cfg, log: cfg.Logger, now: cfg.Now, producerExpiry: cfg.ProducerExpiry,
		parts:    map[string][]*Partition{},
		byID:     map[[16]byte]string{},
		kick:     make(chan struct{}, 1),
		syncKick: make(chan struct{}, 1),
		fetchers: map[int32]*fetcher{},
	}
	m.runways.init()
	m.openFilesystem()
	return m
}

// openFilesystem opens the handle that syncs the log directory's
// filesystem, before any partition file is written (it reports write-back
// errors since it was opened).
func (m *Manager) openFilesystem() {
	if !m.cfg.Fsync || m.cfg.SyncFilesystemPartitions <= 0 {
		return
	}
	fss, ok := m.cfg.FS.(vfs.FilesystemSyncer)
	if !ok {
		return
	}
	if err := m.cfg.FS.MkdirAll(m.cfg.Dir, 0o755); err != nil {
		m.log.Warn("log directory: each partition is fsynced on its own", "dir", m.cfg.Dir, "err", err)
		return
	}
	fsys, err := fss.OpenFilesystem(m.cfg.Dir)
	if err != nil {
		if !errors.Is(err, errors.ErrUnsupported) {
			m.log.Warn("cannot sync the log directory's filesystem at once; each partition is fsynced on its own", "dir", m.cfg.Dir, "err", err)
		}
		return
	}
	m.fsys = fsys
}

// Start runs the syncer, retention, disk-space and ISR loops, and the
// replica fetchers of partitions applied before.
func (m *Manager) Start(ctx context.Context) {
	ctx, m.cancel = context.WithCancel(ctx)
	m.fmu.Lock()
	m.ctx = ctx
	m.fmu.Unlock()
	m.wg.Add(4)
	go m.every(ctx, max(m.cfg.ReplicaLagMax/4, 10*time.Millisecond), m.checkISRs)
	if m.cfg.Fsync {
		m.wg.Add(1)
		go m.flushLoop(ctx)
		if m.cfg.PreallocateBytes > 0 {
			m.wg.Add(1)
			go m.preallocLoop(ctx)
		}
	}
	go m.syncLoop(ctx)
	go m.every(ctx, m.cfg.RetentionCheck, m.RunRetention)
	go m.diskLoop(ctx)
	m.wg.Add(3)
	go m.every(ctx, m.cfg.IndexCheckpoint, m.CheckpointIndexes)
	go m.every(ctx, hwCheckpointInterval, m.checkpointHWs)
	go m.every(ctx, producerSnapshotInterval, m.snapshotProducers)
	if m.cfg.CleanerEnable {
		m.wg.Add(1)
		go m.every(ctx, m.cfg.CleanerBackoff, func() { m.RunCleaner(ctx) })
	}
	m.applyMu.Lock()
	if im := m.applied.Load(); im != nil {
		m.applyRoles(im)
	}
	m.applyMu.Unlock()
}

// CheckpointIndexes writes out, for every partition, the index entries
// of its active segment's durable batches (log.Log.CheckpointIndex), so a
// restart after a crash re-checks only what was written since.
func (m *Manager) CheckpointIndexes() {
	for _, p := range m.All() {
		if p.closed.Load() {
			continue
		}
		if err := p.log.CheckpointIndex(); err != nil {
			m.log.Warn("writing the active segment's index", "topic", p.Topic, "partition", p.Index, "err", err)
		}
	}
}

// producerSnapshotInterval is how often partitions whose idempotent
// producers changed snapshot their state.
const producerSnapshotInterval = time.Minute

// snapshotProducers saves the producer state of every partition whose
// producers changed, a few at a time, off the group commit's path (with
// thousands of partitions written, one after another on the syncer they
// held up every acknowledgement for seconds once a minute).
func (m *Manager) snapshotProducers() {
	all := m.All()
	m.parallel(len(all), snapshotParallelism, func(i int) { all[i].snapshotProducers(false) })
}

// checkISRs shrinks the ISRs of led partitions whose followers lag.
func (m *Manager) checkISRs() {
	now := m.now().UnixMilli()
	for _, p := range m.All() {
		p.checkISR(now, m.cfg.ReplicaLagMax)
	}
}

// alterISR proposes isr (proposal seq of p) in the background; the result
// arrives as a new metadata image (or, on failure, clears the pending
// change).
func (m *Manager) alterISR(p *Partition, isr []int32, partEpoch int32, seq uint64) {
	if m.cfg.AlterPartition == nil {
		p.alterDone(seq, errors.New("no controller"))
		return
	}
	m.log.Info("proposing ISR change", "topic", p.Topic, "partition", p.Index, "isr", isr, "partition_epoch", partEpoch)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := m.cfg.AlterPartition(ctx, p.Topic, p.Index, isr, partEpoch)
		switch {
		case err == nil:
		case errors.Is(err, metadata.ErrIneligibleReplica):
			m.Metrics.ISRChangeFailures.Add(1)
			m.log.Info("ISR change refused: a follower is fenced or shutting down; it rejoins once the controller unfences it",
				"topic", p.Topic, "partition", p.Index, "isr", isr, "err", err)
		default:
			m.Metrics.ISRChangeFailures.Add(1)
			m.log.Warn("ISR change not committed; will retry", "topic", p.Topic, "partition", p.Index, "isr", isr, "err", err)
		}
		p.alterDone(seq, err)
	}()
}

// isrEligible reports whether the last image applied lets broker id join
// an ISR (KIP-841): registered, unfenced, not in controlled shutdown.
func (m *Manager) isrEligible(id int32) bool {
	im := m.applied.Load()
	return im == nil || im.IsrEligible(id)
}

// Close stops the loops, syncs and closes every log.
func (m *Manager) Close() error {
	if m.cancel != nil {
		m.cancel()
	}
	m.stopFetchers()
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []*Partition
	for _, ps := range m.parts {
		for _, p := range ps {
			if p != nil {
				all = append(all, p)
			}
		}
	}
	errs := make([]error, len(all))
	m.parallel(len(all), ioParallelism, func(i int) { errs[i] = m.closePartition(all[i]) })
	err := errors.Join(slices.DeleteFunc(errs, func(err error) bool { return err == nil })...)
	m.parts = map[string][]*Partition{}
	if m.fsys != nil {
		m.fsys.Close()
		m.fsys = nil
	}
	return err
}

// ioParallelism is how many partitions Apply opens, and Close closes, at
// once: each is a handful of small fsyncs (partition.metadata, indexes,
// checkpoints), which the device serves better many at a time; one after
// another, creating 10,000 partitions took 45 s and closing them 93 s.
// snapshotParallelism is how many producer snapshots are written at once
// while serving.
const (
	ioParallelism       = 32
	snapshotParallelism = 4
)

func (m *Manager) closePartition(p *Partition) error {
	if err := p.flush(); err == nil {
		_, _ = p.log.Sync()
	}
	p.snapshotProducers(true)
	if err := p.checkpointHW(); err != nil {
		m.log.Warn("writing the high-watermark checkpoint", "topic", p.Topic, "partition", p.Index, "err", err)
	}
	p.closed.Store(true)
	p.notify()
	return p.log.Close()
}

// Get returns a partition, or nil.
func (m *Manager) Get(topic string, part int32) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ps := m.parts[topic]
	if part < 0 || int(part) >= len(ps) {
		return nil
	}
	return ps[part]
}

// Partitions returns every partition of a topic.
func (m *Manager) Partitions(topic string) []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return append([]*Partition(nil), m.parts[topic]...)
}

// All returns every partition.
func (m *Manager) All() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*Partition
	for _, ps := range m.parts {
		for _, p := range ps {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// Failed lists partitions ("topic-N") that refuse writes after an fsync
// failure.
func (m *Manager) Failed() []string {
	var out []string
	for _, p := range m.All() {
		if p.failed.Load() != nil {
			out = append(out, dirName(p.Topic, p.Index))
		}
	}
	return out
}

// DiskLow reports whether writes are refused for lack of space.
func (m *Manager) DiskLow() bool { return m.diskLow.Load() }

// dirName is the partition directory: <topic>-<partition>, as Kafka names it.
func dirName(topic string, part int32) string { return topic + "-" + strconv.Itoa(int(part)) }

// Apply brings local partitions in line with an image: opens logs of new
// partitions this node replicates, updates configs and epochs, and deletes
// the logs of topics that are gone. Its phases run in this order:
// planApply, dropTopics, removeReplicas, openPartitions,
// installPartitions, then applyRoles.
func (m *Manager) Apply(im *metadata.Image) error {
	// applyMu serialises Apply; mu is held only to read and change the
	// maps, never while logs are opened or deleted, so partition lookups
	// (every produce and fetch) do not wait for a large topic to open.
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	if last := m.applied.Load(); last != nil && im.Index < last.Index {
		return nil // a newer image was applied already
	}
	plan := m.planApply(im)
	m.dropTopics(plan.drops)
	m.removeReplicas(plan.removes)
	errs := m.openPartitions(plan.opens)
	m.installPartitions(plan.opens)
	m.applied.Store(im)
	m.applyRoles(im)
	return errors.Join(errs...)
}

// opening is a partition Apply opens: planned by planApply, opened by
// openPartitions (p), installed by installPartitions.
type opening struct {
	name string
	id   [16]byte
	mp   *metadata.Partition
	cfg  TopicConfig
	p    *Partition
}

// applyPlan is what Apply changes, as planApply finds it.
type applyPlan struct {
	opens   []*opening
	removes []*Partition // replicas moved to other brokers
	drops   []string     // topics gone, or recreated under the same name
}

// planApply, Apply's first phase, compares the image with the partition
// maps (mu held for reading): the partitions to open, the replicas
// reassigned away, the topics to drop. The partitions that stay get their
// new config here.
func (m *Manager) planApply(im *metadata.Image) applyPlan {
	var opens []*opening
	var removes []*Partition // replicas moved to other brokers
	var drops []string       // topics gone, or recreated under the same name
	m.mu.RLock()
	for name, t := range im.Topics {
		cfg := m.cfg.Resolve(t)
		ps := m.parts[name]
		if id, ok := topicIDOf(ps); ok && id != t.ID {
			drops = append(drops, name)
			ps = nil
		}
		for i := range t.Partitions {
			mp := &t.Partitions[i]
			if !contains(mp.Replicas, m.cfg.NodeID) {
				if int(mp.Index) < len(ps) && ps[mp.Index] != nil {
					removes = append(removes, ps[mp.Index]) // reassigned away
				}
				continue
			}
			if int(mp.Index) < len(ps) && ps[mp.Index] != nil {
				p := ps[mp.Index]
				c := cfg
				p.cfg.Store(&c)
				p.log.SetConfig(c.Log)
				continue
			}
			opens = append(opens, &opening{name: name, id: t.ID, mp: mp, cfg: cfg})
		}
	}
	for name := range m.parts {
		if im.Topics[name] == nil {
			drops = append(drops, name)
		}
	}
	m.mu.RUnlock()
	return applyPlan{opens: opens, removes: removes, drops: drops}
}

// dropTopics, Apply's second phase, takes dropped topics out of the maps,
// then deletes their files; a recreated topic's directories must be gone
// before it opens.
func (m *Manager) dropTopics(drops []string) {
	var dropped [][]*Partition
	if len(drops) > 0 {
		m.mu.Lock()
		for _, name := range drops {
			ps := m.parts[name]
			if id, ok := topicIDOf(ps); ok {
				delete(m.byID, id)
			}
			delete(m.parts, name)
			dropped = append(dropped, ps)
		}
		m.mu.Unlock()
	}
	for i, ps := range dropped {
		m.dropTopic(drops[i], ps)
	}
}

// removeReplicas, Apply's third phase, takes the replicas reassigned to
// other brokers out of the maps, then stops them and deletes their files.
func (m *Manager) removeReplicas(removes []*Partition) {
	if len(removes) > 0 {
		m.mu.Lock()
		for _, p := range removes {
			if ps := m.parts[p.Topic]; int(p.Index) < len(ps) && ps[p.Index] == p {
				ps[p.Index] = nil
			}
		}
		m.mu.Unlock()
		for _, p := range removes {
			m.removeReplica(p)
		}
	}
}

// openPartitions, Apply's fourth phase, opens (and recovers) the logs of
// the partitions planned, with no lock held; the errors are of those that
// did not open, which stay out of the maps.
func (m *Manager) openPartitions(opens []*opening) []error {
	errs := make([]error, len(opens))
	m.parallel(len(opens), ioParallelism, func(i int) {
		o := opens[i]
		o.p, errs[i] = m.openPartition(o.name, o.id, o.mp, o.cfg)
	})
	// The logs opened after a clean stop removed their clean-shutdown
	// markers without a directory fsync each: one sync of the filesystem
	// makes every removal durable (a restart of 10,000 partitions saves
	// as many fsyncs), before any of them takes a write.
	var pending []int
	for i, o := range opens {
		if o.p != nil && o.p.log.MarkerPending() {
			pending = append(pending, i)
		}
	}
	if len(pending) > 0 {
		synced := m.syncFilesystemNow()
		m.parallel(len(pending), ioParallelism, func(k int) {
			o := opens[pending[k]]
			if err := o.p.log.FinishOpen(synced); err != nil {
				o.p.log.Close()
				o.p, errs[pending[k]] = nil, fmt.Errorf("opening %s-%d: %w", o.name, o.mp.Index, err)
			}
		})
	}
	return slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

// syncFilesystemNow syncs the filesystem of the log directory once
// (syncfs), reporting whether it did. It uses a handle of its own: an
// error syncfs reports is reported once per handle, and m.fsys's belong
// to the group commit.
func (m *Manager) syncFilesystemNow() bool {
	fss, ok := m.cfg.FS.(vfs.FilesystemSyncer)
	if !ok {
		return false
	}
	fsys, err := fss.OpenFilesystem(m.cfg.Dir)
	if err != nil {
		return false
	}
	defer fsys.Close()
	return fsys.Sync() == nil
}

// parallel runs fn(0..n-1) on up to width goroutines.
func (m *Manager) parallel(n, width int, fn func(i int)) {
	if n == 1 || width <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range min(n, width) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// installPartitions, Apply's fifth phase, puts the partitions opened into
// the maps (mu held), where lookups find them.
func (m *Manager) installPartitions(opens []*opening) {
	if len(opens) > 0 {
		m.mu.Lock()
		for _, o := range opens {
			if o.p == nil {
				continue
			}
			ps := m.parts[o.name]
			for int(o.mp.Index) >= len(ps) {
				ps = append(ps, nil)
			}
			ps[o.mp.Index] = o.p
			m.parts[o.name] = ps
			m.byID[o.id] = o.name
		}
		m.mu.Unlock()
	}
}

// applyRoles, Apply's last phase (and Start's, for an image applied
// before it), makes each local partition the leader or a follower as the
// image says, and points the followers' fetchers at their leaders.
func (m *Manager) applyRoles(im *metadata.Image) {
	for _, p := range m.All() {
		t := im.Topic(p.Topic)
		if t == nil || t.ID != p.TopicID {
			continue
		}
		mp := t.Partition(p.Index)
		if mp == nil || !contains(mp.Replicas, m.cfg.NodeID) {
			continue // reassigned away: the files stay until the topic goes
		}
		leader := p.applyPartition(mp)
		m.follow(p, leader, im)
	}
}

// topicIDOf returns the topic id of a topic's local partitions.
func topicIDOf(ps []*Partition) ([16]byte, bool) {
	for _, p := range ps {
		if p != nil {
			return p.TopicID, true
		}
	}
	return [16]byte{}, false
}

// removeReplica stops and deletes a replica this broker no longer holds
// (a completed reassignment). The caller has taken it out of the maps.
func (m *Manager) removeReplica(p *Partition) {
	m.unfollow(p)
	p.closed.Store(true)
	p.notify()
	p.flushMu.Lock()
	p.appendMu.Lock()
	if err := p.log.Delete(); err != nil {
		m.log.Warn("deleting a reassigned replica's files", "topic", p.Topic, "partition", p.Index, "err", err)
	}
	p.appendMu.Unlock()
	p.flushMu.Unlock()
	m.log.Info("replica removed: reassigned to other brokers", "topic", p.Topic, "partition", p.Index)
}

// dropTopic closes a removed topic's partitions and deletes their files.
// The caller has already taken them out of the maps.
func (m *Manager) dropTopic(name string, ps []*Partition) {
	for _, p := range ps {
		if p == nil {
			continue
		}
		m.unfollow(p)
		p.closed.Store(true)
		p.notify()
		p.appendMu.Lock() // wait out an append in progress
		if err := p.log.Delete(); err != nil {
			m.log.Warn("deleting partition files", "topic", name, "partition", p.Index, "err", err)
		}
		p.appendMu.Unlock()
	}
	m.log.Info("topic deleted", "topic", name)
}

func (m *Manager) openPartition(topic string, id [16]byte, mp *metadata.Partition, cfg TopicConfig) (*Partition, error) {
	if m.openHook != nil {
		m.openHook(topic, mp.Index)
	}
	dir := filepath.Join(m.cfg.Dir, dirName(topic, mp.Index))
	if err := checkTopicIDFile(m.cfg.FS, dir, id); err != nil {
		return nil, err
	}
	l, err := blog.Open(dir, cfg.Log, blog.Options{FS: m.cfg.FS, Logger: m.log, Now: m.now, DeferMarkerSync: true})
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	p := &Partition{Topic: topic, TopicID: id, Index: mp.Index, log: l, mgr: m, logg: m.log, producers: newProducerState()}
	c := cfg
	p.cfg.Store(&c)
	// Everything recovered from disk was on disk at open: it is durable.
	// With one replica it is committed too; with more, the leader learns
	// the high watermark again from its followers' fetches, and a follower
	// from its leader.
	leo := l.LogEndOffset()
	p.synced.Store(leo)
	if len(mp.Replicas) <= 1 {
		p.hw.Store(leo)
	} else {
		// The checkpointed high watermark, bounded by what the log holds
		// (hwcheckpoint.go).
		hw := min(max(readHWCheckpoint(m.cfg.FS, dir), l.LogStartOffset()), leo)
		p.hw.Store(hw)
		p.hwCheckpointed.Store(hw)
	}
	p.repl.leader = metadata.NoLeader
	p.nextOffset = leo
	if err := p.loadProducers(); err != nil {
		m.log.Warn("rebuilding producer state", "topic", topic, "partition", mp.Index, "err", err)
	}
	return p, nil
}

// checkTopicIDFile keeps a partition.metadata file (as Kafka does) with the
// topic id, so that files of a deleted topic are never served as a new
// topic of the same name.
func checkTopicIDFile(fs vfs.FS, dir string, id [16]byte) error {
	path := filepath.Join(dir, "partition.metadata")
	want := "version: 0\ntopic_id: " + hex.EncodeToString(id[:]) + "\n"
	b, err := vfs.ReadFile(fs, path)
	if err == nil {
		if string(b) == want {
			return nil
		}
		// Stale files of a deleted topic with the same name.
		if err := fs.RemoveAll(dir); err != nil {
			return err
		}
	} else if !os.IsNotExist(err) {
		return err
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return vfs.WriteFileAtomic(fs, path, []byte(want))
}

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// every runs fn each period until ctx ends; the background loops
// (retention, cleaner) are started with it.
func (m *Manager) every(ctx context.Context, period time.Duration, fn func()) {
	defer m.wg.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// RunRetention applies retention to every partition now.
func (m *Manager) RunRetention() {
	for _, p := range m.All() {
		if p.closed.Load() {
			continue
		}
		cp := p.Config().CleanupPolicy
		if !strings.Contains(cp, "delete") {
			continue
		}
		n, bytes, err := p.log.ApplyRetention()
		if err != nil {
			m.log.Warn("retention", "topic", p.Topic, "partition", p.Index, "err", err)
			continue
		}
		if n > 0 {
			m.Metrics.RetentionSegs.Add(int64(n))
			m.log.Info("retention deleted segments", "topic", p.Topic, "partition", p.Index, "segments", n, "bytes", bytes)
		}
	}
}

func (m *Manager) diskLoop(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		m.checkDisk()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Manager) checkDisk() {
	if m.cfg.MinFreeBytes <= 0 {
		return
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(m.cfg.Dir, &st); err != nil {
		return
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	low := free < m.cfg.MinFreeBytes
	if was := m.diskLow.Swap(low); was != low {
		if low {
			m.log.Error("log directory nearly full: refusing produce requests until space returns",
				"dir", m.cfg.Dir, "free_bytes", free, "log.dir.min.free.bytes", m.cfg.MinFreeBytes)
		} else {
			m.log.Info("log directory has space again: accepting produce requests", "dir", m.cfg.Dir, "free_bytes", free)
		}
	}
}
