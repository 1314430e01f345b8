package tests

// The partition side of transactions (issue 6, first slice), end to end:
// transactional batches sent raw (Produce without a transactional id,
// which Berth refuses until its transaction coordinator lands), markers
// through WriteTxnMarkers as a coordinator would send them, and stock kgo
// consumers at both isolation levels.

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// txnBatch is a transactional batch carrying the given values.
func txnBatch(pid int64, epoch int16, seq int32, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		Magic: 2, Attributes: 0x10, LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(len(values)), Records: recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

func produceTxn(t *testing.T, cl *kgo.Client, topic string, pid int64, epoch int16, seq int32, values ...string) int64 {
	t.Helper()
	r := rawProduce(t, cl, topic, txnBatch(pid, epoch, seq, values...))
	if r.ErrorCode != 0 {
		t.Fatalf("transactional produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	return r.BaseOffset
}

// writeMarker ends producer pid's transaction on topic-0 and returns the
// partition's error code.
func writeMarker(t *testing.T, cl *kgo.Client, topic string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	return writeMarkerFrom(t, cl, topic, pid, epoch, commit, 0)
}

// writeMarkerFrom is writeMarker from a coordinator at coordinatorEpoch.
func writeMarkerFrom(t *testing.T, cl *kgo.Client, topic string, pid int64, epoch int16, commit bool, coordinatorEpoch int32) int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctxT(t, 30*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// latest is ListOffsets latest (-1) for topic-0 at an isolation level.
func latest(t *testing.T, cl *kgo.Client, topic string, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

// consumer reads topic from the start at an isolation level.
type consumer struct {
	cl  *kgo.Client
	got []string
}

func newConsumer(t *testing.T, addr, topic string, level kgo.IsolationLevel) *consumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &consumer{cl: cl}
}

// poll polls once for at most d and returns everything seen so far.
func (c *consumer) poll(t *testing.T, d time.Duration) []string {
	t.Helper()
	fs := c.cl.PollFetches(ctxT(t, d))
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		}
	})
	fs.EachRecord(func(r *kgo.Record) { c.got = append(c.got, string(r.Value)) })
	return c.got
}

// waitFor polls until the consumer has seen exactly want (in order), or
// fails after 20 s.
func (c *consumer) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := c.poll(t, 500*time.Millisecond)
		if len(got) >= len(want) {
			if !slices.Equal(got, want) {
				t.Fatalf("consumed %q, want %q", got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumed %q, want %q", got, want)
		}
	}
}

func TestTransactionsPartitionSide(t *testing.T) {
	dir := t.TempDir()
	n := tc.StartIn(t, dir)
	tc.CreateTopic(t, n.Addr(), "txn", 1, nil)
	cl := tc.Client(t, n.Addr())
	p1, e1 := initPID(t, cl)
	p2, e2 := initPID(t, cl)

	committed := newConsumer(t, n.Addr(), "txn", kgo.ReadCommitted())
	uncommitted := newConsumer(t, n.Addr(), "txn", kgo.ReadUncommitted())

	// An open transaction: read_uncommitted sees it, read_committed and
	// its latest offset stop before it.
	produceTxn(t, cl, "txn", p1, e1, 0, "a0", "a1") // 0-1
	uncommitted.waitFor(t, "a0", "a1")
	if got := committed.poll(t, 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("read_committed saw %q of an open transaction", got)
	}
	if u, c := latest(t, cl, "txn", 0), latest(t, cl, "txn", 1); u != 2 || c != 0 {
		t.Fatalf("latest offsets: read_uncommitted %d, read_committed %d; want 2 and 0", u, c)
	}

	// COMMIT: the records become visible.
	if ec := writeMarker(t, cl, "txn", p1, e1, true); ec != 0 { // 2
		t.Fatalf("commit marker: %v", kerr.ErrorForCode(ec))
	}
	committed.waitFor(t, "a0", "a1")
	if c := latest(t, cl, "txn", 1); c != 3 {
		t.Fatalf("read_committed latest after the commit %d, want 3", c)
	}

	// An aborted transaction interleaved with a committed one: a
	// read_committed consumer never sees the aborted records.
	produceTxn(t, cl, "txn", p2, e2, 0, "b0")                    // 3
	produceTxn(t, cl, "txn", p1, e1, 2, "c0")                    // 4
	if ec := writeMarker(t, cl, "txn", p2, e2, false); ec != 0 { // 5
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(ec))
	}
	if ec := writeMarker(t, cl, "txn", p1, e1, true); ec != 0 { // 6
		t.Fatalf("commit marker: %v", kerr.ErrorForCode(ec))
	}
	committed.waitFor(t, "a0", "a1", "c0")
	uncommitted.waitFor(t, "a0", "a1", "b0", "c0")

	// A marker from an older epoch is fenced.
	produceTxn(t, cl, "txn", p2, e2+1, 0, "d0") // 7, left open
	if ec := writeMarker(t, cl, "txn", p2, e2, false); ec != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stale marker: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(ec))
	}

	// A restart keeps the open transaction (the LSO) and the aborted list.
	if u, c := latest(t, cl, "txn", 0), latest(t, cl, "txn", 1); u != 8 || c != 7 {
		t.Fatalf("before restart: latest %d / %d, want 8 / 7", u, c)
	}
	n.Close()
	n = tc.StartIn(t, dir)
	cl = tc.Client(t, n.Addr())
	if u, c := latest(t, cl, "txn", 0), latest(t, cl, "txn", 1); u != 8 || c != 7 {
		t.Fatalf("after restart: latest %d / %d, want 8 / 7", u, c)
	}
	newConsumer(t, n.Addr(), "txn", kgo.ReadCommitted()).waitFor(t, "a0", "a1", "c0")
	if ec := writeMarker(t, cl, "txn", p2, e2+1, false); ec != 0 { // 8
		t.Fatalf("abort after restart: %v", kerr.ErrorForCode(ec))
	}
	if c := latest(t, cl, "txn", 1); c != 9 {
		t.Fatalf("read_committed latest after the abort %d, want 9", c)
	}
	after := newConsumer(t, n.Addr(), "txn", kgo.ReadCommitted())
	after.waitFor(t, "a0", "a1", "c0")
	produceSync(t, cl, &kgo.Record{Topic: "txn", Value: []byte("plain")})
	after.waitFor(t, "a0", "a1", "c0", "plain")
}

