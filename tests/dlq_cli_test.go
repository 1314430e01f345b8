package tests

// `berth dlq list|inspect|redrive|purge` run in-process (cli.Run) against
// a broker, on DLQ records produced here with the KIP-1191 and Berth
// context headers, as the broker's dead-letter writer writes them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/cli"
	"github.com/berthmq/berth/internal/poll"
	"github.com/berthmq/berth/internal/share"
	tc "github.com/berthmq/berth/internal/testcluster"
	"github.com/berthmq/berth/pkg/berthmsg"
)

// berthCLI runs `berth args...` in this process and returns its stdout
// and stderr.
func berthCLI(ctx context.Context, stdin string, args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := cli.Run(ctx, args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), err
}

// berthJSON runs a command with --json and decodes its output into v.
func berthJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, stderr, err := berthCLI(ctxT(t, 2*time.Minute), "", append(args, "--json")...)
	if err != nil {
		t.Fatalf("berth %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr)
	}
	reflect.ValueOf(v).Elem().SetZero() // no fields left over from an earlier decode
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("berth %s --json: %q: %v", strings.Join(args, " "), out, err)
	}
}

// parkedJob is what the dead-letter writer records about a job.
type parkedJob struct {
	key, value    string
	headers       map[string]string // the source record's own
	srcTopic      string
	srcPartition  int32
	srcOffset     int64
	parked        time.Time // the DLQ record's timestamp: when the job was parked; zero: now
	at            time.Time // the source record's timestamp (__dlq.errors.berth.timestamp); zero: parked
	group, reason string
	deliveries    int
	redrives      int // 0: no redrive-count header
	clientError   string
}

// record builds the DLQ record as Berth's writer does: the source
// record's key, value and headers, then the context headers.
func (j parkedJob) record(dlq string, partition int32) *kgo.Record {
	parked := j.parked
	if parked.IsZero() {
		parked = time.Now()
	}
	at := j.at
	if at.IsZero() {
		at = parked
	}
	r := &kgo.Record{Topic: dlq, Partition: partition, Key: []byte(j.key), Value: []byte(j.value), Timestamp: parked}
	for k, v := range j.headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	if j.redrives > 0 { // carried by the source record since its last redrive
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: berthmsg.HeaderDLQRedriveCount, Value: []byte(strconv.Itoa(j.redrives))})
	}
	message := "Offset rejected by client."
	if j.reason != "rejected" {
		message = "Offset delivery count exceeded the threshold."
	}
	for _, h := range [][2]string{
		{berthmsg.HeaderDLQTopic, j.srcTopic},
		{berthmsg.HeaderDLQPartition, strconv.Itoa(int(j.srcPartition))},
		{berthmsg.HeaderDLQOffset, strconv.FormatInt(j.srcOffset, 10)},
		{berthmsg.HeaderDLQGroup, j.group},
		{berthmsg.HeaderDLQDeliveryCount, strconv.Itoa(j.deliveries)},
		{berthmsg.HeaderDLQMessage, message},
		{berthmsg.HeaderDLQReason, j.reason},
		{berthmsg.HeaderDLQTimestamp, strconv.FormatInt(at.UnixMilli(), 10)},
	} {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	if j.clientError != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: berthmsg.HeaderDLQClientError, Value: []byte(j.clientError)})
	}
	return r
}

// parkJobs produces jobs to the DLQ topic, partition by partition as
// given (partition -1: 0).
func parkJobs(t *testing.T, cl *kgo.Client, dlq string, partition int32, jobs ...parkedJob) {
	t.Helper()
	var recs []*kgo.Record
	for _, j := range jobs {
		recs = append(recs, j.record(dlq, partition))
	}
	produceSync(t, cl, recs...)
}

// numberedJobs returns n jobs from source topic src, offsets from..from+n-1,
// each with key k<i>, value v<i> and a header of its own.
func numberedJobs(src string, from, n int, reason string) []parkedJob {
	var jobs []parkedJob
	for i := from; i < from+n; i++ {
		jobs = append(jobs, parkedJob{
			key: "k" + strconv.Itoa(i), value: "v" + strconv.Itoa(i), headers: map[string]string{"trace": "t" + strconv.Itoa(i)},
			srcTopic: src, srcOffset: int64(i), group: "workers",
			reason: reason, deliveries: 5,
		})
	}
	return jobs
}

