package replica

// Replication, the follower's side: one fetcher per leader broker copies
// the logs of every partition this node follows from that leader, with the
// Fetch API as a Kafka follower does (replica id = this node's id).
//
// Before it fetches a partition under a new leader epoch, the fetcher asks
// the leader where its own latest epoch ends (OffsetForLeaderEpoch) and
// truncates the divergent suffix, so a demoted leader or a returning
// replica never keeps records the new leader does not have. Each fetch asks
// from the follower's log end offset; with durability.mode=fsync the next
// fetch waits until everything appended is fsync'd, so the offset a
// follower fetches at tells the leader what is durable on the follower.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/latency"
	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/peer"
)

// fetcher copies partitions from one leader broker.
type fetcher struct {
	m      *Manager
	leader int32

	mu    sync.Mutex
	addr  string // the leader's advertised address; it may change
	parts map[*Partition]*fetchState
	wake  chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

// fetchState is a followed partition's progress under one leader epoch.
type fetchState struct {
	epoch     int32
	truncated bool      // the divergent suffix is gone; fetching may start
	retryAt   time.Time // after a partition error
}

// ErrNotFollower: a replicated append to a partition that leads.
var ErrNotFollower = errors.New("replica: partition is not a follower")

// follow makes p fetch from leader (or stop fetching when leader < 0).
func (m *Manager) follow(p *Partition, leader int32, im *metadata.Image) {
	addr := ""
	if leader >= 0 {
		if b, ok := im.Broker(leader); ok {
			addr = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	m.fmu.Lock()
	defer m.fmu.Unlock()
	for id, f := range m.fetchers {
		if id != leader && f.remove(p) && f.idle() {
			f.stop()
			delete(m.fetchers, id)
		}
	}
	f := m.fetchers[leader]
	if leader < 0 || addr == "" || m.ctx == nil {
		if f != nil && f.remove(p) && f.idle() {
			f.stop()
			delete(m.fetchers, leader)
		}
		return
	}
	if f == nil {
		f = m.newFetcher(leader, addr)
		m.fetchers[leader] = f
	}
	f.setAddr(addr)
	f.add(p, p.leaderEpoch.Load())
}

// unfollow stops fetching p (the partition is closing).
func (m *Manager) unfollow(p *Partition) {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	for id, f := range m.fetchers {
		if f.remove(p) && f.idle() {
			f.stop()
			delete(m.fetchers, id)
		}
	}
}

// stopFetchers stops every fetcher (Close).
func (m *Manager) stopFetchers() {
	m.fmu.Lock()
	fs := m.fetchers
	m.fetchers = map[int32]*fetcher{}
	m.fmu.Unlock()
	for _, f := range fs {
		f.stop()
	}
}

func (m *Manager) newFetcher(leader int32, addr string) *fetcher {
	ctx, cancel := context.WithCancel(m.ctx)
	f := &fetcher{
		m: m, leader: leader, addr: addr,
		parts:  map[*Partition]*fetchState{},
		wake:   make(chan struct{}, 1),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go f.run(ctx)
	return f
}

// setAddr follows the leader to a new address (re-registered broker).
func (f *fetcher) setAddr(addr string) {
	f.mu.Lock()
	f.addr = addr
	f.mu.Unlock()
}

func (f *fetcher) address() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addr
}

func (f *fetcher) add(p *Partition, epoch int32) {
	f.mu.Lock()
	if st := f.parts[p]; st == nil || st.epoch != epoch {
		f.parts[p] = &fetchState{epoch: epoch}
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) remove(p *Partition) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.parts[p]
	delete(f.parts, p)
	return ok
}

func (f *fetcher) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.parts) == 0
}

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

// followed is one partition of a fetch round.
type followed struct {
	p  *Partition
	st fetchState
}

func (f *fetcher) snapshot() []followed {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]followed, 0, len(f.parts))
	for p, st := range f.parts {
		out = append(out, followed{p, *st})
	}
	return out
}

// update changes a partition's state if it is still followed at epoch.
func (f *fetcher) update(p *Partition, epoch int32, fn func(*fetchState)) {
	f.mu.Lock()
	if st := f.parts[p]; st != nil && st.epoch == epoch {
		fn(st)
	}
	f.mu.Unlock()
}

