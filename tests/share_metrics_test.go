package tests

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// shareMetric reads one berth_share_* sample of group g, topic jobs,
// partition 0 from n's /metrics (extra is more labels, e.g. reason="rejected").
func shareMetric(t *testing.T, n *tc.Node, name, extra string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want := name + `{group="g",partition="0",`
	if extra != "" {
		want += extra + ","
	}
	want += `topic="jobs"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s...", want)
	return 0
}

// The berth_share_* metrics follow a work queue: in flight while a
// consumer holds records, delayed during a release's backoff, a
// redelivery counted, rejected records counted as archived.
func TestShareMetrics(t *testing.T) {
	n := tc.Start(t,
		tc.With("group.share.retry.backoff.initial.ms", "300"),
		tc.With("group.share.retry.backoff.max.ms", "300"))
	tc.CreateTopic(t, n.Addr(), "jobs", 1, nil)
	prod := tc.Client(t, n.Addr())
	cl := shareConsumer(t, n.Addr(), "g", "jobs")
	warmShare(t, prod, cl, "jobs")
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: "jobs", Value: []byte(fmt.Sprint(i))})
	}
	// One batch, taken in one poll: a second poll would accept what the
	// first returned.
	produceOneBatch(t, []string{n.Addr()}, recs...)

	// Take the five jobs and hold them: five in flight.
	var held []*kgo.Record
	poll.Until(t, 20*time.Second, func() error {
		if held = pollFor(t, cl, 500*time.Millisecond); len(held) == 0 {
			return fmt.Errorf("no job acquired yet")
		}
		if len(held) != 5 {
			t.Fatalf("one poll returned %d of the 5 jobs of one batch", len(held))
		}
		return nil
	})
	if got := shareMetric(t, n, "berth_share_inflight_records", ""); got != 5 {
		t.Fatalf("in flight while held: %v, want 5", got)
	}
	// Release one, reject one, accept the rest.
	held[0].Ack(kgo.AckRelease)
	held[1].Ack(kgo.AckReject)
	for _, r := range held[2:] {
		r.Ack(kgo.AckAccept)
	}
	if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := shareMetric(t, n, "berth_share_inflight_records", ""); got != 0 {
		t.Fatalf("in flight after the acks: %v, want 0", got)
	}
	if got := shareMetric(t, n, "berth_share_archived_records_total", `reason="rejected"`); got != 1 {
		t.Fatalf("archived as rejected: %v, want 1", got)
	}
	// The released job comes back after its backoff: one redelivery.
	poll.Until(t, 20*time.Second, func() error {
		for _, r := range pollFor(t, cl, 500*time.Millisecond) {
			r.Ack(kgo.AckAccept)
			if err := cl.FlushAcks(ctxT(t, 10*time.Second)); err != nil {
				return err
			}
			return nil
		}
		return fmt.Errorf("released job not redelivered yet")
	})
	if got := shareMetric(t, n, "berth_share_redeliveries_total", ""); got != 1 {
		t.Fatalf("redeliveries: %v, want 1", got)
	}
	for _, name := range []string{"berth_share_inflight_records", "berth_share_available_records", "berth_share_delayed_records"} {
		if got := shareMetric(t, n, name, ""); got != 0 {
			t.Errorf("%s once every job is done: %v, want 0", name, got)
		}
	}
}