// SIGKILL, so no clean close and no fresh producer snapshot: recovery
// rebuilds the open transaction and the aborted list from the log.
func TestTransactionsSurviveCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a broker process")
	}
	dir := t.TempDir()
	p := tc.StartProcess(t, dir)
	tc.CreateTopic(t, p.Addr(), "txn", 1, nil)
	cl := tc.Client(t, p.Addr())
	p1, e1 := initPID(t, cl)
	p2, e2 := initPID(t, cl)
	produceTxn(t, cl, "txn", p1, e1, 0, "a0", "a1")              // 0-1
	produceTxn(t, cl, "txn", p2, e2, 0, "b0")                    // 2
	if ec := writeMarker(t, cl, "txn", p1, e1, false); ec != 0 { // 3: abort a
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(ec))
	}
	produceTxn(t, cl, "txn", p1, e1, 2, "c0")                   // 4, left open with b
	if ec := writeMarker(t, cl, "txn", p2, e2, true); ec != 0 { // 5: commit b
		t.Fatalf("commit marker: %v", kerr.ErrorForCode(ec))
	}
	if u, c := latest(t, cl, "txn", 0), latest(t, cl, "txn", 1); u != 6 || c != 4 {
		t.Fatalf("before the crash: latest %d / %d, want 6 / 4", u, c)
	}
	cl.Close()
	p.Kill()
	p.Restart()
	cl = tc.Client(t, p.Addr())
	if u, c := latest(t, cl, "txn", 0), latest(t, cl, "txn", 1); u != 6 || c != 4 {
		t.Fatalf("after the crash: latest %d / %d, want 6 / 4", u, c)
	}
	newConsumer(t, p.Addr(), "txn", kgo.ReadCommitted()).waitFor(t, "b0")
	if ec := writeMarker(t, cl, "txn", p1, e1, true); ec != 0 { // 6: commit c
		t.Fatalf("commit after the crash: %v", kerr.ErrorForCode(ec))
	}
	newConsumer(t, p.Addr(), "txn", kgo.ReadCommitted()).waitFor(t, "b0", "c0")
	newConsumer(t, p.Addr(), "txn", kgo.ReadUncommitted()).waitFor(t, "a0", "a1", "b0", "c0")
}
