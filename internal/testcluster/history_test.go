package testcluster

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// Check finds each kind of violation it promises to, and nothing in a
// clean history (where unacknowledged records may appear in the log).
func TestHistoryCheck(t *testing.T) {
	ack := func(h *History, v string, p int32, o int64) {
		k, _, _ := seqOf(v)
		h.Ack(Acked{Key: k, Value: v, Partition: p, Offset: o, At: time.Now()})
	}
	cons := func(vs ...string) []Consumed {
		var out []Consumed
		for i, v := range vs {
			k, _, _ := seqOf(v)
			out = append(out, Consumed{Key: k, Value: v, Partition: 0, Offset: int64(i)})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		acked    []string // at offsets 0, 1, ...
		consumed []string
		want     string
	}{
		{"clean", []string{"a-1", "b-1"}, []string{"a-1", "b-1", "a-2"}, ""},
		{"lost", []string{"a-1", "a-2"}, []string{"a-1"}, "acked a-2 (key a) at 0/1 is missing"},
		{"replaced", []string{"a-1", "a-2"}, []string{"a-1", "b-1"}, "acked a-2 at 0/1 was replaced by b-1"},
		{"duplicate", []string{"a-1"}, []string{"a-1", "a-1"}, "value a-1 (acked: true) is in the log 2 times"},
		{"reordered", nil, []string{"a-2", "a-1"}, "key a: a-1 at offset 1 follows seq 2"},
	} {
		h := NewHistory(1)
		for i, v := range tc.acked {
			ack(h, v, 0, int64(i))
		}
		h.SetConsumed(cons(tc.consumed...))
		bad := strings.Join(h.Check(), "\n")
		if tc.want == "" && bad != "" || !strings.Contains(bad, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, bad, tc.want)
		}
	}
}

// Write names a file holding the whole history.
func TestHistoryWrite(t *testing.T) {
	h := NewHistory(42)
	h.Fault("kill -9 node %d", 2)
	h.Ack(Acked{Key: "a", Value: "a-1", Partition: 1, Offset: 7, At: time.Now()})
	h.Failure(Failed{Key: "a", Value: "a-2", Err: "closed", At: time.Now()})
	h.SetConsumed([]Consumed{{Key: "a", Value: "a-1", Partition: 1, Offset: 7}})
	b, err := os.ReadFile(h.Write(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Seed     int64
		Faults   []map[string]any
		Acked    []map[string]any
		Failed   []Failed
		Consumed []Consumed
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Seed != 42 || len(got.Faults) != 1 || len(got.Acked) != 1 || len(got.Failed) != 1 || len(got.Consumed) != 1 ||
		got.Faults[0]["what"] != "kill -9 node 2" {
		t.Fatalf("%s", b)
	}
	if !strings.Contains(h.Schedule(), "kill -9 node 2") {
		t.Fatal(h.Schedule())
	}
}

// AcksSentAfter counts the records handed to the producer after a time,
// whenever their acknowledgement came; AcksAfter counts by arrival.
func TestHistoryAcksSentAfter(t *testing.T) {
	h := NewHistory(1)
	t0 := time.Now()
	h.Ack(Acked{Key: "a", Value: "a-1", Partition: 0, Sent: t0.Add(-time.Second), At: t0.Add(time.Second)})
	h.Ack(Acked{Key: "a", Value: "a-2", Partition: 0, Sent: t0.Add(time.Millisecond), At: t0.Add(2 * time.Millisecond)})
	h.Ack(Acked{Key: "b", Value: "b-1", Partition: 1, Sent: t0.Add(-time.Second), At: t0.Add(-time.Millisecond)})
	if got := h.AcksSentAfter(t0); len(got) != 1 || got[0] != 1 {
		t.Errorf("AcksSentAfter: %v, want a-2 on partition 0 only", got)
	}
	if got := h.AcksAfter(t0); len(got) != 1 || got[0] != 2 {
		t.Errorf("AcksAfter: %v, want a-1 and a-2 on partition 0", got)
	}
}
