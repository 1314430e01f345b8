package sharepart

import (
	"errors"
	"math"
	"sync"
)

// Share session errors (KIP-932), mapped to Kafka codes by the handlers.
var (
	// ErrSessionNotFound: a request with an epoch other than 0 from a
	// member with no share session here (SHARE_SESSION_NOT_FOUND).
	ErrSessionNotFound = errors.New("sharepart: share session not found")
	// ErrInvalidSessionEpoch: the epoch is not the session's next one
	// (INVALID_SHARE_SESSION_EPOCH).
	ErrInvalidSessionEpoch = errors.New("sharepart: invalid share session epoch")
)

// SessionPartition is a share-partition in a share session.
type SessionPartition struct {
	TopicID   [16]byte
	Partition int32
}

type sessionKey struct{ group, member string }

type session struct {
	epoch int32 // the epoch the next request must carry
	parts []SessionPartition
}

// Sessions are the share sessions of ShareFetch and ShareAcknowledge,
// one per (group, member): the partitions the member fetches from and the
// epoch of its next request. mu guards m.
type Sessions struct {
	mu sync.Mutex
	m  map[sessionKey]*session
}

// Fetch checks and advances the session of a ShareFetch with epoch:
// 0 opens a new session (replacing any), -1 closes it (closed reports
// it), any other must be the session's next epoch. add and forget
// change the session's partitions, add first as Kafka does: a partition
// in both (named in the request only to carry its last acknowledgements)
// leaves the session, and no records are acquired for it that the client
// would discard. parts is the session's partitions after the request.
func (s *Sessions) Fetch(group, member string, epoch int32, add, forget []SessionPartition) (parts []SessionPartition, closed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sessionKey{group, member}
	ss := s.m[k]
	switch {
	case epoch == 0:
		ss = &session{epoch: 0}
		s.m[k] = ss
	case ss == nil:
		return nil, false, ErrSessionNotFound
	case epoch == -1:
		delete(s.m, k)
		return nil, true, nil
	case epoch != ss.epoch:
		return nil, false, ErrInvalidSessionEpoch
	}
	for _, a := range add {
		found := false
		for _, p := range ss.parts {
			if p == a {
				found = true
				break
			}
		}
		if !found {
			ss.parts = append(ss.parts, a)
		}
	}
	for _, f := range forget {
		for i, p := range ss.parts {
			if p == f {
				ss.parts = append(ss.parts[:i], ss.parts[i+1:]...)
				break
			}
		}
	}
	ss.epoch = next(ss.epoch)
	return append([]SessionPartition(nil), ss.parts...), false, nil
}

// Acknowledge checks and advances the session of a ShareAcknowledge:
// epoch 0 is invalid (a session must be open), -1 closes it.
func (s *Sessions) Acknowledge(group, member string, epoch int32) (closed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sessionKey{group, member}
	ss := s.m[k]
	switch {
	case epoch == 0:
		return false, ErrInvalidSessionEpoch
	case ss == nil:
		return false, ErrSessionNotFound
	case epoch == -1:
		delete(s.m, k)
		return true, nil
	case epoch != ss.epoch:
		return false, ErrInvalidSessionEpoch
	}
	ss.epoch = next(ss.epoch)
	return false, nil
}

// Drop forgets the sessions of members of group (they left the group).
func (s *Sessions) Drop(group string, members []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range members {
		delete(s.m, sessionKey{group, m})
	}
}

// DropGroup forgets every session of group (the group was deleted).
func (s *Sessions) DropGroup(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.m {
		if k.group == group {
			delete(s.m, k)
		}
	}
}

// next is the epoch after e: MaxInt32 wraps to 1, as in Kafka.
func next(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}
