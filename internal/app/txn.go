package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/group"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/txn"
)

// txnCoord is the node's transaction coordinator: one txn.Partition per
// __transaction_state partition this node leads, loaded by a
// replica.Loader (replay, then the pending markers are sent again). Each
// operation runs under its partition's mutex, appends the Result's
// records through the replica path and answers once they are durable;
// the markers of a Result are then written by WriteTxnMarkers to each
// partition's leader (through a peer connection, to this node too) and
// the transaction completed with MarkersDone.
type txnCoord struct {
	n   *Node
	cfg txn.Config
	log *replica.StateLog

	mu    sync.Mutex // guards parts
	parts map[int32]*txnPart

	wg sync.WaitGroup // timers and marker senders
}

// txnPart is one loaded __transaction_state partition. mu owns p: every
// call on it, and every append of its records (so the log has them in
// the order they were made).
type txnPart struct {
	index int32
	stop  chan struct{} // closed on unload: its timers and marker senders end

	mu      sync.Mutex // guards p, loading, epoch, last, changed
	p       *txn.Partition
	changed chan struct{} // closed and replaced at each durable change (Changed)
	loading bool          // replaying: operations answer COORDINATOR_LOAD_IN_PROGRESS
	epoch   int32         // coordinator epoch: the partition's leader epoch when loaded
	// last is the wait of the last append: an operation that writes
	// nothing still answers only once the state it read is durable (Kafka
	// refuses it meanwhile with its pending state). Nil: none yet.
	last func() error
}

func newTxnCoord(n *Node, cfg *config.Config) *txnCoord {
	c := &txnCoord{n: n, parts: map[int32]*txnPart{}, log: &replica.StateLog{Replicas: n.replicas, Topic: txn.Topic,
		NotHere: kerr.NotCoordinator, Timeout: 30 * time.Second}, cfg: txn.Config{
		MaxTimeout:        cfg.Duration("transaction.max.timeout.ms"),
		IDExpiration:      cfg.Duration("transactional.id.expiration.ms"),
		AbortInterval:     cfg.Duration("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
		ExpireInterval:    cfg.Duration("transaction.remove.expired.transaction.cleanup.interval.ms"),
		OffsetsPartitions: int32(cfg.Int("offsets.topic.num.partitions")),
	}}
	return c
}

// allocate hands out producer ids from the node's blocks (the ones
// InitProducerId without a transactional id uses).
func (c *txnCoord) allocate() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.n.pids.Next(ctx)
}

func (c *txnCoord) get(p int32) *txnPart {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[p]
}

// BeginLoad implements replica.Coordinator.
func (c *txnCoord) BeginLoad(p int32) {
	tp := &txnPart{index: p, stop: make(chan struct{}), p: txn.NewPartition(c.cfg, c.allocate), loading: true,
		changed: make(chan struct{})}
	if epoch, ok := c.log.LeaderEpoch(p); ok {
		tp.epoch = epoch
	}
	c.mu.Lock()
	if old := c.parts[p]; old != nil {
		close(old.stop) // not unloaded: a reload of a partition still led
	}
	c.parts[p] = tp
	c.mu.Unlock()
}

// LoadRecord implements replica.Coordinator.
func (c *txnCoord) LoadRecord(p int32, key, value []byte) error {
	tp := c.get(p)
	if tp == nil {
		return nil
	}
	// The partition is loading: no operation touches p until
	// FinishLoad, which takes mu.
	return tp.p.Replay(key, value)
}

// FinishLoad implements replica.Coordinator.
func (c *txnCoord) FinishLoad(p int32) {
	tp := c.get(p)
	if tp == nil {
		return
	}
	tp.mu.Lock()
	tp.loading = false
	pending := tp.p.Pending()
	tp.mu.Unlock()
	for _, m := range pending {
		c.sendMarkers(tp, m)
	}
	c.wg.Add(1)
	go c.timers(tp)
}

// Unload implements replica.Coordinator.
func (c *txnCoord) Unload(p int32) {
	c.mu.Lock()
	tp := c.parts[p]
	delete(c.parts, p)
	c.mu.Unlock()
	if tp != nil {
		close(tp.stop)
	}
}