// startDLQBroker starts a broker with a source topic "jobs" and its DLQ
// topic "dlq.jobs" (with the given partitions).
func startDLQBroker(t *testing.T, dlqPartitions int32) (string, *kgo.Client) {
	t.Helper()
	addr := tc.Start(t).Addr()
	tc.CreateTopic(t, addr, "jobs", 1, nil)
	tc.CreateTopic(t, addr, "dlq.jobs", dlqPartitions, nil)
	return addr, tc.Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// jobsIn reads every record of topic.
func jobsIn(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	ends, err := tc.Admin(t, addr).ListEndOffsets(ctxT(t, 30*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ends.Each(func(o kadm.ListedOffset) { n += int(o.Offset) })
	if n == 0 {
		return nil
	}
	return consumeN(t, addr, topic, n)
}

type redriveJSON struct {
	Topic       string           `json:"topic"`
	Group       string           `json:"group"`
	DryRun      bool             `json:"dry_run"`
	Total       int64            `json:"total"`
	Moved       int64            `json:"moved"`
	Skipped     int64            `json:"skipped"`
	Refused     int64            `json:"refused"`
	NoTarget    int64            `json:"no_target"`
	Failed      int64            `json:"failed"`
	Interrupted bool             `json:"interrupted"`
	ElapsedMs   int64            `json:"elapsed_ms"`
	Committed   map[string]int64 `json:"committed"`
	Refusals    []struct {
		Partition    int32  `json:"partition"`
		Offset       int64  `json:"offset"`
		RedriveCount int64  `json:"redrive_count"`
		Why          string `json:"why"`
	} `json:"refusals"`
	Moves []struct {
		Offset int64  `json:"offset"`
		To     string `json:"to"`
	} `json:"moves"`
	Error string `json:"error"`
}

type dlqJobJSON struct {
	Partition       int32             `json:"partition"`
	Offset          int64             `json:"offset"`
	Timestamp       int64             `json:"timestamp"`
	AgeMs           int64             `json:"age_ms"`
	SourceTopic     string            `json:"source_topic"`
	SourcePartition int32             `json:"source_partition"`
	SourceOffset    int64             `json:"source_offset"`
	SourceTimestamp int64             `json:"source_timestamp"`
	SourceAgeMs     int64             `json:"source_age_ms"`
	Group           string            `json:"group"`
	Reason          string            `json:"reason"`
	Message         string            `json:"message"`
	DeliveryCount   int64             `json:"delivery_count"`
	RedriveCount    int64             `json:"redrive_count"`
	ClientError     string            `json:"client_error"`
	Key             *string           `json:"key"`
	Value           *string           `json:"value"`
	Headers         map[string]string `json:"headers"`
}

// inspect shows every context header, filters by reason and by the time
// a job was parked (not its own, older timestamp), and list finds the DLQ
// topic with its depth, how long ago its oldest job was parked and that
// job's own age.
func TestDLQCLIInspectAndList(t *testing.T) {
	addr, cl := startDLQBroker(t, 2)
	stack := "shipment 42: carrier API said 422\ngoroutine 7 [running]:\nmain.ship(...)"
	const day = 24 * time.Hour
	old := time.Now().Add(-3 * time.Hour).Truncate(time.Millisecond)
	recent := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	parkJobs(t, cl, "dlq.jobs", 0, parkedJob{
		key: "order-42", value: `{"id":42}`, headers: map[string]string{"trace": "abc"},
		srcTopic: "jobs", srcPartition: 0, srcOffset: 17, parked: recent, at: recent.Add(-2 * day),
		group: "workers", reason: "rejected", deliveries: 2, redrives: 1, clientError: stack,
	})
	parkJobs(t, cl, "dlq.jobs", 1, parkedJob{
		key: "order-7", value: "x", srcTopic: "jobs", srcOffset: 3, group: "workers",
		reason: "delivery limit reached", deliveries: 5, parked: old, at: old.Add(-13 * day),
	})

	var jobs []dlqJobJSON
	berthJSON(t, &jobs, "dlq", "inspect", "dlq.jobs", "-b", addr)
	if len(jobs) != 2 {
		t.Fatalf("inspect: %d jobs, want 2: %+v", len(jobs), jobs)
	}
	// Partition by partition, in parking order.
	rej, lim := jobs[0], jobs[1]
	if lim.Reason != "delivery limit reached" || lim.Timestamp != old.UnixMilli() || lim.SourceTimestamp != old.Add(-13*day).UnixMilli() ||
		lim.AgeMs < (3*time.Hour).Milliseconds() || lim.AgeMs > (4*time.Hour).Milliseconds() ||
		lim.SourceAgeMs < (13*day).Milliseconds() || lim.Partition != 1 {
		t.Errorf("delivery-limit job: %+v", lim)
	}
	if rej.Partition != 0 || rej.Offset != 0 || rej.SourceTopic != "jobs" || rej.SourcePartition != 0 || rej.SourceOffset != 17 ||
		rej.Timestamp != recent.UnixMilli() || rej.SourceTimestamp != recent.Add(-2*day).UnixMilli() ||
		rej.AgeMs < time.Minute.Milliseconds() || rej.AgeMs > time.Hour.Milliseconds() || rej.SourceAgeMs < (2*day).Milliseconds() ||
		rej.Group != "workers" || rej.Reason != "rejected" ||
		rej.Message != "Offset rejected by client." || rej.DeliveryCount != 2 || rej.RedriveCount != 1 || rej.ClientError != stack ||
		rej.Key == nil || *rej.Key != "order-42" || rej.Value == nil || *rej.Value != `{"id":42}` ||
		len(rej.Headers) != 1 || rej.Headers["trace"] != "abc" {
		t.Errorf("rejected job: %+v", rej)
	}

	// Filters: reason, parked time, limit.
	berthJSON(t, &jobs, "dlq", "inspect", "dlq.jobs", "--reason", "rejected", "-b", addr)
	if len(jobs) != 1 || jobs[0].SourceOffset != 17 {
		t.Errorf("--reason rejected: %+v", jobs)
	}
	berthJSON(t, &jobs, "dlq", "inspect", "dlq.jobs", "--since", "2h", "-b", addr)
	if len(jobs) != 1 || jobs[0].SourceOffset != 17 {
		t.Errorf("--since 2h: %+v", jobs)
	}
	berthJSON(t, &jobs, "dlq", "inspect", "dlq.jobs", "--until", "2h", "-b", addr)
	if len(jobs) != 1 || jobs[0].SourceOffset != 3 {
		t.Errorf("--until 2h: %+v", jobs)
	}
	berthJSON(t, &jobs, "dlq", "inspect", "dlq.jobs", "--limit", "1", "-b", addr)
	if len(jobs) != 1 {
		t.Errorf("--limit 1: %+v", jobs)
	}

	// The table: the error's first line only.
	out, _, err := berthCLI(ctxT(t, time.Minute), "", "dlq", "inspect", "dlq.jobs", "-b", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dlq inspect:\n%s", out)
	if !strings.Contains(out, "jobs-0@17") || !strings.Contains(out, "shipment 42: carrier API said 422") || strings.Contains(out, "goroutine") ||
		!strings.Contains(out, "delivery limit reached") || !strings.Contains(out, "order-42") ||
		!strings.Contains(out, "PARKED") || !strings.Contains(out, "JOB-AGE") || !strings.Contains(out, " 13d") {
		t.Errorf("dlq inspect table:\n%s", out)
	}

	var list []struct {
		Topic          string `json:"topic"`
		Partitions     int    `json:"partitions"`
		Parked         int64  `json:"parked"`
		OldestAgeMs    int64  `json:"oldest_age_ms"`
		OldestJobAgeMs int64  `json:"oldest_job_age_ms"`
	}
	berthJSON(t, &list, "dlq", "list", "-b", addr)
	if len(list) != 1 || list[0].Topic != "dlq.jobs" || list[0].Partitions != 2 || list[0].Parked != 2 ||
		list[0].OldestAgeMs < (3*time.Hour).Milliseconds() || list[0].OldestAgeMs > (4*time.Hour).Milliseconds() ||
		list[0].OldestJobAgeMs < (13*day).Milliseconds() || list[0].OldestJobAgeMs > (14*day).Milliseconds() {
		t.Errorf("dlq list: %+v", list)
	}
	out, _, err = berthCLI(ctxT(t, time.Minute), "", "dlq", "list", "-b", addr)
	t.Logf("dlq list:\n%s", out)
	if err != nil || !strings.Contains(out, "dlq.jobs") || strings.Contains(out, "\njobs ") ||
		!strings.Contains(out, "OLDEST-JOB-AGE") || !strings.Contains(out, " 13d") {
		t.Errorf("dlq list (%v):\n%s", err, out)
	}
}

// redrive moves jobs back with their key, value and headers and redrive
// count 1, at --rate; --dry-run moves nothing; the loop guard refuses a
// job redriven --max-redrives times; a second run finds nothing new.
func TestDLQCLIRedrive(t *testing.T) {
	addr, cl := startDLQBroker(t, 1)
	jobs := numberedJobs("jobs", 0, 6, "rejected")
	jobs[2].reason = "delivery limit reached"
	jobs[4].redrives = 3 // at the default --max-redrives
	parkJobs(t, cl, "dlq.jobs", 0, jobs...)

	var res redriveJSON
	berthJSON(t, &res, "dlq", "redrive", "dlq.jobs", "--dry-run", "-b", addr)
	if !res.DryRun || res.Total != 6 || res.Moved != 5 || res.Refused != 1 || len(res.Moves) != 5 || res.Refusals[0].Offset != 4 {
		t.Errorf("--dry-run: %+v", res)
	}
	berthJSON(t, &res, "dlq", "redrive", "dlq.jobs", "--dry-run", "--reason", "delivery-limit", "-b", addr)
	if res.Moved != 1 || res.Skipped != 5 || res.Moves[0].Offset != 2 {
		t.Errorf("--dry-run --reason delivery-limit: %+v", res)
	}
	if recs := jobsIn(t, addr, "jobs"); len(recs) != 0 {
		t.Fatalf("--dry-run moved %d records", len(recs))
	}

	const rate = 10.0
	start := time.Now()
	berthJSON(t, &res, "dlq", "redrive", "dlq.jobs", "--rate", "10", "-b", addr)
	elapsed := time.Since(start)
	if res.DryRun || res.Total != 6 || res.Moved != 5 || res.Refused != 1 || res.Failed != 0 || res.Interrupted || res.Error != "" {
		t.Fatalf("redrive: %+v", res)
	}
	if r := res.Refusals; len(r) != 1 || r[0].Offset != 4 || r[0].RedriveCount != 3 || !strings.Contains(r[0].Why, "--max-redrives 3") {
		t.Errorf("refusals: %+v", r)
	}
	if min := time.Duration(float64(res.Moved-1) / rate * float64(time.Second)); elapsed < min || time.Duration(res.ElapsedMs)*time.Millisecond < min {
		t.Errorf("redrove %d records at --rate %g in %s (reported %dms), want at least %s", res.Moved, rate, elapsed, res.ElapsedMs, min)
	}

	recs := jobsIn(t, addr, "jobs")
	if len(recs) != 5 {
		t.Fatalf("%d records in jobs after the redrive, want 5", len(recs))
	}
	for _, r := range recs {
		i, err := strconv.Atoi(strings.TrimPrefix(string(r.Key), "k"))
		if err != nil || i == 4 || string(r.Value) != "v"+strconv.Itoa(i) {
			t.Errorf("redriven record key %q value %q", r.Key, r.Value)
		}
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		if len(hs) != 2 || hs["trace"] != "t"+strconv.Itoa(i) || hs[berthmsg.HeaderDLQRedriveCount] != "1" {
			t.Errorf("redriven record %q headers %v, want trace and %s=1 only", r.Key, hs, berthmsg.HeaderDLQRedriveCount)
		}
	}

	// Nothing new to redrive; the table says so.
	out, _, err := berthCLI(ctxT(t, time.Minute), "", "dlq", "redrive", "dlq.jobs", "-b", addr)
	if err != nil || !strings.Contains(out, "Redrove 0 records") {
		t.Errorf("second redrive (%v):\n%s", err, out)
	}
	// --from-start reads them all again (dry run here).
	berthJSON(t, &res, "dlq", "redrive", "dlq.jobs", "--from-start", "--dry-run", "-b", addr)
	if res.Total != 6 || res.Moved != 5 {
		t.Errorf("--from-start --dry-run: %+v", res)
	}
	// A job redriven once, parked again, is redriven with count 2.
	again := recs[0]
	parkJobs(t, cl, "dlq.jobs", 0, parkedJob{key: string(again.Key), value: string(again.Value), redrives: 1, srcTopic: "jobs", srcOffset: 0, group: "workers", reason: "rejected", deliveries: 5})
	berthJSON(t, &res, "dlq", "redrive", "dlq.jobs", "-b", addr)
	if res.Total != 1 || res.Moved != 1 {
		t.Fatalf("redrive of a job parked again: %+v", res)
	}
	recs = jobsIn(t, addr, "jobs")
	last := recs[len(recs)-1]
	if c := headerValue(last, berthmsg.HeaderDLQRedriveCount); c != "2" {
		t.Errorf("redriven again: %s=%q, want 2", berthmsg.HeaderDLQRedriveCount, c)
	}
	// A job whose source topic is gone stays, counted as without target;
	// a missing --to topic is an error before anything moves.
	parkJobs(t, cl, "dlq.jobs", 0, parkedJob{key: "orphan", srcTopic: "gone", group: "workers", reason: "rejected", deliveries: 5})
	berthJSON(t, &res, "dlq", "redrive", "dlq.jobs", "-b", addr)
	if res.Total != 1 || res.Moved != 0 || res.NoTarget != 1 || len(res.Refusals) != 1 || !strings.Contains(res.Refusals[0].Why, "gone does not exist") {
		t.Errorf("redrive of a job whose topic is gone: %+v", res)
	}
	if _, _, err := berthCLI(ctxT(t, time.Minute), "", "dlq", "redrive", "dlq.jobs", "--from-start", "--to", "nosuch", "-b", addr); err == nil {
		t.Errorf("--to a missing topic: no error")
	}
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// An interrupted redrive continues where it stopped: every job arrives,
// and at most one twice.
func TestDLQCLIRedriveResumes(t *testing.T) {
	addr, cl := startDLQBroker(t, 2)
	const n = 40
	parkJobs(t, cl, "dlq.jobs", 0, numberedJobs("jobs", 0, n/2, "rejected")...)
	parkJobs(t, cl, "dlq.jobs", 1, numberedJobs("jobs", n/2, n/2, "rejected")...)
	adm := tc.Admin(t, addr)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out, stderr string
		err         error
	}
	done := make(chan result, 1)
	go func() {
		out, stderr, err := berthCLI(ctx, "", "dlq", "redrive", "dlq.jobs", "--rate", "5", "--json", "-b", addr)
		done <- result{out, stderr, err}
	}()
	// Interrupt once some, not all, have moved: at 5 a second the 40
	// jobs take 8 s, so the interruption lands well before the end even
	// when this goroutine is slow to see the first 5 arrive.
	poll.Until(t, 30*time.Second, func() error {
		ends, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), "jobs")
		if err != nil {
			return err
		}
		if o, _ := ends.Lookup("jobs", 0); o.Offset < 5 {
			return fmt.Errorf("%d moved", o.Offset)
		}
		return nil
	})
	cancel()
	var first result
	select {
	case first = <-done:
	case <-time.After(time.Minute):
		t.Fatal("redrive did not stop after its context was cancelled")
	}
	var res redriveJSON
	if err := json.Unmarshal([]byte(first.out), &res); err != nil {
		t.Fatalf("interrupted redrive output %q: %v", first.out, err)
	}
	if first.err == nil || !res.Interrupted || res.Moved == 0 || res.Moved >= n {
		t.Fatalf("interrupted redrive: err %v, %+v", first.err, res)
	}
	t.Logf("interrupted after %d of %d; stderr:\n%s", res.Moved, n, first.stderr)

	berthJSON(t, &res, "dlq", "redrive", "dlq.jobs", "--rate", "1000", "-b", addr)
	if res.Interrupted || res.Failed != 0 || res.Error != "" {
		t.Fatalf("resumed redrive: %+v", res)
	}
	seen := map[string]int{}
	recs := jobsIn(t, addr, "jobs")
	for _, r := range recs {
		seen[string(r.Key)]++
	}
	dups := len(recs) - len(seen)
	for i := range n {
		if seen["k"+strconv.Itoa(i)] == 0 {
			t.Errorf("job k%d lost", i)
		}
	}
	if dups > 1 {
		t.Errorf("%d jobs redriven twice, want at most 1", dups)
	}
	// The redrive group's commits are at the end of the DLQ.
	committed, err := adm.FetchOffsets(ctxT(t, 10*time.Second), "berth-redrive.dlq.jobs")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if o, ok := committed.Lookup("dlq.jobs", p); !ok || o.At != n/2 {
			t.Errorf("committed offset of dlq.jobs-%d: %+v, want %d", p, o, n/2)
		}
	}
}

// purge deletes what was redriven (--redriven: never a job the redrive
// refused or skipped), what was parked before a time, or everything,
// after a confirmation, and only from DLQ topics.
func TestDLQCLIPurge(t *testing.T) {
	addr, cl := startDLQBroker(t, 1)
	jobs := numberedJobs("jobs", 0, 3, "rejected")
	old := time.Now().Add(-3 * time.Hour)
	jobs[0].parked, jobs[1].parked = old, old
	jobs[1].redrives = 3 // refused by the loop guard
	parkJobs(t, cl, "dlq.jobs", 0, jobs...)
	var res redriveJSON
	berthJSON(t, &res, "dlq", "redrive", "dlq.jobs", "-b", addr)
	if res.Moved != 2 || res.Refused != 1 {
		t.Fatalf("redrive: %+v", res)
	}
	parkJobs(t, cl, "dlq.jobs", 0, numberedJobs("jobs", 3, 2, "rejected")...)
	parked := func(want int64) {
		t.Helper()
		var list []struct {
			Topic  string `json:"topic"`
			Parked int64  `json:"parked"`
		}
		berthJSON(t, &list, "dlq", "list", "-b", addr)
		if len(list) != 1 || list[0].Parked != want {
			t.Errorf("dlq list: %+v, want %d parked", list, want)
		}
	}

	ctx := ctxT(t, time.Minute)
	if _, _, err := berthCLI(ctx, "", "dlq", "purge", "dlq.jobs", "-b", addr); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("purge without --yes from a non-terminal: %v", err)
	}
	if _, _, err := berthCLI(ctx, "", "dlq", "purge", "jobs", "--yes", "-b", addr); err == nil || !strings.Contains(err.Error(), "not a dead-letter topic") {
		t.Errorf("purge of a non-DLQ topic: %v", err)
	}
	parked(5)
	// Redriven: offsets 0 and 2, but 1 was refused: only 0 goes.
	out, _, err := berthCLI(ctx, "", "dlq", "purge", "dlq.jobs", "--redriven", "--yes", "-b", addr)
	if err != nil || !strings.Contains(out, "Purged 1 records") {
		t.Fatalf("purge --redriven (%v): %s", err, out)
	}
	parked(4)
	// Parked more than 2 h ago: the refused job.
	var purged struct {
		Removed int64 `json:"removed"`
	}
	berthJSON(t, &purged, "dlq", "purge", "dlq.jobs", "--before", "2h", "--yes", "-b", addr)
	if purged.Removed != 1 {
		t.Errorf("purge --before 2h: removed %d, want 1", purged.Removed)
	}
	parked(3)
	berthJSON(t, &purged, "dlq", "purge", "dlq.jobs", "--yes", "-b", addr)
	if purged.Removed != 3 {
		t.Errorf("purge: removed %d, want 3", purged.Removed)
	}
	parked(0)
	var left []dlqJobJSON
	berthJSON(t, &left, "dlq", "inspect", "dlq.jobs", "-b", addr)
	if len(left) != 0 {
		t.Errorf("inspect after purge: %+v", left)
	}
	if out, _, err := berthCLI(ctx, "", "dlq", "purge", "dlq.jobs", "--yes", "-b", addr); err != nil || !strings.Contains(out, "Nothing to purge") {
		t.Errorf("purge of an empty DLQ (%v): %s", err, out)
	}
}

