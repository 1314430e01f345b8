package tests

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// The fault tests' bounds, with the test cluster's timeouts
// (tc.ClusterArgs: broker.session.timeout.ms and replica.lag.time.max.ms
// 2000, controller.quorum.election.timeout.ms 300).
const (
	faultTopic = "faults"
	// resumeBound: writes to every partition resume this soon after a
	// leader dies (fencing after 2 s, an election, the clients' metadata
	// refresh).
	resumeBound = 20 * time.Second
	// rejoinBound: a restarted or resumed broker is back in every ISR.
	rejoinBound = 30 * time.Second
)

// faultRig is a three-node cluster with an RF=3, min.insync.replicas=2
// topic, a seeded random source and the history of the run.
type faultRig struct {
	t      *testing.T
	c      *tc.Cluster
	h      *tc.History
	rng    *rand.Rand
	parts  int32
	direct map[int32]*kgo.Client // by node id; -id: with acks=1
}

// faultSeed is $BERTH_FAULT_SEED or a new seed, logged for replay.
func faultSeed(t *testing.T) int64 {
	seed := time.Now().UnixNano()
	if s := os.Getenv("BERTH_FAULT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("BERTH_FAULT_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with BERTH_FAULT_SEED=%d)", seed, seed)
	return seed
}

func newFaultRig(t *testing.T, parts int32, args ...string) *faultRig {
	t.Helper()
	return newFaultRigOn(t, 3, nil, parts, args...)
}

// newFaultRigOn is newFaultRig with n nodes and, when replicas is not
// nil, every partition on those three brokers (the first leading).
func newFaultRigOn(t *testing.T, n int, replicas []int32, parts int32, args ...string) *faultRig {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster of berth processes")
	}
	seed := faultSeed(t)
	r := &faultRig{t: t, h: tc.NewHistory(seed), rng: rand.New(rand.NewPCG(uint64(seed), 0)),
		parts: parts, direct: map[int32]*kgo.Client{}}
	r.c = tc.StartCluster(t, n, args...)
	ctx := ctxT(t, 30*time.Second)
	cl := tc.Client(t, r.c.Addrs()[0])
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = faultTopic
	rt.NumPartitions, rt.ReplicationFactor = parts, 3
	if replicas != nil {
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		for p := range parts {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = p, replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
	}
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("2")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("creating %s: %v", faultTopic, err)
	}
	r.waitFullISR(r.c.IDs()[0], rejoinBound)
	r.h.Fault("cluster up: %v; topic %s: %d partitions, RF 3 (replicas %v), min.insync.replicas 2", r.c.Addrs(), faultTopic, parts, replicas)
	return r
}

// partState is a partition as one node's metadata describes it.
type partState struct {
	Leader, Epoch int32
	Replicas, ISR []int32
}

