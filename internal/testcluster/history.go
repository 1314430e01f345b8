package testcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// History is what a fault test did and saw: every record a producer had
// acknowledged, every record that failed, the faults injected, and at the
// end every record a consumer read back. Check verifies the promises of
// acks=all replication against it; Fail writes it to a file for replay.
//
// Values are "<key>-<seq>" with seq counting up per key from 1, and every
// key belongs to one producer, which produces its records in seq order,
// so the log must hold each key's records in seq order.
type History struct {
	Seed  int64
	Start time.Time

	mu       sync.Mutex
	acked    []Acked
	failed   []Failed
	faults   []Fault
	consumed []Consumed
}

// Acked is an acknowledged record; At is when the ack arrived, Sent when
// the record was handed to the producer (it cannot have reached a broker
// before).
type Acked struct {
	Key, Value string
	Partition  int32
	Offset     int64
	At         time.Time
	Sent       time.Time
}

// Failed is a record whose produce ended in an error.
type Failed struct {
	Key, Value, Err string
	At              time.Time
}

// Fault is one injected fault or observed event.
type Fault struct {
	At   time.Time
	What string
}

// Consumed is a record read back at the end.
type Consumed struct {
	Key, Value string
	Partition  int32
	Offset     int64
}

// NewHistory starts a history for a run with seed.
func NewHistory(seed int64) *History { return &History{Seed: seed, Start: time.Now()} }

// Ack records an acknowledged record.
func (h *History) Ack(a Acked) {
	h.mu.Lock()
	h.acked = append(h.acked, a)
	h.mu.Unlock()
}

// Fail records a failed record.
func (h *History) Failure(f Failed) {
	h.mu.Lock()
	h.failed = append(h.failed, f)
	h.mu.Unlock()
}

// Fault records a fault (or another event worth a line) and returns its
// time.
func (h *History) Fault(format string, args ...any) time.Time {
	now := time.Now()
	h.mu.Lock()
	h.faults = append(h.faults, Fault{At: now, What: fmt.Sprintf(format, args...)})
	h.mu.Unlock()
	return now
}

// SetConsumed stores what the final read returned.
func (h *History) SetConsumed(c []Consumed) {
	h.mu.Lock()
	h.consumed = c
	h.mu.Unlock()
}

// Acks returns a copy of the acknowledged records so far.
func (h *History) Acks() []Acked {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.acked)
}

// AcksAfter counts the records acknowledged after t, per partition.
func (h *History) AcksAfter(t time.Time) map[int32]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int32]int{}
	for _, a := range h.acked {
		if a.At.After(t) {
			out[a.Partition]++
		}
	}
	return out
}

// AcksSentAfter counts, per partition, the acknowledged records that
// were handed to the producer after t, whenever their ack arrived.
func (h *History) AcksSentAfter(t time.Time) map[int32]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int32]int{}
	for _, a := range h.acked {
		if a.Sent.After(t) {
			out[a.Partition]++
		}
	}
	return out
}

// Schedule is the fault schedule, one line per event, with times since
// the start.
func (h *History) Schedule() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, f := range h.faults {
		fmt.Fprintf(&b, "%9s %s\n", f.At.Sub(h.Start).Round(time.Millisecond), f.What)
	}
	return b.String()
}

// FirstAcksAfter returns, per partition, when the first acknowledgement
// after t arrived.
func (h *History) FirstAcksAfter(t time.Time) map[int32]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int32]time.Time{}
	for _, a := range h.acked {
		if f, ok := out[a.Partition]; a.At.After(t) && (!ok || a.At.Before(f)) {
			out[a.Partition] = a.At
		}
	}
	return out
}

// seqOf splits a value "<key>-<seq>".
func seqOf(v string) (string, int, bool) {
	i := strings.LastIndexByte(v, '-')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(v[i+1:])
	return v[:i], n, err == nil
}

// Check verifies the history and returns every violation found (nil when
// none):
//   - every acknowledged record was read back at its partition and
//     offset, with its value (no acknowledged write lost or overwritten);
//   - no value appears at two offsets (no duplicate, acknowledged or not:
//     producers are idempotent);
//   - each key's records are in the log in the order they were produced
//     (seq increasing with the offset), and all on one partition.
func (h *History) Check() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var bad []string
	type po struct {
		p int32
		o int64
	}
	at := map[po]Consumed{}
	where := map[string][]po{}
	for _, c := range h.consumed {
		at[po{c.Partition, c.Offset}] = c
		where[c.Value] = append(where[c.Value], po{c.Partition, c.Offset})
	}
	for _, a := range h.acked {
		c, ok := at[po{a.Partition, a.Offset}]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("acked %s (key %s) at %d/%d is missing", a.Value, a.Key, a.Partition, a.Offset))
		case c.Value != a.Value:
			bad = append(bad, fmt.Sprintf("acked %s at %d/%d was replaced by %s", a.Value, a.Partition, a.Offset, c.Value))
		}
	}
	acked := map[string]bool{}
	for _, a := range h.acked {
		acked[a.Value] = true
	}
	for v, ps := range where {
		if len(ps) > 1 {
			bad = append(bad, fmt.Sprintf("value %s (acked: %v) is in the log %d times: %v", v, acked[v], len(ps), ps))
		}
	}
	byKey := map[string][]Consumed{}
	for _, c := range h.consumed {
		byKey[c.Key] = append(byKey[c.Key], c)
	}
	for k, cs := range byKey {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Offset < cs[j].Offset })
		last := 0
		for _, c := range cs {
			if c.Partition != cs[0].Partition {
				bad = append(bad, fmt.Sprintf("key %s is on partitions %d and %d", k, cs[0].Partition, c.Partition))
				break
			}
			_, seq, ok := seqOf(c.Value)
			if !ok {
				continue
			}
			if seq <= last {
				bad = append(bad, fmt.Sprintf("key %s: %s at offset %d follows seq %d (order broken)", k, c.Value, c.Offset, last))
			}
			last = seq
		}
	}
	sort.Strings(bad)
	return bad
}

// Fail writes the history to <dir>/history.json and fails the test with
// the message and the file's name.
func (h *History) Fail(t testing.TB, dir, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s (seed %d; history: %s)", fmt.Sprintf(format, args...), h.Seed, h.Write(t, dir))
}

// Write writes the history to <dir>/history.json and returns its path.
func (h *History) Write(t testing.TB, dir string) string {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	rel := func(ts time.Time) string { return ts.Sub(h.Start).Round(time.Millisecond).String() }
	type ackOut struct {
		At string `json:"at"`
		Acked
	}
	out := struct {
		Seed     int64            `json:"seed"`
		Start    time.Time        `json:"start"`
		Faults   []map[string]any `json:"faults"`
		Acked    []ackOut         `json:"acked"`
		Failed   []Failed         `json:"failed"`
		Consumed []Consumed       `json:"consumed"`
	}{Seed: h.Seed, Start: h.Start, Failed: h.failed, Consumed: h.consumed}
	for _, f := range h.faults {
		out.Faults = append(out.Faults, map[string]any{"at": rel(f.At), "time": f.At, "what": f.What})
	}
	for _, a := range h.acked {
		out.Acked = append(out.Acked, ackOut{rel(a.At), a})
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Errorf("history: %v", err)
		return ""
	}
	path := filepath.Join(dir, "history.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Errorf("history: %v", err)
		return ""
	}
	return path
}
