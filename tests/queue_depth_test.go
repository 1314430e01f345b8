package tests

// `berth queue describe|list` show the record counts of a share group's
// share-partitions (Berth's tagged fields on DescribeShareGroupOffsets)
// matching what a kgo share consumer holds.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	"github.com/berthmq/berth/internal/share"
	tc "github.com/berthmq/berth/internal/testcluster"
	"github.com/berthmq/berth/pkg/berthmsg"
)

type queueCountsJSON struct {
	Available            int64 `json:"available"`
	InFlight             int64 `json:"in_flight"`
	Delayed              int64 `json:"delayed"`
	OldestAvailableAgeMs int64 `json:"oldest_available_age_ms"`
	Redeliveries         int64 `json:"redeliveries"`
	Archived             int64 `json:"archived"`
}

type queueJSON struct {
	Group string `json:"group"`
	Lag   int64  `json:"lag"`
	queueCountsJSON
	DLQTopic   string `json:"dlq_topic"`
	DLQDepth   int64  `json:"dlq_depth"`
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Lag       int64  `json:"lag"`
		queueCountsJSON
	} `json:"partitions"`
}

func flushAcks(t *testing.T, cl *kgo.Client) {
	t.Helper()
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("flushing acks: %v", err)
	}
}

// 10 jobs produced, 4 acquired and held by a worker: in flight 4,
// available 6; then one released (delayed by the backoff), one rejected
// (archived), two accepted. The worker speaks the protocol by hand
// (ShareFetch with a strict record limit, no background fetch): a kgo
// share consumer may acquire a second batch in the background at any
// time, so what it holds is not what the test polled.
func TestQueueDepthMatchesShareConsumer(t *testing.T) {
	// A long backoff so the released job stays delayed while we look.
	addr := tc.Start(t, tc.With(share.BrokerRetryBackoffInitialMs, "600000"), tc.With(share.BrokerRetryBackoffMaxMs, "600000")).Addr()
	tc.CreateTopic(t, addr, "jobs", 1, nil)
	prod := tc.Client(t, addr)
	ctx := ctxT(t, 2*time.Minute)
	td, err := tc.Admin(t, addr).ListTopics(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	worker := newRawShareMember(t, ctx, addr, "workers", "worker-1", "jobs", td["jobs"].ID)
	worker.maxRecords = 4

	describe := func() queueJSON {
		t.Helper()
		var q queueJSON
		berthJSON(t, &q, "queue", "describe", "workers", "-b", addr)
		return q
	}

	// The first fetch starts the share-partition at the high watermark.
	if got := worker.fetch(ctx, 0); len(got) != 0 {
		t.Fatalf("acquired %v from an empty topic", got)
	}
	var jobs []*kgo.Record
	for i := range 10 {
		jobs = append(jobs, &kgo.Record{Topic: "jobs", Value: []byte("job-" + strconv.Itoa(i))})
	}
	produceSync(t, prod, jobs...)
	var held []int64
	poll.Until(t, 30*time.Second, func() error {
		for _, a := range worker.fetch(ctx, 500*time.Millisecond) {
			for o := a.FirstOffset; o <= a.LastOffset; o++ {
				held = append(held, o)
			}
		}
		if len(held) == 0 {
			return errors.New("nothing acquired yet")
		}
		return nil
	})
	if len(held) != 4 {
		t.Fatalf("the worker acquired offsets %v, want 4 (MaxRecords, strict)", held)
	}

	check := func(what string, avail, inflight, delayed, archived int64) {
		t.Helper()
		poll.Until(t, 30*time.Second, func() error {
			q := describe()
			if len(q.Partitions) != 1 {
				return fmt.Errorf("%s: partitions %+v", what, q.Partitions)
			}
			p := q.Partitions[0]
			got := []int64{p.Available, p.InFlight, p.Delayed, p.Archived, q.Available, q.InFlight, q.Delayed, q.Archived}
			want := []int64{avail, inflight, delayed, archived, avail, inflight, delayed, archived}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("%s: available, in flight, delayed, archived (partition, group) %v, want %v", what, got, want)
			}
			out, _, err := berthCLI(ctx, "", "queue", "describe", "workers", "-b", addr)
			if err != nil {
				return err
			}
			line := fmt.Sprintf("Jobs: %d available, %d in flight, %d delayed", avail, inflight, delayed)
			if !strings.Contains(out, line) {
				return fmt.Errorf("%s: queue describe lacks %q:\n%s", what, line, out)
			}
			return nil
		})
	}
	check("4 of 10 held", 6, 4, 0, 0)
	// The 6 never fetched have waited since they were produced.
	if q := describe(); q.OldestAvailableAgeMs < 0 || q.Partitions[0].OldestAvailableAgeMs != q.OldestAvailableAgeMs {
		t.Errorf("oldest available age: group %d, partition %d, want known (>= 0)", q.OldestAvailableAgeMs, q.Partitions[0].OldestAvailableAgeMs)
	}

	for i, typ := range []int8{2, 3, 1, 1} { // release, reject, accept, accept
		if err := worker.ack(ctx, held[i], typ); err != nil {
			t.Fatalf("acknowledging offset %d with type %d: %v", held[i], typ, err)
		}
	}
	check("one released, one rejected, two accepted", 6, 0, 1, 1)

	out, _, err := berthCLI(ctx, "", "queue", "list", "-b", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("queue list:\n%s", out)
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "workers Stable 1 1 10 6 0 1") {
		t.Errorf("queue list, want workers with lag 10 (the released job holds the start offset), 6 available, 0 in flight, 1 delayed:\n%s", out)
	}

	// The DLQ depth, where the broker serves group configs.
	tc.CreateTopic(t, addr, "dlq.workers", 1, nil)
	produceSync(t, prod, &kgo.Record{Topic: "dlq.workers", Value: []byte("a")}, &kgo.Record{Topic: "dlq.workers", Value: []byte("b")})
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "workers"
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = berthmsg.ConfigDLQTopicName, kmsg.StringPtr("dlq.workers")
	rr.Configs = append(rr.Configs, rc)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, prod)
	if err != nil {
		t.Fatalf("setting the group's DLQ topic: %v", err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("setting the group's DLQ topic: %v", err)
	}
	poll.Until(t, 30*time.Second, func() error {
		if q := describe(); q.DLQTopic != "dlq.workers" || q.DLQDepth != 2 {
			return fmt.Errorf("DLQ %q depth %d, want dlq.workers and 2", q.DLQTopic, q.DLQDepth)
		}
		return nil
	})
	if out, _, err := berthCLI(ctx, "", "queue", "describe", "workers", "-b", addr); err != nil || !strings.Contains(out, "DLQ: dlq.workers, 2 records") {
		t.Errorf("queue describe with a DLQ (%v):\n%s", err, out)
	}
}
