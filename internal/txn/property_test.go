package txn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRandomOperations drives a Partition with random requests (current,
// stale and foreign producer ids and epochs, both transaction versions,
// timeouts, expiry, marker completion, failovers) and checks after every
// step that the written records replay to the live state and that the
// invariants of the states hold.
func TestRandomOperations(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomOperations(t, seed) })
	}
}

func randomOperations(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := Defaults()
	cfg.IDExpiration = time.Hour
	h := &harness{cfg: cfg, now: t0, nextPID: 99}
	h.p = NewPartition(cfg, h.alloc)
	ids := []string{"a", "b", "c"}
	parts := []TopicPartition{{"t", 0}, {"t", 1}, {"u", 0}}
	maxEpoch := make(map[[2]any]int16) // (id, producer id) → highest epoch seen

	pick := func(id string) (int64, int16) {
		cur, ok := h.p.Get(id)
		switch {
		case !ok || rng.IntN(10) == 0:
			return rng.Int64N(3) + 99, int16(rng.IntN(4))
		case rng.IntN(8) == 0:
			return cur.ProducerID, cur.ProducerEpoch - 1
		}
		return cur.ProducerID, cur.ProducerEpoch
	}
	for step := 0; step < 400; step++ {
		id := ids[rng.IntN(len(ids))]
		pid, epoch := pick(id)
		tv := []int16{TV0, TV2}[rng.IntN(2)]
		var res Result
		op := rng.IntN(11)
		switch op {
		case 0:
			if rng.IntN(2) == 0 {
				pid, epoch = NoProducerID, NoEpoch
			}
			res = h.p.InitProducerID(InitRequest{TransactionalID: id, TimeoutMs: int32(rng.IntN(3)+1) * 10000, ProducerID: pid, ProducerEpoch: epoch}, h.now)
		case 1, 2:
			res = h.p.AddPartitions(AddRequest{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch,
				Partitions: []TopicPartition{parts[rng.IntN(len(parts))]}, ClientVersion: tv}, h.now)
		case 3:
			res = h.p.AddOffsets(id, pid, epoch, "g", h.now)
		case 4, 5:
			res = h.p.EndTxn(EndRequest{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: rng.IntN(2) == 0, ClientVersion: tv}, h.now)
		case 6, 7:
			for _, m := range h.p.Pending() {
				if rng.IntN(2) == 0 {
					r, err := h.p.MarkersDone(m, h.now)
					if err != nil {
						t.Fatalf("step %d: pending markers refused: %v", step, err)
					}
					res.Records = append(res.Records, r.Records...)
				}
			}
		case 8:
			res = h.p.AbortTimedOut(h.now)
		case 9:
			res = h.p.ExpireIDs(h.now)
		case 10:
			if rng.IntN(4) == 0 {
				// Near exhaustion, to reach producer id rotations.
				if tx, ok := h.p.txns[id]; ok && tx.ProducerEpoch < math.MaxInt16-3 {
					tx.ProducerEpoch = math.MaxInt16 - 3 - int16(rng.IntN(2))
					maxEpoch[[2]any{id, tx.ProducerID}] = tx.ProducerEpoch
					h.log = append(h.log, record(tx))
				}
			}
		}
		if op == 0 && res.Err == nil && res.ProducerEpoch == math.MaxInt16 {
			t.Fatalf("step %d: InitProducerId handed out epoch %d", step, res.ProducerEpoch)
		}
		h.now = h.now.Add(time.Duration(rng.IntN(20)) * time.Second)
		if res.Err != nil && res.Err != kerr.ConcurrentTransactions && len(res.Records) > 0 {
			t.Fatalf("step %d op %d: error %v with records", step, op, res.Err)
		}
		h.log = append(h.log, res.Records...)
		if err := h.checkReplay(); err != nil {
			t.Fatalf("step %d op %d: %v", step, op, err)
		}
		if rng.IntN(50) == 0 {
			p, err := h.replay()
			if err != nil {
				t.Fatal(err)
			}
			h.p = p
		}
		for _, tx := range h.p.All() {
			if err := invariants(&tx); err != nil {
				t.Fatalf("step %d op %d: %s: %v", step, op, fmtTxn(&tx), err)
			}
			k := [2]any{tx.ID, tx.ProducerID}
			if tx.ProducerEpoch < maxEpoch[k] {
				t.Fatalf("step %d: %s: epoch went back from %d", step, fmtTxn(&tx), maxEpoch[k])
			}
			maxEpoch[k] = tx.ProducerEpoch
		}
	}
}

func invariants(t *Txn) error {
	switch t.Status {
	case Empty:
		if len(t.Partitions) > 0 || t.StartMs != -1 {
			return fmt.Errorf("empty with partitions or a start")
		}
	case Ongoing, PrepareCommit, PrepareAbort:
		if len(t.Partitions) == 0 || t.StartMs < 0 {
			return fmt.Errorf("open without partitions or start")
		}
	case CompleteCommit, CompleteAbort:
		if len(t.Partitions) > 0 {
			return fmt.Errorf("complete with partitions")
		}
	default:
		return fmt.Errorf("state %v kept", t.Status)
	}
	if t.ProducerEpoch < 0 {
		return fmt.Errorf("negative epoch")
	}
	if t.NextProducerID != NoProducerID && t.Status != PrepareCommit && t.Status != PrepareAbort {
		return fmt.Errorf("next producer id outside Prepare*")
	}
	if t.LastUpdateMs < t.StartMs {
		return fmt.Errorf("updated before start")
	}
	return nil
}
