package txn

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sendMarkers writes m's markers on a goroutine until every partition has
// its marker (or its topic is gone), then completes the transaction.
func (c *Coordinator) sendMarkers(tp *loadedPart, m Markers) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		todo := slices.Clone(m.Partitions)
		backoff := 50 * time.Millisecond
		for len(todo) > 0 {
			var fenced error
			todo, fenced = c.writeMarkers(tp, m, todo)
			if fenced != nil {
				c.log.Warn("transaction markers fenced; the transaction stays pending",
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
		res := c.Do(context.Background(), tp.index, func(p *Partition, now time.Time) Result {
			res, err := p.MarkersDone(m, now)
			if err != nil {
				return Result{} // stale: another transition took over
			}
			return res
		})
		if res.Err != nil {
			c.log.Warn("completing transaction", "transactional_id", m.TransactionalID, "err", res.Err)
		}
	}()
}

// writeMarkers sends one round of WriteTxnMarkers for the partitions in
// todo, grouped by leader, and returns those still to do; fenced is the
// error of a leader that refused the marker for good (markerFenced): a
// newer coordinator or producer took over, and, as Kafka does, this
// coordinator stops sending the transaction's markers.
func (c *Coordinator) writeMarkers(tp *loadedPart, m Markers, todo []TopicPartition) (left []TopicPartition, fenced error) {
	im := c.run.Image()
	tp.mu.Lock()
	epoch := tp.epoch
	tp.mu.Unlock()
	byLeader := map[int32][]TopicPartition{}
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
			c.log.Debug("WriteTxnMarkers", "leader", leader, "err", err)
			left = append(left, parts...)
			continue
		}
		got := map[TopicPartition]int16{}
		for _, rm := range resp.Markers {
			for _, rt := range rm.Topics {
				for _, rp := range rt.Partitions {
					got[TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
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
func (c *Coordinator) request(addr string, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	resp, err := c.run.Peers.Request(ctx, addr, req, 40*time.Second)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.WriteTxnMarkersResponse)
	if !ok {
		return nil, fmt.Errorf("WriteTxnMarkers answered with %T", resp)
	}
	return r, nil
}