func (f *fetcher) run(ctx context.Context) {
	defer close(f.done)
	log := f.m.log.With("leader", f.leader)
	var conn *peer.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	backoff := 50 * time.Millisecond
	fail := func(err error) {
		if conn != nil {
			conn.Close()
			conn = nil
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn("replica fetcher: retrying", "addr", f.address(), "err", err, "in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff + rand.N(backoff/2)):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	for ctx.Err() == nil {
		parts := f.snapshot()
		if len(parts) == 0 {
			select {
			case <-ctx.Done():
			case <-f.wake:
			}
			continue
		}
		if conn != nil && conn.Addr != f.address() {
			conn.Close()
			conn = nil
		}
		if conn == nil {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c, err := peer.DialSASL(dctx, f.address(), "berth-replica-"+strconv.Itoa(int(f.m.cfg.NodeID)), f.m.cfg.Dial, f.m.cfg.PeerSASL)
			cancel()
			if err != nil {
				fail(err)
				continue
			}
			conn = c
		}
		if err := f.truncateAll(ctx, conn, parts); err != nil {
			fail(err)
			continue
		}
		if err := f.fetchOnce(ctx, conn, parts); err != nil {
			fail(err)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// truncateAll brings every partition new to this leader epoch in line
// with the leader's log.
func (f *fetcher) truncateAll(ctx context.Context, conn *peer.Conn, parts []followed) error {
	for _, fp := range parts {
		if fp.st.truncated {
			continue
		}
		to, err := f.divergence(ctx, conn, fp)
		if err != nil {
			return err
		}
		if to >= 0 {
			if err := fp.p.truncateTo(to); err != nil {
				return err
			}
		}
		f.update(fp.p, fp.st.epoch, func(st *fetchState) { st.truncated = true })
	}
	return nil
}

// divergence asks the leader where this replica's latest epoch ends and
// returns the offset to truncate to, or -1 for nothing to do.
func (f *fetcher) divergence(ctx context.Context, conn *peer.Conn, fp followed) (int64, error) {
	p := fp.p
	latest := p.log.LatestEpoch()
	leo := p.log.LogEndOffset()
	if latest < 0 || leo == p.log.LogStartOffset() {
		return -1, nil
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 4
	req.ReplicaID = f.m.cfg.NodeID
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = p.Topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p.Index, fp.st.epoch, latest
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kr, err := conn.Request(ctx, req, 30*time.Second)
	if err != nil {
		return -1, err
	}
	resp := kr.(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("OffsetForLeaderEpoch: malformed response from leader %d", f.leader)
	}
	sp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		return -1, fmt.Errorf("OffsetForLeaderEpoch %s-%d at leader %d: %w", p.Topic, p.Index, f.leader, err)
	}
	switch {
	case sp.EndOffset < 0:
		// The leader knows no epoch at or below ours: keep what is
		// committed only.
		return p.hw.Load(), nil
	case sp.LeaderEpoch == latest:
		return min(sp.EndOffset, leo), nil
	default:
		_, ours := p.log.EndOffsetForEpoch(sp.LeaderEpoch)
		if ours < 0 {
			ours = leo
		}
		return min(sp.EndOffset, ours), nil
	}
}

// fetchOnce waits until earlier appends are durable, sends one Fetch for
// every partition ready to fetch and appends what comes back.
func (f *fetcher) fetchOnce(ctx context.Context, conn *peer.Conn, parts []followed) error {
	cfg := f.m.cfg
	now := time.Now()
	ready := parts[:0:0]
	for _, fp := range parts {
		if fp.st.truncated && !now.Before(fp.st.retryAt) && !fp.p.leading.Load() {
			ready = append(ready, fp)
		}
	}
	if len(ready) == 0 {
		select {
		case <-ctx.Done():
		case <-f.wake:
		case <-time.After(100 * time.Millisecond):
		}
		return nil
	}
	if err := waitSynced(ctx, ready); err != nil {
		return err
	}
	sent := time.Now()
	for _, fp := range ready {
		// This fetch's offset acknowledges what became durable since the
		// last (the replica_ack stage).
		if at := fp.p.durableUnacked.Swap(0); at != 0 {
			f.m.Metrics.Stages.Observe(latency.ReplicaAck, sent.Sub(time.Unix(0, at)))
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = 13
	req.ReplicaID = cfg.NodeID
	req.MaxWaitMillis = int32(cfg.ReplicaFetchWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = cfg.ReplicaFetchResponseMaxBytes
	req.SessionEpoch = -1
	byTopic := map[[16]byte]int{}
	for _, fp := range ready {
		i, ok := byTopic[fp.p.TopicID]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = fp.p.Topic, fp.p.TopicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[fp.p.TopicID] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = fp.p.Index
		rp.CurrentLeaderEpoch = fp.st.epoch
		rp.FetchOffset = fp.p.log.LogEndOffset()
		rp.LastFetchedEpoch = -1
		rp.LogStartOffset = fp.p.log.LogStartOffset()
		rp.PartitionMaxBytes = cfg.ReplicaFetchMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kr, err := conn.Request(ctx, req, cfg.ReplicaFetchWait+30*time.Second)
	if err != nil {
		return err
	}
	got := time.Now()
	resp := kr.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("fetch from leader %d: %w", f.leader, err)
	}
	find := func(id [16]byte, part int32) (followed, bool) {
		for _, fp := range ready {
			if fp.p.TopicID == id && fp.p.Index == part {
				return fp, true
			}
		}
		return followed{}, false
	}
	var throttledBytes int64
	var throttled []followed
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			fp, ok := find(rt.TopicID, rp.Partition)
			if !ok {
				continue
			}
			f.handlePartition(fp, &rp, got)
			if fp.p.throttled() {
				throttledBytes += int64(len(rp.RecordBatches))
				throttled = append(throttled, fp)
			}
		}
	}
	f.throttle(throttled, throttledBytes)
	return nil
}

// throttle holds back the partitions a reassignment is adding once they
// took n bytes, for as long as follower.replication.throttled.rate says n
// bytes take.
func (f *fetcher) throttle(parts []followed, n int64) {
	rate := int64(0)
	if f.m.cfg.ThrottleRate != nil {
		rate = f.m.cfg.ThrottleRate()
	}
	if n == 0 || rate <= 0 || rate == math.MaxInt64 {
		return
	}
	until := time.Now().Add(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
	for _, fp := range parts {
		f.update(fp.p, fp.st.epoch, func(st *fetchState) {
			if until.After(st.retryAt) {
				st.retryAt = until
			}
		})
	}
}

// handlePartition applies one partition's fetch result, read at got.
func (f *fetcher) handlePartition(fp followed, rp *kmsg.FetchResponseTopicPartition, got time.Time) {
	p := fp.p
	switch err := kerr.ErrorForCode(rp.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.OffsetOutOfRange):
		if p.log.LogEndOffset() < rp.LogStartOffset {
			// Far behind: the leader deleted what we would fetch next.
			if err := p.resetTo(rp.LogStartOffset); err != nil {
				f.m.log.Error("replica fetcher: resetting log", "topic", p.Topic, "partition", p.Index, "err", err)
			}
			return
		}
		// Ahead of the leader: find the divergence again.
		f.update(p, fp.st.epoch, func(st *fetchState) { st.truncated = false })
		return
	default:
		// Leadership moved or the leader has not caught up with the
		// metadata yet: wait for the next image, retrying meanwhile.
		f.m.log.Debug("replica fetcher: partition error", "topic", p.Topic, "partition", p.Index, "leader", f.leader, "err", err)
		f.update(p, fp.st.epoch, func(st *fetchState) { st.retryAt = time.Now().Add(500 * time.Millisecond) })
		return
	}
	if len(rp.RecordBatches) > 0 {
		if err := p.appendReplicated(rp.RecordBatches, rp.HighWatermark, rp.LogStartOffset, got); err != nil {
			if errors.Is(err, blog.ErrOffsetOrder) {
				f.update(p, fp.st.epoch, func(st *fetchState) { st.truncated = false })
				return
			}
			f.m.log.Error("replica fetcher: append failed", "topic", p.Topic, "partition", p.Index, "err", err)
			f.update(p, fp.st.epoch, func(st *fetchState) { st.retryAt = time.Now().Add(time.Second) })
		}
		return
	}
	p.setLeaderHW(rp.HighWatermark)
}

// waitSynced waits until each partition's appended data is durable, so
// that its fetch offset promises no more than the follower has on disk.
func waitSynced(ctx context.Context, parts []followed) error {
	var w *Waiter
	defer func() {
		if w != nil {
			w.Done()
		}
	}()
	for {
		behind := false
		for _, fp := range parts {
			p := fp.p
			if p.synced.Load() < p.log.LogEndOffset() && p.failed.Load() == nil && !p.closed.Load() {
				behind = true
				break
			}
		}
		if !behind {
			return nil
		}
		if w == nil {
			w = NewWaiter()
			for _, fp := range parts {
				fp.p.Watch(w)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.C:
		case <-time.After(time.Second):
		}
	}
}

// appendReplicated appends batches copied from the leader (offsets and
// epochs as the leader assigned them) and queues them for the fsync.
func (p *Partition) appendReplicated(data []byte, leaderHW, leaderLogStart int64, got time.Time) error {
	// A fetch may end with a partial batch (the leader cut at the byte
	// limit): keep whole batches only.
	n := 0
	for n+batch.HeaderSize <= len(data) {
		h := batch.DecodeHeader(data[n:])
		if h.Length <= 0 || n+h.Size() > len(data) {
			break
		}
		n += h.Size()
	}
	data = data[:n]
	if len(data) == 0 {
		p.setLeaderHW(leaderHW)
		return nil
	}
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.appendMu.Lock()
	if p.leading.Load() {
		p.appendMu.Unlock()
		return ErrNotFollower
	}
	if _, err := p.log.AppendWithOffsets(data); err != nil {
		p.appendMu.Unlock()
		return err
	}
	txns := false
	var aborted []blog.AbortedTxn
	for off := 0; off < len(data); {
		h := batch.DecodeHeader(data[off:])
		switch {
		case h.ProducerID < 0:
		case h.Control():
			mk, err := batch.ParseMarker(data[off : off+h.Size()])
			if err != nil {
				p.logg.Warn("follower: skipping a malformed control batch", "topic", p.Topic, "partition", p.Index, "offset", h.BaseOffset, "err", err)
				break
			}
			if mk.Type == batch.ControlAbort {
				if t, ok := p.producers.abortEntry(h.ProducerID, h.BaseOffset); ok {
					aborted = append(aborted, t)
				}
			}
			p.producers.endTxn(h.ProducerID, h.ProducerEpoch, mk.CoordinatorEpoch, h.BaseOffset, h.MaxTimestamp)
			p.prodDirty, txns = true, true
		default:
			p.producers.update(&h, h.BaseOffset, h.MaxTimestamp)
			p.prodDirty = true
			txns = txns || h.Transactional()
		}
		off += h.Size()
	}
	if txns {
		p.publishTxns()
	}
	p.nextOffset = p.log.LogEndOffset()
	if err := p.log.AppendAbortedTxns(aborted); err != nil {
		// The log failed (the markers are in it, their entries not):
		// reopening replays them.
		p.appendMu.Unlock()
		return err
	}
	p.appendMu.Unlock()
	if leaderLogStart > p.log.LogStartOffset() && leaderLogStart <= p.hw.Load() {
		if err := p.log.SetLogStartOffset(leaderLogStart); err != nil {
			p.logg.Warn("follower: moving log start offset", "topic", p.Topic, "partition", p.Index, "err", err)
		}
	}
	p.setLeaderHW(leaderHW)
	written := time.Now()
	if !got.IsZero() {
		p.mgr.Metrics.Stages.Observe(latency.ReplicaWrite, written.Sub(got))
	}
	p.syncMu.Lock()
	p.unsynced = append(p.unsynced, writtenGroup{at: written, n: 1})
	p.syncMu.Unlock()
	p.mgr.markDirty(p)
	return nil
}

// setLeaderHW records the leader's high watermark; a follower's own is the
// smaller of it and what the follower has durably.
func (p *Partition) setLeaderHW(hw int64) {
	if hw > p.leaderHW.Load() {
		p.leaderHW.Store(hw)
	}
	p.followerHW()
}

func (p *Partition) followerHW() {
	if p.leading.Load() {
		return
	}
	hw := min(p.leaderHW.Load(), p.synced.Load())
	if hw > p.hw.Load() {
		p.hw.Store(hw)
		p.notify()
	}
}

// truncateTo cuts a follower's log at off (its divergent suffix).
func (p *Partition) truncateTo(off int64) error {
	return p.cutLog(func() error {
		if off >= p.log.LogEndOffset() {
			return nil
		}
		p.logg.Info("follower: truncating divergent log suffix", "topic", p.Topic, "partition", p.Index,
			"from", p.log.LogEndOffset(), "to", off)
		if err := p.log.Truncate(off); err != nil {
			return fmt.Errorf("truncating %s-%d to %d: %w", p.Topic, p.Index, off, err)
		}
		return nil
	})
}

// resetTo empties a follower's log and starts it at off (the leader's log
// start offset, when the follower fell behind retention).
func (p *Partition) resetTo(off int64) error {
	return p.cutLog(func() error {
		p.logg.Info("follower: behind the leader's log start; restarting the log", "topic", p.Topic, "partition", p.Index, "at", off)
		return p.log.Reset(off)
	})
}

// cutLog runs cut, which shrinks a follower's log, with the flusher and
// the append path stopped and the staging generation bumped (so a sync in
// flight does not move the high watermark past the cut), then fixes the
// offsets and producer state.
func (p *Partition) cutLog(cut func() error) error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.leading.Load() {
		return ErrNotFollower
	}
	p.genMu.Lock()
	p.gen.Add(1)
	p.genMu.Unlock()
	start, end := p.log.LogStartOffset(), p.log.LogEndOffset()
	if err := cut(); err != nil {
		return err
	}
	if p.log.LogStartOffset() != start || p.log.LogEndOffset() != end {
		p.afterTruncate()
	}
	return nil
}

// afterTruncate fixes offsets and producer state after the log shrank.
// Called with appendMu held.
func (p *Partition) afterTruncate() {
	leo := p.log.LogEndOffset()
	p.nextOffset = leo
	if p.synced.Load() > leo {
		p.synced.Store(leo)
	}
	if p.hw.Load() > leo {
		p.hw.Store(leo)
	}
	p.reloadProducers()
	p.prodDirty = true
}
