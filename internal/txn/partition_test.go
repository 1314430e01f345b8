package txn

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
)

// t0 is time zero of every test; times print relative to it.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func rel(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return "+" + time.UnixMilli(ms).Sub(t0).String()
}

// harness drives one Partition and keeps the records it wrote, which it
// replays into a fresh Partition after every command to check that the
// persisted state rebuilds the live one.
type harness struct {
	cfg     Config
	now     time.Time
	nextPID int64
	failPID bool
	p       *Partition
	log     []Record
}

func (h *harness) alloc() (int64, error) {
	if h.failPID {
		return 0, errors.New("no producer ids")
	}
	h.nextPID++
	return h.nextPID, nil
}

func (h *harness) replay() (*Partition, error) {
	p := NewPartition(h.cfg, h.alloc)
	for _, r := range h.log {
		if err := p.Replay(r.Key, r.Value); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (h *harness) checkReplay() error {
	p, err := h.replay()
	if err != nil {
		return err
	}
	if a, b := h.p.All(), p.All(); !reflect.DeepEqual(a, b) {
		return fmt.Errorf("replay differs:\nlive   %v\nreplay %v", a, b)
	}
	return nil
}

func errName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

func fmtParts(ps []TopicPartition) string {
	s := make([]string, len(ps))
	for i, tp := range ps {
		s[i] = tp.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

func fmtTxn(t *Txn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s pid=%d epoch=%d", t.ID, t.Status, t.ProducerID, t.ProducerEpoch)
	if t.PrevProducerID != t.ProducerID {
		fmt.Fprintf(&b, " prev=%d", t.PrevProducerID)
	}
	if t.NextProducerID != NoProducerID {
		fmt.Fprintf(&b, " next=%d", t.NextProducerID)
	}
	if t.LastProducerEpoch != NoEpoch {
		fmt.Fprintf(&b, " last-epoch=%d", t.LastProducerEpoch)
	}
	fmt.Fprintf(&b, " timeout=%v", time.Duration(t.TimeoutMs)*time.Millisecond)
	if len(t.Partitions) > 0 {
		fmt.Fprintf(&b, " parts=%s", fmtParts(t.Partitions))
	}
	if len(t.Groups) > 0 {
		fmt.Fprintf(&b, " groups=%v", t.Groups)
	}
	fmt.Fprintf(&b, " start=%s updated=%s", rel(t.StartMs), rel(t.LastUpdateMs))
	if t.ClientVersion != 0 {
		fmt.Fprintf(&b, " tv=%d", t.ClientVersion)
	}
	return b.String()
}

func fmtMarkers(m Markers) string {
	kind := "ABORT"
	if m.Commit {
		kind = "COMMIT"
	}
	return fmt.Sprintf("markers %s: %s pid=%d epoch=%d %s", m.TransactionalID, kind, m.ProducerID, m.ProducerEpoch, fmtParts(m.Partitions))
}

func (h *harness) result(r Result) string { return h.output(r, true) }

// sweep prints the result of AbortTimedOut or ExpireIDs, which answer no
// request.
func (h *harness) sweep(r Result) string {
	if len(r.Records) == 0 {
		return "nothing"
	}
	return h.output(r, false)
}

func (h *harness) output(r Result, answer bool) string {
	var b strings.Builder
	if r.Err != nil {
		fmt.Fprintf(&b, "error: %s\n", errName(r.Err))
	} else if answer {
		fmt.Fprintf(&b, "ok pid=%d epoch=%d\n", r.ProducerID, r.ProducerEpoch)
	}
	for _, rec := range r.Records {
		h.log = append(h.log, rec)
		id, err := DecodeKey(rec.Key)
		if err != nil {
			return err.Error()
		}
		if rec.Value == nil {
			fmt.Fprintf(&b, "write: %s tombstone\n", id)
			continue
		}
		t, err := DecodeValue(id, rec.Value)
		if err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "write: %s\n", fmtTxn(t))
	}
	for _, m := range r.Markers {
		fmt.Fprintf(&b, "%s\n", fmtMarkers(m))
	}
	return b.String()
}

func parseParts(s string) []TopicPartition {
	var out []TopicPartition
	for _, f := range strings.Split(strings.Trim(s, "()"), ",") {
		i := strings.LastIndexByte(f, '-')
		n, _ := strconv.Atoi(f[i+1:])
		out = append(out, TopicPartition{f[:i], int32(n)})
	}
	return out
}

// args reads key=value arguments.
func args(d *datadriven.TestData) map[string]string {
	m := make(map[string]string)
	for _, a := range d.CmdArgs {
		m[a.Key] = strings.Join(a.Vals, ",")
	}
	return m
}

func num(m map[string]string, k string, def int64) int64 {
	v, ok := m[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("%s=%s: %v", k, v, err))
	}
	return n
}

func dur(m map[string]string, k string, def time.Duration) time.Duration {
	v, ok := m[k]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		panic(fmt.Sprintf("%s=%s: %v", k, v, err))
	}
	return d
}

func (h *harness) cmd(d *datadriven.TestData) string {
	a := args(d)
	id := a["id"]
	pid, epoch := num(a, "pid", -1), int16(num(a, "epoch", -1))
	tv := int16(num(a, "tv", 0))
	switch d.Cmd {
	case "new":
		h.cfg = Defaults()
		h.cfg.MaxTimeout = dur(a, "max-timeout", h.cfg.MaxTimeout)
		h.cfg.IDExpiration = dur(a, "expiration", h.cfg.IDExpiration)
		h.cfg.OffsetsPartitions = int32(num(a, "offsets-partitions", 50))
		if err := h.cfg.Validate(); err != nil {
			return err.Error()
		}
		h.now, h.nextPID, h.log = t0, num(a, "first-pid", 1000)-1, nil
		h.p = NewPartition(h.cfg, h.alloc)
		return "ok"
	case "tick":
		h.now = h.now.Add(dur(a, "by", 0))
		return "now " + rel(h.now.UnixMilli())
	case "alloc":
		h.failPID = a["fail"] == "true"
		return "ok"
	case "init":
		return h.result(h.p.InitProducerID(InitRequest{
			TransactionalID: id, TimeoutMs: int32(dur(a, "timeout", time.Minute).Milliseconds()),
			ProducerID: pid, ProducerEpoch: epoch,
		}, h.now))
	case "add":
		return h.result(h.p.AddPartitions(AddRequest{
			TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch,
			Partitions: parseParts(a["parts"]), ClientVersion: tv,
		}, h.now))
	case "offsets":
		return h.result(h.p.AddOffsets(id, pid, epoch, a["group"], h.now))
	case "verify":
		missing, err := h.p.Verify(id, pid, epoch, parseParts(a["parts"]))
		if err != nil {
			return "error: " + errName(err)
		}
		return "missing " + fmtParts(missing)
	case "end":
		return h.result(h.p.EndTxn(EndRequest{
			TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch,
			Commit: a["commit"] == "true", ClientVersion: tv,
		}, h.now))
	case "markers-done":
		// Completes the pending markers of id (as a marker sender would).
		var m Markers
		for _, pm := range h.p.Pending() {
			if pm.TransactionalID == id {
				m = pm
			}
		}
		if m.TransactionalID == "" {
			m = Markers{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: a["commit"] == "true"}
		}
		r, err := h.p.MarkersDone(m, h.now)
		if err != nil {
			return "error: " + err.Error()
		}
		return h.result(r)
	case "abort-timed-out":
		return h.sweep(h.p.AbortTimedOut(h.now))
	case "expire":
		return h.sweep(h.p.ExpireIDs(h.now))
	case "next-timeout":
		if nt := h.p.NextTimeout(); !nt.IsZero() {
			return rel(nt.UnixMilli())
		}
		return "none"
	case "set-epoch":
		// Test-only: moves id's epoch (to reach exhaustion quickly) and
		// writes the record, as a real transition would.
		t := h.p.txns[id]
		t.ProducerEpoch = epoch
		h.log = append(h.log, record(t))
		return fmtTxn(t)
	case "state":
		var b strings.Builder
		for _, t := range h.p.All() {
			fmt.Fprintf(&b, "%s\n", fmtTxn(&t))
		}
		if b.Len() == 0 {
			return "empty"
		}
		return b.String()
	case "describe":
		ds := h.p.Describe(id)
		if ds.Err != nil {
			return "error: " + errName(ds.Err)
		}
		return fmt.Sprintf("%s %s pid=%d epoch=%d timeout=%dms start=%s parts=%s groups=%v",
			ds.TransactionalID, ds.State, ds.ProducerID, ds.ProducerEpoch, ds.TimeoutMs, rel(ds.StartMs), fmtParts(ds.Partitions), ds.Groups)
	case "list":
		var f ListFilter
		if s, ok := a["states"]; ok {
			for _, n := range strings.Split(s, ",") {
				st, ok := ParseStatus(n)
				if !ok {
					return "unknown state " + n
				}
				f.States = append(f.States, st)
			}
		}
		if s, ok := a["pids"]; ok {
			for _, n := range strings.Split(s, ",") {
				v, _ := strconv.ParseInt(n, 10, 64)
				f.ProducerIDs = append(f.ProducerIDs, v)
			}
		}
		f.MinDuration = dur(a, "longer-than", 0)
		if s, ok := a["pattern"]; ok {
			f.Pattern = regexp.MustCompile(s)
		}
		var b strings.Builder
		for _, l := range h.p.List(f, h.now) {
			fmt.Fprintf(&b, "%s pid=%d %s\n", l.TransactionalID, l.ProducerID, l.State)
		}
		if b.Len() == 0 {
			return "none"
		}
		return b.String()
	case "stats":
		open, oldest := h.p.OpenStats()
		if oldest.IsZero() {
			return fmt.Sprintf("open=%d", open)
		}
		return fmt.Sprintf("open=%d oldest=%s", open, rel(oldest.UnixMilli()))
	case "failover":
		// A new coordinator replays the log and resends pending markers.
		p, err := h.replay()
		if err != nil {
			return err.Error()
		}
		h.p = p
		var b strings.Builder
		for _, m := range p.Pending() {
			fmt.Fprintf(&b, "%s\n", fmtMarkers(m))
		}
		if b.Len() == 0 {
			return "no pending markers"
		}
		return b.String()
	case "compact":
		// Keeps the last record per key, in log order, as the compacted
		// topic would (tombstones included).
		last := make(map[string]int)
		for i, r := range h.log {
			last[string(r.Key)] = i
		}
		var out []Record
		for i, r := range h.log {
			if last[string(r.Key)] == i {
				out = append(out, r)
			}
		}
		h.log = out
		return fmt.Sprintf("%d records", len(out))
	}
	return "unknown command " + d.Cmd
}

func TestPartition(t *testing.T) {
	datadriven.Walk(t, "testdata/partition", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out := h.cmd(d)
			if h.p != nil {
				if err := h.checkReplay(); err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
			}
			return out
		})
	})
}