// meta asks node id (and only it) for the topic's metadata.
func (r *faultRig) meta(id int32, topic string) (map[int32]partState, int32, error) {
	cl := r.direct[id]
	if cl == nil {
		cl = r.c.Direct(r.t, id, kgo.RequestRetries(0))
		r.direct[id] = cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := tc.DirectRequest(ctx, cl, req)
	if err != nil {
		return nil, -1, fmt.Errorf("metadata from node %d: %w", id, err)
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != 0 {
		return nil, mr.ControllerID, fmt.Errorf("metadata from node %d: topic %s missing or failed: %+v", id, topic, mr.Topics)
	}
	out := map[int32]partState{}
	for _, p := range mr.Topics[0].Partitions {
		out[p.Partition] = partState{Leader: p.Leader, Epoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR}
	}
	return out, mr.ControllerID, nil
}

// state is meta for the fault topic, failing the test on error.
func (r *faultRig) state(id int32) map[int32]partState {
	r.t.Helper()
	var st map[int32]partState
	r.waitFor(10*time.Second, fmt.Sprintf("metadata from node %d", id), func() error {
		var err error
		st, _, err = r.meta(id, faultTopic)
		return err
	})
	return st
}

// waitFor polls fn every 20 ms until it returns nil; past within it fails
// the test with the history written out.
func (r *faultRig) waitFor(within time.Duration, what string, fn func() error) time.Duration {
	r.t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	for {
		err := fn()
		if err == nil {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			r.h.Fault("gave up waiting for %s: %v", what, err)
			r.h.Fail(r.t, r.c.Dir, "%s: not within %v: %v", what, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFullISR waits until node from reports every partition with a leader
// and all three replicas in its ISR.
func (r *faultRig) waitFullISR(from int32, within time.Duration) time.Duration {
	r.t.Helper()
	return r.waitFor(within, fmt.Sprintf("full ISR of every partition (asking node %d)", from), func() error {
		st, _, err := r.meta(from, faultTopic)
		if err != nil {
			return err
		}
		for p := range r.parts {
			s := st[p]
			if s.Leader < 0 || len(s.ISR) != 3 {
				return fmt.Errorf("partition %d: %+v", p, s)
			}
		}
		return nil
	})
}

// ackGrace: an answer the client reads this soon after a fault may have
// been sent before it.
const ackGrace = 100 * time.Millisecond

// downAckGrace: an answer the client reads this soon after brokers were
// killed may be for a write they had fetched before they died (decided
// then, but slow to arrive on a loaded machine). It is half the test
// clusters' replica.lag.time.max.ms and broker.session.timeout.ms (2 s):
// no ISR can shrink sooner, so an answer wrongly given when one does is
// still caught.
const downAckGrace = time.Second

// acksAfterKill counts, per partition, the acknowledgements that no
// broker may give once brokers were killed at killed leaving too few
// replicas: of a record produced after the kill, whenever its answer
// came (the dead replicas never saw it), and any answer arriving more
// than downAckGrace after the kill.
func (r *faultRig) acksAfterKill(killed time.Time) map[int32]int {
	n := r.h.AcksSentAfter(killed)
	for p, c := range r.h.AcksAfter(killed.Add(downAckGrace)) {
		n[p] += c
	}
	return n
}

// waitAcks waits until every partition (or those listed) has an
// acknowledgement after t+ackGrace (failing the test if that takes longer than
// within after t), and returns how long after t the last of those first
// acknowledgements came.
func (r *faultRig) waitAcks(after time.Time, within time.Duration, what string, parts ...int32) time.Duration {
	r.t.Helper()
	if parts == nil {
		for p := range r.parts {
			parts = append(parts, p)
		}
	}
	r.waitFor(within-time.Since(after), what, func() error {
		n := r.h.AcksAfter(after.Add(ackGrace))
		for _, p := range parts {
			if n[p] == 0 {
				return fmt.Errorf("no ack on partition %d since %v", p, after.Format("15:04:05.000"))
			}
		}
		return nil
	})
	// The bound holds for the last partition's first ack after t.
	var d time.Duration
	first := r.h.FirstAcksAfter(after.Add(ackGrace))
	for _, p := range parts {
		d = max(d, first[p].Sub(after))
	}
	r.h.Fault("%s: after %v", what, d.Round(time.Millisecond))
	return d
}

// startLoad starts three keyed producers and waits until every partition
// has acknowledged a write.
func (r *faultRig) startLoad() *tc.Load {
	r.t.Helper()
	start := time.Now()
	l := tc.StartLoad(r.t, r.h, r.c.Addrs(), faultTopic, 3, 8, 100)
	r.waitAcks(start, 20*time.Second, "load running")
	return l
}

// finish stops the load, reads the whole topic back and checks the
// history; any violation fails the test with the history written out.
func (r *faultRig) finish(l *tc.Load, extra ...func([]tc.Consumed) []string) {
	r.t.Helper()
	l.Stop(30 * time.Second)
	r.h.Fault("load stopped")
	ctx := ctxT(r.t, 60*time.Second)
	// After a leader change the new leader's high watermark may trail the
	// old one's until the followers fetch from it; wait (bounded) until it
	// covers every acknowledged offset. If it never does, the records are
	// not readable and the check below reports them missing.
	ackedEnd := map[int32]int64{}
	for _, a := range r.h.Acks() {
		ackedEnd[a.Partition] = max(ackedEnd[a.Partition], a.Offset+1)
	}
	adm := kadm.NewClient(tc.Client(r.t, r.c.Addrs()[0], kgo.SeedBrokers(r.c.Addrs()...)))
	ends := map[int32]int64{}
	waitStart := time.Now()
	deadline := waitStart.Add(20 * time.Second)
	for {
		lo, err := adm.ListEndOffsets(ctxT(r.t, 5*time.Second), faultTopic)
		if err == nil {
			err = lo.Error()
		}
		short := err != nil
		if err == nil {
			lo.Each(func(o kadm.ListedOffset) {
				ends[o.Partition] = o.Offset
				short = short || o.Offset < ackedEnd[o.Partition]
			})
		}
		if !short || time.Now().After(deadline) {
			if err != nil {
				r.h.Fail(r.t, r.c.Dir, "end offsets: %v", err)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.h.Fault("reading back up to %v (acknowledged up to %v; waited %v)", ends, ackedEnd, time.Since(waitStart).Round(time.Millisecond))
	got, err := tc.ConsumeTo(ctx, r.c.Addrs(), faultTopic, ends)
	if err != nil {
		r.h.Fail(r.t, r.c.Dir, "reading back: %v", err)
	}
	r.h.SetConsumed(got)
	bad := r.h.Check()
	for _, f := range extra {
		bad = append(bad, f(got)...)
	}
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20], fmt.Sprintf("... and %d more", len(bad)-20))
		}
		r.h.Fail(r.t, r.c.Dir, "history check failed:\n%s", strings.Join(bad, "\n"))
	}
	r.t.Logf("checked: %d records acknowledged, %d read back; faults:\n%s", len(r.h.Acks()), len(got), r.h.Schedule())
	if os.Getenv("BERTH_FAULT_HISTORY_DIR") != "" {
		r.t.Logf("history: %s", r.h.Write(r.t, r.c.Dir))
	}
}

// rawProduceTo sends one acks=all batch of values to partition p through
// node id only, with the given broker-side timeout, and returns the error
// code (or the request error, e.g. a timeout).
func (r *faultRig) rawProduceTo(id int32, topicID [16]byte, p int32, timeout time.Duration, values ...string) (int16, error) {
	code, _, err := r.rawProduceAcks(id, -1, topicID, p, timeout, values...)
	return code, err
}

// rawProduceAcks is rawProduceTo with the given acks; it also returns the
// batch's base offset.
func (r *faultRig) rawProduceAcks(id int32, acks int16, topicID [16]byte, p int32, timeout time.Duration, values ...string) (int16, int64, error) {
	cl := r.direct[id]
	if cl == nil {
		cl = r.c.Direct(r.t, id, kgo.RequestRetries(0))
		r.direct[id] = cl
	}
	if acks == 1 {
		// kgo rewrites a produce request's acks to its client's setting.
		if cl = r.direct[-id]; cl == nil {
			cl = r.c.Direct(r.t, id, kgo.RequestRetries(0), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			r.direct[-id] = cl
		}
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, int32(timeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = faultTopic, topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = valuesBatch(values)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+3*time.Second)
	defer cancel()
	resp, err := tc.DirectRequest(ctx, cl, req)
	if err != nil {
		return -1, -1, err
	}
	rp0 := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	return rp0.ErrorCode, rp0.BaseOffset, nil
}

// valuesBatch is a v2 record batch (no producer id) of the values, keyed
// by their prefix before the last '-'.
func valuesBatch(values []string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Key: []byte(v[:max(0, strings.LastIndexByte(v, '-'))]), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(values)), Records: recs}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// topicID asks node id for the fault topic's id.
func (r *faultRig) topicID(id int32) [16]byte {
	r.t.Helper()
	var tid [16]byte
	r.waitFor(10*time.Second, "topic id", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		td, err := kadm.NewClient(r.c.Direct(r.t, id)).ListTopics(ctx, faultTopic)
		if err != nil {
			return err
		}
		tid = td[faultTopic].ID
		return td[faultTopic].Err
	})
	return tid
}

// metric reads one sample of node id's /metrics, e.g.
// `berth_partition_log_end_offset{partition="0",topic="faults"}`.
func (r *faultRig) metric(id int32, series string) (float64, error) {
	addr := r.c.Node(id).HTTPAddr()
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("node %d: no %s in /metrics", id, series)
}

func errName(code int16, err error) string {
	if err != nil {
		return err.Error()
	}
	if code == 0 {
		return "OK"
	}
	return kerr.ErrorForCode(code).Error()
}

// others returns the node ids other than the given ones.
func (r *faultRig) others(not ...int32) []int32 {
	var out []int32
	for _, id := range r.c.IDs() {
		if !slices.Contains(not, id) {
			out = append(out, id)
		}
	}
	return out
}

// checkReadable reads the whole topic through the given nodes while the
// load may still run, and fails unless every record acknowledged before
// the read began is there with its value.
func (r *faultRig) checkReadable(through ...int32) int {
	r.t.Helper()
	acks := r.h.Acks()
	var seeds []string
	for _, id := range through {
		seeds = append(seeds, r.c.Node(id).KafkaAddr)
	}
	ends := map[int32]int64{}
	for _, a := range acks {
		ends[a.Partition] = max(ends[a.Partition], a.Offset+1)
	}
	got, err := tc.ConsumeTo(ctxT(r.t, 30*time.Second), seeds, faultTopic, ends)
	if err != nil {
		r.h.Fail(r.t, r.c.Dir, "reading through nodes %v: %v", through, err)
	}
	at := map[string]string{}
	for _, g := range got {
		at[fmt.Sprintf("%d/%d", g.Partition, g.Offset)] = g.Value
	}
	for _, a := range acks {
		if v := at[fmt.Sprintf("%d/%d", a.Partition, a.Offset)]; v != a.Value {
			r.h.Fail(r.t, r.c.Dir, "acked %s at %d/%d reads as %q through nodes %v", a.Value, a.Partition, a.Offset, v, through)
		}
	}
	return len(got)
}
