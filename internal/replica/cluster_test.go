package replica_test

// Replication through the real Kafka path: three brokers (replica manager,
// handlers and a Kafka listener each, on loopback ports) share one
// metadata controller, and a stock client (kgo) produces with acks=all.
// The metadata quorum is not what is tested here; leadership changes are
// proposed by the test as the controller would.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/cluster"
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/handler"
	"github.com/berthmq/berth/internal/latency"
	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/poll"
	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
)

type testBroker struct {
	id   int32
	dir  string
	ln   net.Listener
	addr string
	mgr  *replica.Manager
	srv  *server.Server
	stop chan struct{}
	done chan struct{}
}

type testCluster struct {
	t       *testing.T
	ctrl    *metadata.Controller
	sup     *cluster.Supervisor // the controller's policies (reassignment completion)
	brokers []*testBroker
	lagMax  time.Duration
}

// alwaysLive is the supervisor's liveness in these tests: every broker
// counts as heard from (fencing is tested in internal/cluster).
type alwaysLive struct{}

func (alwaysLive) LastSeen(int32) (time.Time, bool) { return time.Now(), true }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	root := t.TempDir()
	mc := metadata.Config{Dir: filepath.Join(root, "meta"), NodeID: 1, TickInterval: 10 * time.Millisecond, Logger: quietLogger()}
	ctrl, err := metadata.Open(mc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ctrl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, ctrl: ctrl, lagMax: time.Second}
	c.sup, err = cluster.New(ctrl, alwaysLive{}, cluster.Config{CheckInterval: 50 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	supCtx, supStop := context.WithCancel(context.Background())
	supDone := make(chan struct{})
	go func() { defer close(supDone); c.sup.Run(supCtx) }()
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b := &testBroker{id: int32(i), dir: filepath.Join(root, "broker-"+strconv.Itoa(i)), ln: ln, addr: ln.Addr().String()}
		c.brokers = append(c.brokers, b)
		host, port, _ := net.SplitHostPort(b.addr)
		p, _ := strconv.Atoi(port)
		if err := ctrl.Propose(ctx, metadata.Record{RegisterBroker: &metadata.RegisterBroker{ID: b.id, Host: host, Port: int32(p)}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range c.brokers {
		c.startBroker(b)
	}
	t.Cleanup(func() {
		supStop()
		<-supDone
		for _, b := range c.brokers {
			c.stopBroker(b)
		}
		ctrl.Close()
	})
	return c
}

func (c *testCluster) startBroker(b *testBroker) {
	t := c.t
	if b.ln == nil {
		ln, err := net.Listen("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		b.ln = ln
	}
	b.mgr = replica.NewManager(replica.ManagerConfig{
		Dir: b.dir, NodeID: b.id, Fsync: true,
		Resolve: func(t *metadata.Topic) replica.TopicConfig {
			cfgs := t.Configs
			tc := replica.TopicConfig{Log: blog.DefaultConfig(), MaxMessageBytes: 1 << 20, MinInsyncReplicas: 1,
				TimestampBeforeMs: 1 << 62, TimestampAfterMs: 1 << 62}
			if v, ok := cfgs["min.insync.replicas"]; ok {
				tc.MinInsyncReplicas, _ = strconv.Atoi(v)
			}
			return tc
		},
		Logger:        quietLogger(),
		ReplicaLagMax: c.lagMax,
		ThrottleRate: func() int64 {
			v, _ := strconv.ParseInt(c.ctrl.Image().BrokerConfigs["follower.replication.throttled.rate"], 10, 64)
			return v
		},
		ReplicaFetchWait: 100 * time.Millisecond,
		AlterPartition: func(ctx context.Context, topic string, part int32, isr []int32, epoch int32) error {
			return c.ctrl.Propose(ctx, metadata.Record{PartitionChange: &metadata.PartitionChange{
				Topic: topic, Partition: part, ISR: isr, ExpectPartitionEpoch: &epoch}})
		},
	})
	if err := b.mgr.Apply(c.ctrl.Image()); err != nil {
		t.Fatal(err)
	}
	b.mgr.Start(context.Background())
	h := handler.New(handler.Config{
		NodeID: b.id, Broker: config.Defaults(), Controller: c.ctrl, Replicas: b.mgr, Logger: quietLogger(),
		Reassigner: c.sup,
	})
	b.srv = server.New(b.ln, h, server.Config{Logger: quietLogger()})
	go b.srv.Serve()
	ch, unsub := c.ctrl.Subscribe()
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.done)
		defer unsub()
		for {
			select {
			case <-b.stop:
				return
			case <-ch:
				b.mgr.Apply(c.ctrl.Image())
			}
		}
	}()
}

func (c *testCluster) stopBroker(b *testBroker) {
	if b.srv == nil {
		return
	}
	b.srv.Close()
	close(b.stop)
	<-b.done
	b.mgr.Close()
	b.srv, b.ln = nil, nil
}

func (c *testCluster) seeds() []string {
	var s []string
	for _, b := range c.brokers {
		s = append(s, b.addr)
	}
	return s
}

func (c *testCluster) createTopic(name string, replicas [][]int32, configs map[string]string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.ctrl.Propose(ctx, metadata.Record{CreateTopic: &metadata.CreateTopic{
		Name: name, ID: metadata.NewTopicID(), Partitions: int32(len(replicas)), Replicas: replicas, Configs: configs}})
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *testCluster) partition(topic string) metadata.Partition {
	return c.ctrl.Image().Topic(topic).Partitions[0]
}

func (c *testCluster) changeLeader(topic string, leader int32, isr []int32) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.ctrl.Propose(ctx, metadata.Record{PartitionChange: &metadata.PartitionChange{
		Topic: topic, Partition: 0, Leader: &leader, ISR: isr}})
	if err != nil {
		c.t.Fatal(err)
	}
}

func produce(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("value-%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func consumeAll(t *testing.T, seeds []string, topic string, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(got), want)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// logEnd is a broker's log end offset for topic-0.
func (c *testCluster) logEnd(b *testBroker, topic string) int64 {
	p := b.mgr.Get(topic, 0)
	if p == nil {
		return -1
	}
	return p.LogEndOffset()
}

func TestReplicationAcksAllReachesEveryReplica(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("orders", [][]int32{{0, 1, 2}}, map[string]string{"min.insync.replicas": "2"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce(t, cl, "orders", 0, 500)

	// acks=all answered: every ISR member holds every record.
	for _, b := range c.brokers {
		if got := c.logEnd(b, "orders"); got != 500 {
			t.Errorf("broker %d: log end %d after 500 acknowledged records, want 500", b.id, got)
		}
	}

	// A follower that stops holds acks=all back until the leader has
	// removed it from the ISR (replica.lag.time.max.ms), never less.
	c.stopBroker(c.brokers[2])
	produce(t, cl, "orders", 500, 1)
	if isr := c.partition("orders").ISR; !slices.Equal(isr, []int32{0, 1}) {
		t.Fatalf("acks=all answered while the ISR was %v, which includes the stopped broker 2", isr)
	}
	for _, b := range c.brokers[:2] {
		if got := c.logEnd(b, "orders"); got != 501 {
			t.Errorf("broker %d: log end %d, want 501", b.id, got)
		}
	}
	got := consumeAll(t, c.seeds()[:2], "orders", 501)
	for i, v := range got {
		if want := fmt.Sprintf("value-%d", i); v != want {
			t.Fatalf("record %d = %q, want %q", i, v, want)
		}
	}
}

func TestReplicationISRShrinksAndExpands(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("jobs", [][]int32{{0, 1, 2}}, map[string]string{"min.insync.replicas": "3"})
	// The first records go through a client that retries: the leader may
	// not have opened the new partition yet (NOT_LEADER_OR_FOLLOWER).
	cl0, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl0.Close()
	produce(t, cl0, "jobs", 0, 10)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(0), kgo.ProduceRequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// A follower stops: after replica.lag.time.max.ms the leader drops it
	// from the ISR, and acks=all is refused below min.insync.replicas.
	c.stopBroker(c.brokers[2])
	poll.Until(t, 10*time.Second, func() error {
		if isr := c.partition("jobs").ISR; !slices.Equal(isr, []int32{0, 1}) {
			return fmt.Errorf("ISR %v, want [0 1]", isr)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "jobs", Value: []byte("refused")}).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("produce with ISR below min.insync.replicas: %v, want NOT_ENOUGH_REPLICAS", err)
	}

	// It returns, catches up, and rejoins the ISR.
	c.startBroker(c.brokers[2])
	poll.Until(t, 10*time.Second, func() error {
		if isr := c.partition("jobs").ISR; !slices.Equal(isr, []int32{0, 1, 2}) {
			return fmt.Errorf("ISR %v, want [0 1 2]", isr)
		}
		return nil
	})
	cl2, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	produce(t, cl2, "jobs", 10, 10)
	if got := c.logEnd(c.brokers[2], "jobs"); got != 20 {
		t.Fatalf("returned follower's log end %d, want 20", got)
	}
}

func TestReplicationLeaderChangeKeepsAcknowledgedRecords(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("ledger", [][]int32{{0, 1, 2}}, map[string]string{"min.insync.replicas": "2"})
	// A short metadata age: after its leader's broker goes away, the
	// client looks for the new leader at once rather than after kgo's
	// default 5 s.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce(t, cl, "ledger", 0, 100)

	// The leader's broker goes away; the controller elects broker 1 from
	// the ISR with a new leader epoch.
	c.stopBroker(c.brokers[0])
	c.changeLeader("ledger", 1, []int32{1, 2})
	produce(t, cl, "ledger", 100, 100)

	// The old leader returns as a follower and converges on the new
	// leader's log.
	c.startBroker(c.brokers[0])
	poll.Until(t, 10*time.Second, func() error {
		if got := c.logEnd(c.brokers[0], "ledger"); got != 200 {
			return fmt.Errorf("old leader's log end %d, want 200", got)
		}
		return nil
	})
	got := consumeAll(t, c.seeds(), "ledger", 200)
	for i, v := range got {
		if want := fmt.Sprintf("value-%d", i); v != want {
			t.Fatalf("record %d = %q, want %q", i, v, want)
		}
	}
	if p := c.brokers[0].mgr.Get("ledger", 0); p.IsLeader() {
		t.Fatal("old leader still thinks it leads")
	}

	// A produce sent to the old leader is refused with the new leader's
	// id, epoch and address (KIP-951).
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "ledger"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = oneBatch()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kr, err := replica.PeerRequest(ctx, c.brokers[0].addr, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kr.(*kmsg.ProduceResponse)
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to the old leader: error %d, want NOT_LEADER_OR_FOLLOWER", sp.ErrorCode)
	}
	mp := c.partition("ledger")
	if sp.CurrentLeader.LeaderID != 1 || sp.CurrentLeader.LeaderEpoch != mp.LeaderEpoch {
		t.Fatalf("current leader %+v, want broker 1 at epoch %d", sp.CurrentLeader, mp.LeaderEpoch)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port) != c.brokers[1].addr {
		t.Fatalf("node endpoints %+v, want broker 1 at %s", resp.Brokers, c.brokers[1].addr)
	}
}

// oneBatch is a valid uncompressed record batch with one record.
func oneBatch() []byte {
	rec := kmsg.Record{Value: []byte("x")}
	rb := kmsg.RecordBatch{Magic: 2, NumRecords: 1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli()}
	rb.Records = rec.AppendTo(nil)
	b := rb.AppendTo(nil)
	// Length covers everything after itself; the CRC everything after
	// the attributes' start.
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestReplicationReplicaMovedAwayIsDeleted(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("moving", [][]int32{{0, 1, 2}}, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce(t, cl, "moving", 0, 50)
	dir := c.brokers[0].mgr.Get("moving", 0).Log().Dir()

	// The controller moves the partition off broker 0 (the last step of
	// a reassignment): broker 0 stops serving it and deletes its files.
	leader := int32(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ctrl.Propose(ctx, metadata.Record{PartitionChange: &metadata.PartitionChange{
		Topic: "moving", Partition: 0, Leader: &leader, ISR: []int32{1, 2}, Replicas: []int32{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if c.brokers[0].mgr.Get("moving", 0) != nil {
			return errors.New("broker 0 still holds the replica")
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			return fmt.Errorf("replica directory %s still there (%v)", dir, err)
		}
		return nil
	})
	produce(t, cl, "moving", 50, 50)
	if got := consumeAll(t, c.seeds(), "moving", 100); len(got) != 100 {
		t.Fatalf("consumed %d records, want 100", len(got))
	}
}

// A partition moves from brokers 0,1 to 1,2 with AlterPartitionReassignments
// (kadm, as kafka-reassign-partitions.sh would): broker 2 copies the log
// (throttled by follower.replication.throttled.rate), the controller
// completes the move once it is in sync, and broker 0 drops its copy.
func TestReplicationReassignment(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("moves", [][]int32{{0, 1}}, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce(t, cl, "moves", 0, 300) // about 3.5 KB of batches
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// 1 KB/s: copying the partition takes a few seconds.
	if err := c.ctrl.Propose(ctx, metadata.Record{SetBrokerConfigs: &metadata.SetBrokerConfigs{
		Set: map[string]string{"follower.replication.throttled.rate": "1000"}}}); err != nil {
		t.Fatal(err)
	}

	adm := kadm.NewClient(cl)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moves", 0, []int32{1, 2})
	start := time.Now()
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); err != nil {
		t.Fatalf("reassignment refused: %v", err)
	}
	moves := kadm.TopicsSet{}
	moves.Add("moves", 0)
	listed, err := adm.ListPartitionReassignments(ctx, moves)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := listed["moves"][0]; !ok || !slices.Equal(r.AddingReplicas, []int32{2}) || !slices.Equal(r.RemovingReplicas, []int32{0}) {
		t.Fatalf("in progress: %+v (found %v)", r, ok)
	}
	poll.Until(t, 20*time.Second, func() error {
		p := c.partition("moves")
		if p.Reassigning() || !slices.Equal(p.Replicas, []int32{1, 2}) {
			return fmt.Errorf("partition %+v", p)
		}
		return nil
	})
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("a throttled copy of ~3.5 KB at 1 KB/s took %v", took)
	}
	listed, err = adm.ListPartitionReassignments(ctx, moves)
	if err != nil || len(listed) != 0 {
		t.Fatalf("reassignments after completion: %+v %v", listed, err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if c.brokers[0].mgr.Get("moves", 0) != nil {
			return errors.New("broker 0 still holds its replica")
		}
		return nil
	})
	if got := c.logEnd(c.brokers[2], "moves"); got != 300 {
		t.Fatalf("new replica's log end %d, want 300", got)
	}
	produce(t, cl, "moves", 300, 10)
	if got := consumeAll(t, c.seeds(), "moves", 310); len(got) != 310 {
		t.Fatalf("consumed %d, want 310", len(got))
	}

	// Cancelling when nothing is in progress is refused with Kafka's code.
	var cancelReq kadm.AlterPartitionAssignmentsReq
	cancelReq.CancelAssign("moves", 0)
	res, err = adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel with nothing in progress: %v", err)
	}
}

// After a restart, a leader starts from its checkpointed high watermark:
// committed records are readable at once, before any follower fetched.
func TestReplicationHighWatermarkSurvivesRestart(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("durable", [][]int32{{0, 1, 2}}, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce(t, cl, "durable", 0, 100)
	poll.Until(t, 10*time.Second, func() error {
		for _, b := range c.brokers {
			if hw := b.mgr.Get("durable", 0).HighWatermark(); hw != 100 {
				return fmt.Errorf("broker %d: high watermark %d", b.id, hw)
			}
		}
		return nil
	})
	for _, b := range c.brokers {
		c.stopBroker(b)
	}
	// Only the leader comes back: no follower fetches, yet its high
	// watermark is where it was.
	c.startBroker(c.brokers[0])
	if hw := c.brokers[0].mgr.Get("durable", 0).HighWatermark(); hw != 100 {
		t.Fatalf("leader's high watermark after restart %d, want 100", hw)
	}
}

// TestReplicationISRWaitIsCounted: the leader counts, per batch, the time
// from its own fsync to the high watermark passing the batch (isr_wait),
// which is where a replicated acks=all produce spends its follower round
// trip; followers count none.
func TestReplicationISRWaitIsCounted(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("isr", [][]int32{{0, 1, 2}}, map[string]string{"min.insync.replicas": "2"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce(t, cl, "isr", 0, 200)
	leader := c.partition("isr").Leader
	for _, b := range c.brokers {
		_, n, sum := b.mgr.Metrics.Stages[latency.ISRWait].Snapshot()
		_, fs, _ := b.mgr.Metrics.Stages[latency.Fsync].Snapshot()
		switch {
		case b.id == leader && (n == 0 || sum <= 0 || n > fs):
			t.Errorf("leader %d: isr_wait counted %d batches (%.6f s) against %d fsynced: want each fsynced batch once, taking time", b.id, n, sum, fs)
		case b.id != leader && n != 0:
			t.Errorf("follower %d counted %d isr_wait batches", b.id, n)
		}
		for _, st := range []latency.Stage{latency.ReplicaWrite, latency.ReplicaFsync, latency.ReplicaAck} {
			count := func() uint64 { _, n, _ := b.mgr.Metrics.Stages[st].Snapshot(); return n }
			if b.id == leader {
				if n := count(); n != 0 {
					t.Errorf("leader %d counted %d in follower stage %s", b.id, n, st)
				}
				continue
			}
			// The last fetched data's ack is the fetch after its fsync.
			for deadline := time.Now().Add(10 * time.Second); count() == 0 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			if count() == 0 {
				t.Errorf("follower %d counted nothing in stage %s", b.id, st)
			}
		}
		if b.id != leader && fs != 0 {
			t.Errorf("follower %d counted %d batches in the leader's fsync stage (its own are replica_fsync)", b.id, fs)
		}
	}
}
