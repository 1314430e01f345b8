package share

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// spT0 is time zero of every test; times print relative to it.
var spT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func spRel(msSinceEpoch int64) string {
	return "+" + time.UnixMilli(msSinceEpoch).Sub(spT0).String()
}

// partitionHarness drives one SharePartition and keeps its persisted log (the
// first snapshot, then every update, encoded), which it replays after
// every command to check that the persisted state rebuilds the same
// state.
type partitionHarness struct {
	t    *testing.T
	cfg  PartitionConfig
	seed uint64
	now  time.Time
	p    *SharePartition
	snap []byte
	log  [][]byte
}

func (h *partitionHarness) rnd() func() float64 {
	if h.cfg.Backoff.Jitter == 0 {
		return nil
	}
	return rand.New(rand.NewPCG(h.seed, 0)).Float64
}

func (h *partitionHarness) persist(r StateChange) {
	if !r.Update.Empty() {
		h.log = append(h.log, r.Update.AppendTo(nil))
	}
}

// replay rebuilds the partition from the persisted log.
func (h *partitionHarness) replay() (*SharePartition, error) {
	s, err := DecodeSnapshot(h.snap)
	if err != nil {
		return nil, err
	}
	p, err := LoadPartition(h.cfg, s, h.rnd())
	if err != nil {
		return nil, err
	}
	for _, b := range h.log {
		u, err := DecodeUpdate(b)
		if err != nil {
			return nil, err
		}
		if err := p.Apply(u); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (h *partitionHarness) checkReplay() error {
	p, err := h.replay()
	if err != nil {
		return err
	}
	if a, b := h.p.Snapshot(), p.Snapshot(); !reflect.DeepEqual(a, b) {
		return fmt.Errorf("replay differs:\nlive   %s\nreplay %s", fmtStateSnapshot(a), fmtStateSnapshot(b))
	}
	return nil
}

func spRange(s string) (int64, int64) {
	a, b, ok := strings.Cut(s, "-")
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		panic(err)
	}
	if !ok {
		return first, first
	}
	last, err := strconv.ParseInt(b, 10, 64)
	if err != nil {
		panic(err)
	}
	return first, last
}

var spAckTypes = map[string]AckType{"gap": AckGap, "accept": AckAccept, "release": AckRelease, "reject": AckReject, "renew": AckRenew}

func fmtChange(r StateChange) string {
	var b strings.Builder
	if !r.Update.Empty() {
		b.WriteString("update:")
		if r.Update.StartOffset >= 0 {
			fmt.Fprintf(&b, " start=%d", r.Update.StartOffset)
		}
		for _, sb := range r.Update.StateBatches {
			b.WriteString(" " + fmtStateBatch(sb))
		}
		fmt.Fprintf(&b, " complete=%d\n", r.Update.DeliveryCompleteCount)
	}
	for _, a := range r.DLQ {
		fmt.Fprintf(&b, "dlq: %s reason=%q count=%d", fmtOffsets(a.First, a.Last), a.Reason, a.DeliveryCount)
		if a.ErrorText != "" {
			fmt.Fprintf(&b, " error=%q", a.ErrorText)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func fmtOffsets(a, b int64) string {
	if a == b {
		return strconv.FormatInt(a, 10)
	}
	return fmt.Sprintf("%d-%d", a, b)
}

func fmtStateBatch(sb StateBatch) string {
	s := fmt.Sprintf("[%s %s c=%d", fmtOffsets(sb.FirstOffset, sb.LastOffset), RecordState(sb.DeliveryState), sb.DeliveryCount)
	if sb.AvailableAtMs != 0 {
		s += " at=" + spRel(sb.AvailableAtMs)
	}
	if sb.Reason != ReasonNone {
		s += fmt.Sprintf(" reason=%q", sb.Reason)
	}
	if sb.ErrorText != "" {
		s += fmt.Sprintf(" error=%q", sb.ErrorText)
	}
	return s + "]"
}

func fmtStateSnapshot(s Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "start=%d complete=%d", s.StartOffset, s.DeliveryCompleteCount)
	for _, sb := range s.StateBatches {
		b.WriteString(" " + fmtStateBatch(sb))
	}
	return b.String()
}

func (h *partitionHarness) fmtState() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start=%d end=%d\n", h.p.StartOffset(), h.p.EndOffset())
	for _, r := range h.p.runs {
		fmt.Fprintf(&b, "  %s %s c=%d", fmtOffsets(r.first, r.last), r.state, r.count)
		switch r.state {
		case Acquired:
			fmt.Fprintf(&b, " by=%s lock=%s", r.member, spRel(r.deadline))
		case Available:
			if r.availableAt != 0 {
				fmt.Fprintf(&b, " at=%s", spRel(r.availableAt))
			}
		case Archiving:
			fmt.Fprintf(&b, " reason=%q", r.reason)
			if r.errText != "" {
				fmt.Fprintf(&b, " error=%q", r.errText)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (h *partitionHarness) cmd(d *datadriven.TestData) string {
	arg := func(key, def string) string {
		for _, a := range d.CmdArgs {
			if a.Key == key {
				if len(a.Vals) == 0 {
					return "true"
				}
				return strings.Join(a.Vals, ",")
			}
		}
		return def
	}
	dur := func(key, def string) time.Duration {
		v, err := time.ParseDuration(arg(key, def))
		if err != nil {
			d.Fatalf(h.t, "%s: %v", key, err)
		}
		return v
	}
	num := func(key, def string) int {
		v, err := strconv.Atoi(arg(key, def))
		if err != nil {
			d.Fatalf(h.t, "%s: %v", key, err)
		}
		return v
	}
	flt := func(key, def string) float64 {
		v, err := strconv.ParseFloat(arg(key, def), 64)
		if err != nil {
			d.Fatalf(h.t, "%s: %v", key, err)
		}
		return v
	}
	member := arg("member", "")

	var out string
	switch d.Cmd {
	case "new":
		h.cfg = PartitionDefaults()
		h.cfg.LockDuration = dur("lock", "30s")
		h.cfg.DeliveryCountLimit = num("limit", "5")
		h.cfg.MaxRecordLocks = num("locks", "2000")
		h.cfg.DeadLetter = arg("dlq", "false") == "true"
		h.cfg.Backoff = Backoff{Initial: dur("backoff", "2s"), Multiplier: flt("mult", "2"), Max: dur("max", "5m"), Jitter: flt("jitter", "0")}
		h.cfg.MaxErrorText = num("maxerr", "8192")
		if err := h.cfg.Validate(); err != nil {
			return err.Error()
		}
		h.seed = uint64(num("seed", "1"))
		h.now = spT0
		h.p = NewPartition(h.cfg, int64(num("start", "0")), h.rnd())
		h.snap, h.log = h.p.Snapshot().AppendTo(nil), nil
		return "ok"
	case "tick":
		h.now = h.now.Add(dur("d", d.CmdArgs[0].Key))
		return "now=+" + h.now.Sub(spT0).String()
	case "acquire":
		var fetched []LogBatch
		for _, a := range d.CmdArgs {
			if a.Key == "log" {
				for _, v := range a.Vals {
					// x10-12: a batch never delivered (a marker, an
					// aborted transaction's under read_committed).
					skip := strings.HasPrefix(v, "x")
					f, l := spRange(strings.TrimPrefix(v, "x"))
					fetched = append(fetched, LogBatch{f, l, skip})
				}
			}
		}
		if arg("from-next", "") == "true" {
			next, ok := h.p.NextFetchOffset(h.now)
			if !ok {
				fetched = nil
			}
			var clipped []LogBatch
			for _, b := range fetched {
				if b.Last >= next {
					clipped = append(clipped, LogBatch{max(b.First, next), b.Last, b.Skip})
				}
			}
			fetched = clipped
		}
		acq, res := h.p.Acquire(member, fetched, num("max", "500"), h.now)
		h.persist(res)
		var parts []string
		for _, a := range acq {
			parts = append(parts, fmt.Sprintf("%s(c=%d)", fmtOffsets(a.First, a.Last), a.DeliveryCount))
		}
		if len(parts) == 0 {
			parts = []string{"none"}
		}
		out = fmt.Sprintf("acquired %s: %s\n", member, strings.Join(parts, " ")) + fmtChange(res)
	case "ack":
		var acks []Ack
		for _, a := range d.CmdArgs {
			if a.Key == "member" || a.Key == "error" {
				continue
			}
			f, l := spRange(a.Key)
			ack := Ack{First: f, Last: l, ErrorText: arg("error", "")}
			for _, v := range a.Vals {
				t, ok := spAckTypes[v]
				if !ok {
					t = AckType(num("", v))
				}
				ack.Types = append(ack.Types, t)
			}
			acks = append(acks, ack)
		}
		res, err := h.p.Acknowledge(member, acks, h.now)
		if err != nil {
			return "error: " + err.Error()
		}
		h.persist(res)
		out = "ok\n" + fmtChange(res)
	case "expire":
		res := h.p.Expire(h.now)
		h.persist(res)
		out = "expired\n" + fmtChange(res)
	case "gone":
		res := h.p.MemberGone(member, h.now)
		h.persist(res)
		out = "released " + member + "\n" + fmtChange(res)
	case "complete":
		f, l := spRange(d.CmdArgs[0].Key)
		res, err := h.p.CompleteArchive(f, l)
		if err != nil {
			return "error: " + err.Error()
		}
		h.persist(res)
		out = "archived\n" + fmtChange(res)
	case "logstart":
		res := h.p.AdvanceLogStart(int64(num("", d.CmdArgs[0].Key)))
		h.persist(res)
		out = "moved\n" + fmtChange(res)
	case "pending":
		out = fmtChange(StateChange{Update: Update{StartOffset: -1}, DLQ: h.p.PendingDLQ()})
		if out == "" {
			out = "none\n"
		}
	case "next":
		off, ok := h.p.NextFetchOffset(h.now)
		out = fmt.Sprintf("fetch from %d ok=%t\n", off, ok)
		if t, ok := h.p.NextDeadline(h.now); ok {
			out += "next deadline +" + t.Sub(spT0).String() + "\n"
		} else {
			out += "no deadline\n"
		}
	case "state":
		out = h.fmtState()
	case "snapshot":
		out = fmtStateSnapshot(h.p.Snapshot()) + "\n"
	case "stats":
		s := h.p.Stats(h.now)
		out = fmt.Sprintf("start=%d end=%d available=%d delayed=%d acquired=%d acknowledged=%d archiving=%d archived=%d\n",
			s.StartOffset, s.EndOffset, s.Available, s.Delayed, s.Acquired, s.Acknowledged, s.Archiving, s.Archived)
		if !s.OldestAvailableSince.IsZero() {
			out += fmt.Sprintf("oldest available since +%s (age %s)\n", s.OldestAvailableSince.Sub(spT0), h.now.Sub(s.OldestAvailableSince))
		}
		out += fmt.Sprintf("redeliveries=%d dlq=%d rejected=%d delivery-limits=%d\n", s.Redeliveries, s.DLQWritten, s.Rejected, s.DeliveryLimits)
	case "restart":
		p, err := h.replay()
		if err != nil {
			return "error: " + err.Error()
		}
		n := len(h.log)
		h.p = p
		h.snap, h.log = p.Snapshot().AppendTo(nil), nil
		out = fmt.Sprintf("restarted from a snapshot and %d updates\n", n) + h.fmtState()
	default:
		d.Fatalf(h.t, "unknown command %q", d.Cmd)
	}
	if err := h.checkReplay(); err != nil {
		d.Fatalf(h.t, "%v", err)
	}
	return out
}

func TestPartitionDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/partition", func(t *testing.T, path string) {
		h := &partitionHarness{t: t}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string { h.t = t; return h.cmd(d) })
	})
}

// The rejection and delivery-limit counters count records, not runs.
func TestArchiveCountersCountRecords(t *testing.T) {
	cfg := PartitionDefaults()
	cfg.DeliveryCountLimit = 2
	p := NewPartition(cfg, 0, func() float64 { return 0.5 })
	now := time.UnixMilli(1_000_000)
	p.Acquire("m", []LogBatch{{First: 0, Last: 9}}, 100, now)
	if _, err := p.Acknowledge("m", []Ack{{First: 0, Last: 2, Types: []AckType{AckReject}}, {First: 3, Last: 9, Types: []AckType{AckRelease}}}, now); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour)
	p.Acquire("m", []LogBatch{{First: 0, Last: 9}}, 100, later)
	if _, err := p.Acknowledge("m", []Ack{{First: 3, Last: 9, Types: []AckType{AckRelease}}}, later); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(later); s.Rejected != 3 || s.DeliveryLimits != 7 {
		t.Fatalf("rejected %d, delivery limits %d; want 3 and 7", s.Rejected, s.DeliveryLimits)
	}
}
