package replica

import (
	"sync/atomic"
	"time"

	"github.com/berthmq/berth/internal/batch"
)

// StateLog is a coordinator's way to the partitions of its internal topic
// that this node leads: it appends the coordinator's records through the
// replica path (validation, group-committed fsync, replication), waits
// until they are durable, and replays a partition. The group, share and
// transaction coordinators each write through one.
type StateLog struct {
	Replicas *Manager
	Topic    string
	// NotHere is the error for a partition that is not on this node (the
	// coordinator's NOT_COORDINATOR).
	NotHere error
	// Timeout bounds a wait for durability (WaitDurable's deadline, from
	// when the wait starts).
	Timeout time.Duration
}

// Append appends recs as one batch to partition p, at once, so records
// appended in turn are in the log in that order; wait returns once every
// in-sync replica has them (acks=all), or fails after Timeout.
func (s *StateLog) Append(p int32, recs []batch.KV) (wait func() error, err error) {
	part := s.Replicas.Get(s.Topic, p)
	if part == nil {
		return nil, s.NotHere
	}
	res, err := part.Append(batch.Build(recs, time.Now().UnixMilli()), nil)
	if err != nil {
		return nil, err
	}
	return func() error {
		return part.WaitDurable(res.Durable, res.Gen, time.Now().Add(s.Timeout), true)
	}, nil
}

// LeaderEpoch returns the leader epoch of partition p (ok false: p is
// not on this node).
func (s *StateLog) LeaderEpoch(p int32) (epoch int32, ok bool) {
	part := s.Replicas.Get(s.Topic, p)
	if part == nil {
		return 0, false
	}
	return part.LeaderEpoch(), true
}

// Replay feeds every record of partition p, in order, to fn, up to the
// log end; NotHere when p is not on this node.
func (s *StateLog) Replay(p int32, fn func(key, value []byte)) (int, error) {
	part := s.Replicas.Get(s.Topic, p)
	if part == nil {
		return 0, s.NotHere
	}
	var never atomic.Bool
	return replay(part, &never, fn)
}