// close stops the timers and marker senders of the partitions loaded;
// the loader's replays have ended.
func (c *txnCoord) close() {
	c.mu.Lock()
	for p, tp := range c.parts {
		close(tp.stop)
		delete(c.parts, p)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Loaded implements handler.TxnCoordinator.
func (c *txnCoord) Loaded() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int32, 0, len(c.parts))
	for p := range c.parts {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// View implements handler.TxnCoordinator.
func (c *txnCoord) View(p int32, fn func(*txn.Partition)) error {
	tp := c.get(p)
	if tp == nil {
		return c.notLoaded(p)
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.loading {
		return kerr.CoordinatorLoadInProgress
	}
	fn(tp.p)
	return nil
}

// Changed implements handler.TxnCoordinator.
func (c *txnCoord) Changed(p int32) <-chan struct{} {
	tp := c.get(p)
	if tp == nil {
		return nil
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.changed
}

// Do implements handler.TxnCoordinator.
func (c *txnCoord) Do(ctx context.Context, p int32, op func(*txn.Partition, time.Time) txn.Result) txn.Result {
	tp := c.get(p)
	if tp == nil {
		return txnFail(c.notLoaded(p))
	}
	tp.mu.Lock()
	if tp.loading {
		tp.mu.Unlock()
		return txnFail(kerr.CoordinatorLoadInProgress)
	}
	res := op(tp.p, time.Now())
	wait, err := c.append(tp, res.Records)
	tp.mu.Unlock()
	if err == nil {
		err = wait()
	}
	if err != nil {
		c.n.log.Warn("writing __transaction_state", "partition", p, "err", err)
		c.rebuild(tp)
		return txnFail(kerr.NotCoordinator)
	}
	if len(res.Records) > 0 {
		tp.mu.Lock()
		close(tp.changed)
		tp.changed = make(chan struct{})
		tp.mu.Unlock()
	}
	for _, m := range res.Markers {
		c.sendMarkers(tp, m)
	}
	return res
}

// notLoaded is the error for partition p, which this coordinator has not
// loaded: NOT_COORDINATOR only when another node leads it
// (group.NotOwnedError).
func (c *txnCoord) notLoaded(p int32) error {
	return group.NotOwnedError(c.n.ctrl.Image().Leadership(txn.Topic, p, c.n.nodeID))
}

func txnFail(err error) txn.Result {
	return txn.Result{Err: err, ProducerID: txn.NoProducerID, ProducerEpoch: txn.NoEpoch}
}

// append appends records to the partition (tp.mu held); the returned wait
// ends once every in-sync replica has them.
func (c *txnCoord) append(tp *txnPart, recs []txn.Record) (func() error, error) {
	if len(recs) == 0 {
		if _, ok := c.log.LeaderEpoch(tp.index); !ok {
			return nil, kerr.NotCoordinator
		}
		if tp.last == nil {
			return func() error { return nil }, nil
		}
		return tp.last, nil
	}
	kvs := make([]batch.KV, len(recs))
	for i, r := range recs {
		kvs[i] = batch.KV{Key: r.Key, Value: r.Value}
	}
	wait, err := c.log.Append(tp.index, kvs)
	if err != nil {
		return nil, err
	}
	tp.last = wait
	return wait, nil
}

// rebuild drops tp's state after a failed write and replays the
// partition's log, as the txn contract asks, then sends the pending
// markers again. A partition no longer led is left to the loader.
func (c *txnCoord) rebuild(tp *txnPart) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if c.get(tp.index) != tp {
		return
	}
	fresh := txn.NewPartition(c.cfg, c.allocate)
	_, err := c.log.Replay(tp.index, func(key, value []byte) { _ = fresh.Replay(key, value) })
	switch {
	case errors.Is(err, kerr.NotCoordinator):
		return // not on this node any more
	case err != nil:
		c.n.log.Error("replaying __transaction_state", "partition", tp.index, "err", err)
	}
	tp.p = fresh
	for _, m := range fresh.Pending() {
		c.sendMarkers(tp, m)
	}
}

// timers aborts timed-out transactions and expires idle ids on tp until
// it is unloaded.
func (c *txnCoord) timers(tp *txnPart) {
	defer c.wg.Done()
	abort := time.NewTicker(c.cfg.AbortInterval)
	defer abort.Stop()
	expire := time.NewTicker(c.cfg.ExpireInterval)
	defer expire.Stop()
	for {
		var op func(*txn.Partition, time.Time) txn.Result
		select {
		case <-tp.stop:
			return
		case <-abort.C:
			op = (*txn.Partition).AbortTimedOut
		case <-expire.C:
			op = (*txn.Partition).ExpireIDs
		}
		if res := c.Do(context.Background(), tp.index, op); res.Err != nil && !errors.Is(res.Err, kerr.NotCoordinator) {
			c.n.log.Warn("transaction coordinator timer", "partition", tp.index, "err", res.Err)
		}
	}
}

// sendMarkers writes m's markers on a goroutine until every partition has
// its marker (or its topic is gone), then completes the transaction.
func (c *txnCoord) sendMarkers(tp *txnPart, m txn.Markers) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		todo := slices.Clone(m.Partitions)
		backoff := 50 * time.Millisecond
		for len(todo) > 0 {
			var fenced error
			todo, fenced = c.writeMarkers(tp, m, todo)
			if fenced != nil {
				c.n.log.Warn("transaction markers fenced; the transaction stays pending",
					"transactional_id", m.TransactionalID, "producer", m.ProducerID, "epoch", m.ProducerEpoch, "err", fenced)
				return
			}
			if len(todo) == 0 {
				break
			}
			select {
			case <-tp.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
		res := c.Do(context.Background(), tp.index, func(p *txn.Partition, now time.Time) txn.Result {
			res, err := p.MarkersDone(m, now)
			if err != nil {
				return txn.Result{} // stale: another transition took over
			}
			return res
		})
		if res.Err != nil {
			c.n.log.Warn("completing transaction", "transactional_id", m.TransactionalID, "err", res.Err)
		}
	}()
}

// writeMarkers sends one round of WriteTxnMarkers for the partitions in
// todo, grouped by leader, and returns those still to do; fenced is the
// error of a leader that refused the marker for good (markerFenced): a
// newer coordinator or producer took over, and, as Kafka does, this
// coordinator stops sending the transaction's markers.
func (c *txnCoord) writeMarkers(tp *txnPart, m txn.Markers, todo []txn.TopicPartition) (left []txn.TopicPartition, fenced error) {
	im := c.n.ctrl.Image()
	tp.mu.Lock()
	epoch := tp.epoch
	tp.mu.Unlock()
	byLeader := map[int32][]txn.TopicPartition{}
	for _, p := range todo {
		t := im.Topic(p.Topic)
		if t == nil {
			continue // deleted: done
		}
		ip := t.Partition(p.Partition)
		if ip == nil {
			continue
		}
		byLeader[ip.Leader] = append(byLeader[ip.Leader], p)
	}
	for leader, parts := range byLeader {
		b, ok := im.Broker(leader)
		if !ok {
			left = append(left, parts...)
			continue
		}
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.Version = 1
		mk := kmsg.NewWriteTxnMarkersRequestMarker()
		mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, epoch
		for _, p := range parts {
			if n := len(mk.Topics); n == 0 || mk.Topics[n-1].Topic != p.Topic {
				t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				t.Topic = p.Topic
				mk.Topics = append(mk.Topics, t)
			}
			last := &mk.Topics[len(mk.Topics)-1]
			last.Partitions = append(last.Partitions, p.Partition)
		}
		req.Markers = append(req.Markers, mk)
		resp, err := c.request(net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), req)
		if err != nil {
			c.n.log.Debug("WriteTxnMarkers", "leader", leader, "err", err)
			left = append(left, parts...)
			continue
		}
		got := map[txn.TopicPartition]int16{}
		for _, rm := range resp.Markers {
			for _, rt := range rm.Topics {
				for _, rp := range rt.Partitions {
					got[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
				}
			}
		}
		for _, p := range parts {
			ec, ok := got[p]
			switch {
			case ok && ec == 0:
			case ok && markerFenced(ec):
				fenced = fmt.Errorf("%s-%d: %w", p.Topic, p.Partition, kerr.ErrorForCode(ec))
			default:
				left = append(left, p) // NOT_LEADER, unknown (deleted topics drop out above), timeouts: retry
			}
		}
	}
	return left, fenced
}

// markerFenced says whether a partition leader's answer to a marker means
// this coordinator must stop sending the transaction's markers rather than
// retry, as Kafka's TransactionMarkerRequestCompletionHandler does:
// INVALID_PRODUCER_EPOCH (a newer producer epoch wrote to the partition)
// and TRANSACTION_COORDINATOR_FENCED (a marker from a newer coordinator,
// one with a higher __transaction_state leader epoch, reached the
// partition: that coordinator owns the transaction now).
func markerFenced(code int16) bool {
	return code == kerr.InvalidProducerEpoch.Code || code == kerr.TransactionCoordinatorFenced.Code
}

// request sends one WriteTxnMarkers through the node's peer pool.
func (c *txnCoord) request(addr string, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	resp, err := c.n.peers.Request(ctx, addr, req, 40*time.Second)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.WriteTxnMarkersResponse)
	if !ok {
		return nil, fmt.Errorf("WriteTxnMarkers answered with %T", resp)
	}
	return r, nil
}
