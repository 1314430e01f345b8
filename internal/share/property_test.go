package share

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// model is what a caller knows: who holds which record until when, each
// record's delivery count, and which records are finished.
type partitionModel struct {
	held     map[int64]lockHolder
	count    map[int64]int
	finished map[int64]bool
}

type lockHolder struct {
	member   string
	deadline time.Time
}

// TestPartitionRandomOperations drives share-partitions with random operations
// (fixed seeds) and checks after each one that replaying the persisted
// snapshot and updates gives the live state, that acquisitions,
// acknowledgements and delivery counts agree with the model, and that no
// record passes the start offset before it is finished.
func TestPartitionRandomOperations(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandomPartition(t, seed, 250) })
	}
}

func runRandomPartition(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 42))
	cfg := PartitionDefaults()
	cfg.DeliveryCountLimit = 2 + rng.IntN(3)
	cfg.MaxRecordLocks = 5 + rng.IntN(20)
	cfg.DeadLetter = rng.IntN(2) == 0
	cfg.LockDuration = time.Duration(1+rng.IntN(20)) * time.Second
	cfg.Backoff = Backoff{Initial: time.Duration(rng.IntN(3)) * time.Second, Multiplier: 2, Max: 10 * time.Second, Jitter: 0.3}
	jitter := func() func() float64 { return rand.New(rand.NewPCG(seed, 7)).Float64 }

	// The log: offsets 0..199 in batches of 1-5 with gaps of 0-2; one
	// batch in six is never delivered (Skip: a marker or an aborted
	// transaction's), so its offsets count as not in the log.
	var logBatches []LogBatch
	inLog := map[int64]bool{}
	for o := int64(0); o < 200; {
		n := int64(1 + rng.IntN(5))
		skip := rng.IntN(6) == 0
		logBatches = append(logBatches, LogBatch{First: o, Last: o + n - 1, Skip: skip})
		for i := o; i < o+n; i++ {
			inLog[i] = !skip
		}
		o += n + int64(rng.IntN(3))
	}

	now := spT0
	p := NewPartition(cfg, 0, jitter())
	snap := p.Snapshot().AppendTo(nil)
	var updates [][]byte
	m := partitionModel{held: map[int64]lockHolder{}, count: map[int64]int{}, finished: map[int64]bool{}}
	logStart := int64(0)
	members := []string{"a", "b", "c"}

	persist := func(r StateChange) {
		if !r.Update.Empty() {
			updates = append(updates, r.Update.AppendTo(nil))
		}
	}
	replay := func() *SharePartition {
		s, err := DecodeSnapshot(snap)
		if err != nil {
			t.Fatal(err)
		}
		q, err := LoadPartition(cfg, s, jitter())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range updates {
			u, err := DecodeUpdate(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Apply(u); err != nil {
				t.Fatal(err)
			}
		}
		return q
	}
	// failed applies a failed delivery of o to the model.
	failed := func(o int64) {
		delete(m.held, o)
		if m.count[o] >= cfg.DeliveryCountLimit && !cfg.DeadLetter {
			m.finished[o] = true
		}
	}

	for step := 0; step < steps; step++ {
		var op string
		switch k := rng.IntN(100); {
		case k < 15:
			op = "tick"
			now = now.Add(time.Duration(rng.IntN(8000)) * time.Millisecond)
		case k < 40:
			op = "acquire"
			member := members[rng.IntN(len(members))]
			next, ok := p.NextFetchOffset(now)
			var fetched []LogBatch
			if ok {
				limit := 1 + rng.IntN(6) // the caller's byte limit
				for _, b := range logBatches {
					if b.Last >= max(next, logStart) && len(fetched) < limit {
						fetched = append(fetched, LogBatch{First: max(b.First, next, logStart), Last: b.Last, Skip: b.Skip})
					}
				}
			}
			maxRecords := 1 + rng.IntN(10)
			acq, res := p.Acquire(member, fetched, maxRecords, now)
			persist(res)
			total, prev := 0, int64(-1)
			for _, a := range acq {
				if a.First <= prev || a.Last < a.First {
					t.Fatalf("step %d: acquired ranges out of order: %v", step, acq)
				}
				total += int(a.Last - a.First + 1)
				prev = a.Last
			}
			if total > maxRecords {
				t.Fatalf("step %d: acquired %d records, max %d", step, total, maxRecords)
			}
			for _, a := range acq {
				for o := a.First; o <= a.Last; o++ {
					if h, ok := m.held[o]; ok {
						t.Fatalf("step %d: offset %d acquired by %s while held by %s", step, o, member, h.member)
					}
					if !inLog[o] {
						t.Fatalf("step %d: offset %d acquired but not in the log", step, o)
					}
					if a.DeliveryCount != m.count[o]+1 || a.DeliveryCount > cfg.DeliveryCountLimit {
						t.Fatalf("step %d: offset %d delivery count %d, want %d", step, o, a.DeliveryCount, m.count[o]+1)
					}
					m.count[o] = a.DeliveryCount
					m.held[o] = lockHolder{member, now.Add(cfg.LockDuration)}
				}
			}
		case k < 70:
			op = "ack"
			member := members[rng.IntN(len(members))]
			var mine []int64
			for o := p.StartOffset(); o < p.EndOffset(); o++ {
				if m.held[o].member == member {
					mine = append(mine, o)
				}
			}
			var acks []Ack
			want := true
			next := int64(-1)
			for i := 0; i < 1+rng.IntN(3); i++ {
				var first int64
				if len(mine) > 0 && rng.IntN(5) > 0 {
					first = mine[rng.IntN(len(mine))]
				} else {
					first = p.StartOffset() + int64(rng.IntN(int(p.EndOffset()-p.StartOffset())+3))
				}
				if first <= next {
					continue
				}
				last := first + int64(rng.IntN(3))
				a := Ack{First: first, Last: last, ErrorText: "boom"}
				if rng.IntN(3) == 0 {
					for o := first; o <= last; o++ {
						a.Types = append(a.Types, AckType(rng.IntN(5)))
					}
				} else {
					a.Types = []AckType{AckType(rng.IntN(5))}
				}
				for o := max(first, p.StartOffset()); o <= last; o++ {
					if h, ok := m.held[o]; !ok || h.member != member || !h.deadline.After(now) {
						want = false
					}
				}
				acks = append(acks, a)
				next = last
			}
			res, err := p.Acknowledge(member, acks, now)
			if (err == nil) != want {
				t.Fatalf("step %d: ack %+v by %s: err %v, want success %t", step, acks, member, err, want)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidRecordState) {
					t.Fatalf("step %d: %v", step, err)
				}
				break
			}
			persist(res)
			for _, a := range acks {
				for o := max(a.First, p.StartOffset()-1000); o <= a.Last; o++ {
					if _, ok := m.held[o]; !ok {
						continue
					}
					typ := a.Types[0]
					if len(a.Types) > 1 {
						typ = a.Types[o-a.First]
					}
					switch typ {
					case AckAccept, AckGap:
						delete(m.held, o)
						m.finished[o] = true
					case AckReject:
						delete(m.held, o)
						if !cfg.DeadLetter {
							m.finished[o] = true
						}
					case AckRelease:
						failed(o)
					case AckRenew:
						m.held[o] = lockHolder{member, now.Add(cfg.LockDuration)}
					}
				}
			}
		case k < 78:
			op = "expire"
			persist(p.Expire(now))
			for o, h := range m.held {
				if !h.deadline.After(now) {
					failed(o)
				}
			}
		case k < 82:
			op = "gone"
			member := members[rng.IntN(len(members))]
			persist(p.MemberGone(member, now))
			for o, h := range m.held {
				if h.member == member {
					failed(o)
				}
			}
		case k < 90:
			op = "complete"
			for _, a := range p.PendingDLQ() {
				res, err := p.CompleteArchive(a.First, a.Last)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				persist(res)
				for o := a.First; o <= a.Last; o++ {
					m.finished[o] = true
				}
			}
		case k < 95:
			op = "restart"
			p = replay()
			snap, updates = p.Snapshot().AppendTo(nil), nil
			clear(m.held)
		default:
			op = "logstart"
			if rng.IntN(4) == 0 {
				logStart = max(logStart, p.StartOffset()+int64(rng.IntN(3)))
				persist(p.AdvanceLogStart(logStart))
				for o := range m.held {
					if o < logStart {
						delete(m.held, o)
					}
				}
			}
		}

		t.Logf("step %d %s now=+%s: %s", step, op, now.Sub(spT0), fmtStateSnapshot(p.Snapshot()))
		// Invariants.
		if q := replay(); !reflect.DeepEqual(p.Snapshot(), q.Snapshot()) {
			t.Fatalf("step %d (%s): replay differs:\nlive   %s\nreplay %s", step, op, fmtStateSnapshot(p.Snapshot()), fmtStateSnapshot(q.Snapshot()))
		}
		checkPartitionRuns(t, p, step)
		for o := int64(0); o < p.StartOffset(); o++ {
			if inLog[o] && o >= logStart && !m.finished[o] && m.count[o] < cfg.DeliveryCountLimit {
				t.Fatalf("step %d (%s): offset %d passed the start offset %d unfinished", step, op, o, p.StartOffset())
			}
		}
		var acquired int
		for _, r := range p.runs {
			if r.state == Acquired {
				acquired += int(r.last - r.first + 1)
			}
		}
		if acquired > cfg.MaxRecordLocks || acquired != len(m.held) {
			t.Fatalf("step %d (%s): %d acquired, model holds %d, bound %d", step, op, acquired, len(m.held), cfg.MaxRecordLocks)
		}
		if len(updates) > 40 {
			snap, updates = p.Snapshot().AppendTo(nil), nil
		}
	}
}

func checkPartitionRuns(t *testing.T, p *SharePartition, step int) {
	t.Helper()
	next := p.start
	for i, r := range p.runs {
		if r.first != next || r.last < r.first {
			t.Fatalf("step %d: run %d [%d, %d] does not follow %d", step, i, r.first, r.last, next)
		}
		if i > 0 && p.runs[i-1].recState == r.recState {
			t.Fatalf("step %d: runs %d and %d not merged", step, i-1, i)
		}
		if r.state == Acquired && r.count > p.cfg.DeliveryCountLimit {
			t.Fatalf("step %d: offset %d acquired with count %d", step, r.first, r.count)
		}
		next = r.last + 1
	}
	if next != p.end {
		t.Fatalf("step %d: runs end at %d, end offset %d", step, next, p.end)
	}
	if len(p.runs) > 0 && (p.runs[0].state == Acknowledged || p.runs[0].state == Archived) {
		t.Fatalf("step %d: finished run at the start offset", step)
	}
}