// End to end with the broker's dead-letter writer: a worker rejects
// jobs, they are parked with their context; `queue describe` shows the
// DLQ depth, `dlq redrive` puts them back, the worker gets them again
// with redrive count 1 and rejects them again, and the loop guard then
// refuses them.
func TestDLQCLIRedriveFromShareGroup(t *testing.T) {
	addr := tc.Start(t).Addr()
	tc.CreateTopic(t, addr, "shipments", 1, nil)
	tc.CreateTopic(t, addr, "dlq.shipments", 1, dlqTopicConfigs())
	prod := tc.Client(t, addr)
	setGroupConfigs(t, prod, "packers",
		berthmsg.ConfigDLQTopicName, "dlq.shipments",
		share.ConfigAutoOffsetReset, "earliest")
	const n = 3
	for i := range n {
		produceSync(t, prod, &kgo.Record{Topic: "shipments", Key: []byte("ship-" + strconv.Itoa(i)), Value: []byte("parcel " + strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("acme")}}})
	}
	worker := shareConsumer(t, addr, "packers", "shipments")
	dlqEnd := func() int64 {
		ends, err := tc.Admin(t, addr).ListEndOffsets(ctxT(t, 10*time.Second), "dlq.shipments")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup("dlq.shipments", 0)
		return o.Offset
	}
	// rejectAll has the worker reject every job it gets until the DLQ
	// holds want records; it returns the jobs it got.
	rejectAll := func(want int64) []*kgo.Record {
		t.Helper()
		var got []*kgo.Record
		poll.Until(t, 60*time.Second, func() error {
			recs := pollFor(t, worker, 500*time.Millisecond)
			for _, r := range recs {
				r.Ack(kgo.AckReject)
			}
			got = append(got, recs...)
			if len(recs) > 0 {
				flushAcks(t, worker)
			}
			if e := dlqEnd(); e < want {
				return fmt.Errorf("%d records in the DLQ, want %d", e, want)
			}
			return nil
		})
		return got
	}
	rejectAll(n)

	var jobs []dlqJobJSON
	berthJSON(t, &jobs, "dlq", "inspect", "dlq.shipments", "-b", addr)
	if len(jobs) != n {
		t.Fatalf("inspect: %+v", jobs)
	}
	for i, j := range jobs {
		if j.SourceTopic != "shipments" || j.SourceOffset != int64(i) || j.Group != "packers" || j.Reason != "rejected" ||
			j.DeliveryCount != 1 || j.RedriveCount != 0 || j.Key == nil || *j.Key != "ship-"+strconv.Itoa(i) || j.Headers["tenant"] != "acme" {
			t.Errorf("parked job %d: %+v", i, j)
		}
	}
	var list []struct {
		Topic  string   `json:"topic"`
		Parked int64    `json:"parked"`
		Groups []string `json:"groups"`
	}
	berthJSON(t, &list, "dlq", "list", "-b", addr)
	if len(list) != 1 || list[0].Topic != "dlq.shipments" || list[0].Parked != n || len(list[0].Groups) != 1 || list[0].Groups[0] != "packers" {
		t.Errorf("dlq list: %+v", list)
	}
	var q queueJSON
	poll.Until(t, 30*time.Second, func() error {
		berthJSON(t, &q, "queue", "describe", "packers", "-b", addr)
		// Archived is at least 1, not n: internal/share counts a rejected
		// run of consecutive records once (SharePartition.archive is
		// called per run), so three records rejected in one
		// acknowledgement count 1 (also in berth_share_archived_records_total).
		if q.DLQTopic != "dlq.shipments" || q.DLQDepth != n || q.Archived < 1 {
			return fmt.Errorf("queue describe: DLQ %q depth %d, archived %d, want dlq.shipments, %d, >= 1", q.DLQTopic, q.DLQDepth, q.Archived, n)
		}
		return nil
	})

	var res redriveJSON
	berthJSON(t, &res, "dlq", "redrive", "dlq.shipments", "-b", addr)
	if res.Moved != n || res.Refused != 0 {
		t.Fatalf("redrive: %+v", res)
	}
	// The worker gets them back, with redrive count 1, and fails again.
	again := rejectAll(2 * n)
	counts := map[string]string{}
	for _, r := range again {
		counts[string(r.Key)] = headerValue(r, berthmsg.HeaderDLQRedriveCount)
	}
	for i := range n {
		if c := counts["ship-"+strconv.Itoa(i)]; c != "1" {
			t.Errorf("redriven job ship-%d: redrive count %q, want 1 (all: %v)", i, c, counts)
		}
	}
	// The loop guard stops a job that fails forever.
	berthJSON(t, &res, "dlq", "redrive", "dlq.shipments", "--max-redrives", "1", "-b", addr)
	if res.Moved != 0 || res.Refused != n || res.Total != n {
		t.Errorf("redrive with --max-redrives 1: %+v", res)
	}
}
