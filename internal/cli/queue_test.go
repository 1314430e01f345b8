package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// pollAccept polls the share consumer once and accepts what it got.
func pollAccept(t *testing.T, cl *kgo.Client, d time.Duration) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	recs := cl.PollFetches(ctx).Records()
	for _, r := range recs {
		r.Ack(kgo.AckAccept)
	}
	if len(recs) > 0 {
		fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer fcancel()
		if err := cl.FlushAcks(fctx); err != nil {
			t.Fatalf("flushing acks: %v", err)
		}
	}
	return recs
}

func queueList(t *testing.T, addr string) []queueInfo {
	t.Helper()
	out, _, err := runCLI(t, "", "queue", "list", "--json", "-b", addr)
	if err != nil {
		t.Fatalf("queue list --json: %v", err)
	}
	var qs []queueInfo
	if err := json.Unmarshal([]byte(out), &qs); err != nil {
		t.Fatalf("queue list --json output %q: %v", out, err)
	}
	return qs
}

func queueDescribe(t *testing.T, addr, group string) queueInfo {
	t.Helper()
	out, _, err := runCLI(t, "", "queue", "describe", group, "--json", "-b", addr)
	if err != nil {
		t.Fatalf("queue describe --json: %v", err)
	}
	var q queueInfo
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatalf("queue describe --json output %q: %v", out, err)
	}
	return q
}

// A work queue's lag goes from N to 0 as a kgo share consumer accepts
// its jobs, in `queue list` and `queue describe`, table and JSON.
func TestQueueListDescribeLag(t *testing.T) {
	n := tc.Start(t)
	addr := n.Addr()
	tc.CreateTopic(t, addr, "jobs", 1, nil)
	prod := tc.Client(t, addr)
	worker := tc.Client(t, addr, kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.FetchMaxWait(500*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if out, _, err := runCLI(t, "", "queue", "list", "-b", addr); err != nil || out != "No share groups.\n" {
		t.Fatalf("queue list before any group: %q, %v", out, err)
	}

	// Share-partitions start at the high watermark: warm up first.
	poll.Until(t, 60*time.Second, func() error {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "jobs", Key: []byte("warm")}).FirstErr(); err != nil {
			return err
		}
		if len(pollAccept(t, worker, time.Second)) == 0 {
			return errors.New("no warm-up record yet")
		}
		return nil
	})
	// Drain what the warm-up left, until the queue is empty.
	poll.Until(t, 30*time.Second, func() error {
		pollAccept(t, worker, 200*time.Millisecond)
		qs := queueList(t, addr)
		if len(qs) != 1 || qs[0].Lag != 0 || len(qs[0].Partitions) != 1 {
			return fmt.Errorf("after the warm-up: %+v", qs)
		}
		return nil
	})

	const jobs = 5
	var recs []*kgo.Record
	for i := range jobs {
		recs = append(recs, &kgo.Record{Topic: "jobs", Value: []byte(strconv.Itoa(i))})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	qs := queueList(t, addr)
	if len(qs) != 1 || qs[0].Group != "workers" || qs[0].Members != 1 || qs[0].Lag != jobs || qs[0].State != "Stable" {
		t.Fatalf("queue list --json with %d jobs waiting: %+v", jobs, qs)
	}
	// The worker may have prefetched (acquired) some: they are in flight.
	if c := qs[0].queueCounts; c.Available+c.InFlight != jobs || c.Delayed != 0 {
		t.Fatalf("queue list --json with %d jobs waiting: counts %+v", jobs, c)
	}
	// The table shows what --json shows (retried if the worker fetched in between).
	poll.Until(t, 30*time.Second, func() error {
		out, _, err := runCLI(t, "", "queue", "list", "-b", addr)
		if err != nil {
			t.Fatal(err)
		}
		c := queueList(t, addr)[0].queueCounts
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "GROUP STATE MEMBERS PARTITIONS LAG AVAILABLE IN-FLIGHT DELAYED OLDEST-AVAILABLE DLQ-DEPTH" ||
			withoutField(lines[1], 8) != fmt.Sprintf("workers Stable 1 1 %d %d %d 0 -", jobs, c.Available, c.InFlight) {
			return fmt.Errorf("queue list (counts %+v):\n%s", c, out)
		}
		return nil
	})

	q := queueDescribe(t, addr, "workers")
	if len(q.Partitions) != 1 || len(q.MemberList) != 1 {
		t.Fatalf("queue describe --json: %+v", q)
	}
	p := q.Partitions[0]
	if p.Topic != "jobs" || p.Partition != 0 || p.Lag != jobs || p.HighWatermark-p.StartOffset != jobs || p.Error != "" {
		t.Fatalf("partition %+v, want lag %d", p, jobs)
	}
	if m := q.MemberList[0]; len(m.Assignment) != 1 || m.Assignment[0] != "jobs:0" {
		t.Errorf("member %+v, want assignment jobs:0", m)
	}
	poll.Until(t, 30*time.Second, func() error {
		out, _, err := runCLI(t, "", "queue", "describe", "workers", "-b", addr)
		if err != nil {
			t.Fatal(err)
		}
		p := queueDescribe(t, addr, "workers").Partitions[0]
		wantRow := fmt.Sprintf("jobs 0 %d %d %d %d %d %d 0 0 0 -", p.Leader, p.StartOffset, p.HighWatermark, jobs, p.Available, p.InFlight)
		if !strings.Contains(out, "lag 5\n") || !containsRowWithout(out, wantRow, 9) || !strings.Contains(out, "jobs:0") ||
			!strings.Contains(out, fmt.Sprintf("Jobs: %d available, %d in flight, 0 delayed", p.Available, p.InFlight)) {
			return fmt.Errorf("queue describe, want a row %q:\n%s", wantRow, out)
		}
		return nil
	})

	// The worker accepts every job: the lag drains to 0.
	got := 0
	poll.Until(t, 60*time.Second, func() error {
		got += len(pollAccept(t, worker, time.Second))
		if got < jobs {
			return fmt.Errorf("%d of %d jobs", got, jobs)
		}
		return nil
	})
	poll.Until(t, 30*time.Second, func() error {
		if qs := queueList(t, addr); len(qs) != 1 || qs[0].Lag != 0 {
			return fmt.Errorf("queue list after the jobs: %+v", qs)
		}
		return nil
	})
	q = queueDescribe(t, addr, "workers")
	if p := q.Partitions[0]; p.Lag != 0 || p.StartOffset != p.HighWatermark {
		t.Errorf("after the jobs: %+v", p)
	}
	out, _, err := runCLI(t, "", "queue", "describe", "workers", "-b", addr)
	if err != nil || !containsRow(out, fmt.Sprintf("jobs 0 %d %d %d 0 0 0 0 - 0 0 -", p.Leader, p.HighWatermark, p.HighWatermark)) {
		t.Errorf("queue describe after the jobs (%v):\n%s", err, out)
	}
}

// withoutField returns line's fields but the i-th (from 0), space-separated.
func withoutField(line string, i int) string {
	fs := strings.Fields(line)
	if i < len(fs) {
		fs = append(fs[:i], fs[i+1:]...)
	}
	return strings.Join(fs, " ")
}

// containsRowWithout reports whether a line of out, without its i-th
// field (a time that moves), has the fields of row.
func containsRowWithout(out, row string, i int) bool {
	for _, l := range strings.Split(out, "\n") {
		if withoutField(l, i) == row {
			return true
		}
	}
	return false
}

// containsRow reports whether a line of out has the fields of row.
func containsRow(out, row string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(l), " ") == row {
			return true
		}
	}
	return false
}

