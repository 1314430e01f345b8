package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/pkg/berthmsg"
)

// The committable offset never passes a record whose produce is not
// acknowledged, whatever order the acknowledgements come in, and stops
// for good at a failed one.
func TestDLQRedriveProgressCommitsOnlyAcknowledged(t *testing.T) {
	p := &redriveProgress{pending: map[int32][]*redriveSlot{}, next: map[int32]int64{}, kept: map[int32]int64{}}
	committed := func() map[int32]int64 {
		offs, _ := p.snapshot()
		out := map[int32]int64{}
		offs.Each(func(o kadm.Offset) { out[o.Partition] = o.At })
		return out
	}
	a := p.add(0, 10, false)
	p.add(0, 11, true) // skipped
	c := p.add(0, 12, false)
	d := p.add(1, 5, false)
	if got := committed(); len(got) != 0 {
		t.Fatalf("nothing acknowledged, committable %v", got)
	}
	p.finish(0, c, nil)
	if got := committed(); len(got) != 0 {
		t.Fatalf("12 acknowledged before 10: committable %v", got)
	}
	p.finish(0, a, nil)
	if got := committed(); got[0] != 13 {
		t.Fatalf("10-12 finished: committable %v, want 0:13", got)
	}
	e := p.add(0, 13, false)
	p.finish(1, d, errors.New("boom"))
	p.finish(0, e, nil)
	if got := committed(); got[0] != 14 || len(got) != 1 || p.err() == nil {
		t.Fatalf("after a failure on partition 1: committable %v, err %v", got, p.err())
	}

	// The first record kept (skipped or refused) goes into the metadata.
	p.keep(0, 11)
	offs, _ := p.snapshot()
	if o, ok := offs.Lookup("", 0); !ok || o.Metadata != keptMetadata(11) || parseKept(o.Metadata) != 11 {
		t.Errorf("metadata %+v, want kept=11", o)
	}
	if parseKept("") != -1 || parseKept("kept=x") != -1 {
		t.Errorf("parseKept of no marker")
	}
}

// A redriven record keeps the job's key, value and own headers, loses the
// context headers and counts one more redrive.
func TestDLQRedriveRecord(t *testing.T) {
	r := &kgo.Record{Topic: "dlq.jobs", Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(5), Headers: []kgo.RecordHeader{
		{Key: "trace", Value: []byte("t")},
		{Key: berthmsg.HeaderDLQRedriveCount, Value: []byte("2")},
		{Key: berthmsg.HeaderDLQTopic, Value: []byte("jobs")},
		{Key: berthmsg.HeaderDLQClientError, Value: []byte("boom\nstack")},
		{Key: berthmsg.HeaderDLQTimestamp, Value: []byte("4")},
	}}
	j := decodeDLQ(r, time.UnixMilli(1004))
	if j.RedriveCount != 2 || j.SourceTopic != "jobs" || j.ClientError != "boom\nstack" || j.SourceMs != 4 || j.SourceAgeMs != 1000 ||
		j.Timestamp != 5 || j.AgeMs != 999 ||
		len(j.Headers) != 1 || j.Headers["trace"] != "t" {
		t.Errorf("decoded %+v", j)
	}
	out := redriveRecord(r, "jobs", j.RedriveCount)
	if out.Topic != "jobs" || string(out.Key) != "k" || string(out.Value) != "v" || len(out.Headers) != 2 ||
		out.Headers[0].Key != "trace" || out.Headers[1].Key != berthmsg.HeaderDLQRedriveCount || string(out.Headers[1].Value) != "3" {
		t.Errorf("redriven %+v", out)
	}
}

func TestDLQFilterAndFormatting(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f, err := parseDLQFilter("delivery-limit", "2h", "1h", now)
	if err != nil {
		t.Fatal(err)
	}
	// The filters take the time a job was parked (the DLQ record's
	// timestamp), not the job's own (days older here).
	job := func(reason string, at time.Time) dlqJob {
		return dlqJob{Reason: reason, Timestamp: at.UnixMilli(), SourceMs: at.Add(-13 * 24 * time.Hour).UnixMilli()}
	}
	for _, c := range []struct {
		j    dlqJob
		want bool
	}{
		{job("delivery limit reached", now.Add(-90*time.Minute)), true},
		{job("rejected", now.Add(-90*time.Minute)), false},
		{job("delivery limit reached", now.Add(-3*time.Hour)), false},
		{job("delivery limit reached", now.Add(-time.Hour)), false}, // --until is exclusive
	} {
		if got := f.match(c.j); got != c.want {
			t.Errorf("match(%+v) = %v, want %v", c.j, got, c.want)
		}
	}
	for _, bad := range [][3]string{{"nope", "", ""}, {"", "yesterday", ""}, {"", "1h", "2h"}, {"", "-1h", ""}} {
		if _, err := parseDLQFilter(bad[0], bad[1], bad[2], now); err == nil {
			t.Errorf("parseDLQFilter%v: no error", bad)
		}
	}
	if got := firstLine("carrier said no\n\tat main.go:12", 60); got != "carrier said no" {
		t.Errorf("firstLine: %q", got)
	}
	if got := firstLine(strings.Repeat("é", 100), 10); got != strings.Repeat("é", 7)+"..." {
		t.Errorf("firstLine cut: %q", got)
	}
}
