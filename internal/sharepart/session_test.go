package sharepart

import (
	"errors"
	"math"
	"testing"
)

func TestShareSessionEpochs(t *testing.T) {
	s := Sessions{m: map[sessionKey]*session{}}
	p0, p1 := SessionPartition{Partition: 0}, SessionPartition{Partition: 1}
	if _, _, err := s.Fetch("g", "m", 1, nil, nil); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("epoch 1 without a session: %v", err)
	}
	if _, err := s.Acknowledge("g", "m", 0); !errors.Is(err, ErrInvalidSessionEpoch) {
		t.Fatalf("ShareAcknowledge epoch 0: %v", err)
	}
	parts, _, err := s.Fetch("g", "m", 0, []SessionPartition{p0, p1}, nil)
	if err != nil || len(parts) != 2 {
		t.Fatalf("open: %v %v", parts, err)
	}
	if _, _, err := s.Fetch("g", "m", 2, nil, nil); !errors.Is(err, ErrInvalidSessionEpoch) {
		t.Fatalf("skipped epoch: %v", err)
	}
	// The session keeps its partitions; forgotten ones leave it.
	parts, _, err = s.Fetch("g", "m", 1, nil, []SessionPartition{p0})
	if err != nil || len(parts) != 1 || parts[0] != p1 {
		t.Fatalf("epoch 1: %v %v", parts, err)
	}
	if _, err := s.Acknowledge("g", "m", 2); err != nil {
		t.Fatal(err)
	}
	parts, _, err = s.Fetch("g", "m", 3, []SessionPartition{p1, p0}, nil)
	if err != nil || len(parts) != 2 {
		t.Fatalf("epoch 3: %v %v", parts, err)
	}
	// A partition named only for its acknowledgements and forgotten in
	// the same request leaves the session (kgo sends its last acks so
	// when its assignment moves): records acquired for it would be
	// discarded by the client, each costing a delivery until the lock ran out.
	parts, _, err = s.Fetch("g", "m", 4, []SessionPartition{p0}, []SessionPartition{p0})
	if err != nil || len(parts) != 1 || parts[0] != p1 {
		t.Fatalf("epoch 4, p0 acknowledged and forgotten: %v %v", parts, err)
	}
	parts, _, err = s.Fetch("g", "m", 5, []SessionPartition{p0}, nil)
	if err != nil || len(parts) != 2 {
		t.Fatalf("epoch 5: %v %v", parts, err)
	}
	if closed, err := s.Acknowledge("g", "m", -1); err != nil || !closed {
		t.Fatalf("close: %v %v", closed, err)
	}
	if _, _, err := s.Fetch("g", "m", 6, nil, nil); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("after close: %v", err)
	}
	// Reopening replaces; Drop forgets.
	if _, _, err := s.Fetch("g", "m", 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Drop("g", []string{"m"})
	if _, _, err := s.Fetch("g", "m", 1, nil, nil); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("after drop: %v", err)
	}
	if next(math.MaxInt32) != 1 {
		t.Fatal("MaxInt32 must wrap to 1")
	}
}