func TestQueueDescribeErrors(t *testing.T) {
	addr := tc.Start(t).Addr()
	_, _, err := runCLI(t, "", "queue", "describe", "nobody", "-b", addr)
	if !errors.Is(err, kerr.GroupIDNotFound) || !strings.Contains(err.Error(), `group "nobody"`) {
		t.Errorf("unknown group: %v, want GROUP_ID_NOT_FOUND about group \"nobody\"", err)
	}
	if _, _, err := runCLI(t, "", "queue", "describe", "-b", addr); err == nil {
		t.Errorf("no group named: no error")
	}
	if _, _, err := runCLI(t, "", "queue", "describe", "", "-b", addr); err == nil || !strings.Contains(err.Error(), "must not be empty") {
		t.Errorf("empty group name: %v", err)
	}
}

// queue alter sets and deletes a group's configs (the group need not
// exist), queue configs shows them with their source, and the broker's
// refusals come back with its message.
func TestQueueAlterConfigs(t *testing.T) {
	addr := tc.Start(t).Addr()
	if out, _, err := runCLI(t, "", "queue", "configs", "shippers", "-b", addr); err != nil || !strings.Contains(out, "sets no configs of its own") {
		t.Fatalf("configs of a group with none: %q, %v", out, err)
	}
	out, _, err := runCLI(t, "", "queue", "alter", "shippers", "-b", addr,
		"--config", "share.auto.offset.reset=earliest", "--config", "share.delivery.count.limit=3")
	if err != nil || out != "Altered group shippers: set share.auto.offset.reset=earliest; set share.delivery.count.limit=3.\n" {
		t.Fatalf("queue alter: %q, %v", out, err)
	}
	out, _, err = runCLI(t, "", "queue", "configs", "shippers", "-b", addr)
	if err != nil {
		t.Fatal(err)
	}
	want := "CONFIG                      VALUE     SOURCE\n" +
		"share.auto.offset.reset     earliest  GROUP_CONFIG\n" +
		"share.delivery.count.limit  3         GROUP_CONFIG\n"
	if out != want {
		t.Fatalf("queue configs:\n%s\nwant:\n%s", out, want)
	}
	if _, _, err := runCLI(t, "", "queue", "alter", "shippers", "-b", addr, "--delete-config", "share.delivery.count.limit"); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, "", "queue", "configs", "shippers", "--all", "--json", "-b", addr)
	if err != nil {
		t.Fatal(err)
	}
	var qc queueConfigs
	if err := json.Unmarshal([]byte(out), &qc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]configEntry{}
	for _, c := range qc.Configs {
		got[c.Name] = c
	}
	if c := got["share.delivery.count.limit"]; c.Value != "5" || c.Source != "DEFAULT_CONFIG" {
		t.Errorf("after --delete-config: %+v, want the default 5", c)
	}
	if c := got["share.auto.offset.reset"]; c.Value != "earliest" || c.Source != "GROUP_CONFIG" {
		t.Errorf("share.auto.offset.reset: %+v", c)
	}
	if len(qc.Configs) < 13 {
		t.Errorf("--all listed %d configs, want every group config", len(qc.Configs))
	}

	_, _, err = runCLI(t, "", "queue", "alter", "shippers", "-b", addr, "--config", "share.delivery.count.limit=50")
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), "group.share.max.delivery.count.limit") {
		t.Errorf("out-of-bounds value: %v, want INVALID_CONFIG naming the broker's bound", err)
	}
	for _, args := range [][]string{
		{"queue", "alter", "shippers"},
		{"queue", "alter", "shippers", "--config", "novalue"},
		{"queue", "alter", "shippers", "--config", "a=1", "--delete-config", "a"},
		{"queue", "alter", "", "--config", "a=1"},
	} {
		if _, _, err := runCLI(t, "", append(args, "-b", addr)...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
