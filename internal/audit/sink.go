package audit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/peer"
	"github.com/berthmq/berth/internal/replica"
)

// Record is one audit record to append: its key (the principal) and
// value (the CloudEvent's JSON).
type Record struct {
	Key, Value []byte
	Time       time.Time
}

// ReplicaSink appends audit records to __berth_audit through the replica
// path rather than a client of the node's own listener (which may demand
// SASL or an ACL the node's client cannot meet): a record's partition is
// its key's (metadata.PartitionForKey, so a principal's events are in one
// partition, in order); a partition this node leads is appended to
// directly (validated, group-committed, replicated), one led elsewhere
// gets a Produce through the broker-to-broker client. Both wait for
// acks=all.
type ReplicaSink struct {
	Replicas *replica.Manager
	Image    func() *metadata.Image
	Peers    *peer.Pool
	NodeID   int32
	// Timeout bounds the wait for one partition's append (default 30 s).
	Timeout time.Duration
}

// errNoTopic: the audit topic is not in the metadata image (yet).
var errNoTopic = errors.New("audit: " + Topic + " does not exist")

// Write appends recs, one batch per partition, and returns the records
// not written (those of the partitions that failed) with the errors.
func (s *ReplicaSink) Write(ctx context.Context, recs []Record) (rest []Record, err error) {
	im := s.Image()
	t := im.Topic(Topic)
	if t == nil || len(t.Partitions) == 0 {
		return recs, errNoTopic
	}
	n := int32(len(t.Partitions))
	parts := map[int32][]Record{}
	for _, r := range recs {
		p := metadata.PartitionForKey(string(r.Key), n)
		parts[p] = append(parts[p], r)
	}
	var errs []error
	for p, prs := range parts {
		kvs := make([]batch.KV, len(prs))
		var ts int64
		for i, r := range prs {
			kvs[i] = batch.KV{Key: r.Key, Value: r.Value}
			ts = max(ts, r.Time.UnixMilli())
		}
		// The batch's timestamp is its newest event's, so ListOffsets by
		// time (berth audit search --since) never seeks past an event.
		if err := s.writePartition(ctx, im, t, p, batch.Build(kvs, ts)); err != nil {
			rest = append(rest, prs...)
			errs = append(errs, fmt.Errorf("%s-%d: %w", Topic, p, err))
		}
	}
	return rest, errors.Join(errs...)
}

func (s *ReplicaSink) writePartition(ctx context.Context, im *metadata.Image, t *metadata.Topic, p int32, data []byte) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	mp := t.Partition(p)
	if mp == nil || mp.Leader == metadata.NoLeader {
		return kerr.LeaderNotAvailable
	}
	if mp.Leader == s.NodeID {
		part := s.Replicas.Get(Topic, p)
		if part == nil || part.TopicID != t.ID {
			return kerr.NotLeaderForPartition
		}
		res, err := part.Append(data, nil)
		if err != nil {
			return err
		}
		// WaitDurable ends at its deadline, not with ctx: wait for ctx
		// too, so a node that stops is not held by a write it gives up.
		done := make(chan error, 1)
		go func() { done <- part.WaitDurable(res.Durable, res.Gen, time.Now().Add(timeout), true) }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b, ok := im.Broker(mp.Leader)
	if !ok {
		return fmt.Errorf("leader %d is not registered", mp.Leader)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = int32(timeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = data
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := s.Peers.Request(ctx, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), req, timeout+5*time.Second)
	if err != nil {
		return err
	}
	resp, ok := raw.(*kmsg.ProduceResponse)
	if !ok || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("malformed produce response from broker %d", mp.Leader)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}
