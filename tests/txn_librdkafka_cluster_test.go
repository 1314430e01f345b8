package tests

// librdkafka's transactions on a three-node cluster: confluent-kafka-python
// runs a consume-transform-produce loop (testdata/confluent_txn_ctp.py:
// read_committed input, output and send_offsets_to_transaction in one
// transaction per poll, some aborted on purpose and their input read
// again), and every input record yields exactly one committed output
// record, with the group's offsets at the input's end;
// also with the leader of an output partition, the transaction coordinator
// or the script itself killed in the middle of the run (the script aborts
// and rewinds on abortable errors, and is started again when it exits with
// an error or is killed).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

const (
	ctpRecords = 300 // input records, over three partitions
	ctpBatch   = 10  // at most this many per transaction
)

func TestTxnLibrdkafkaConsumeTransformProduceCluster(t *testing.T) {
	c, py := startCTPCluster(t)
	// Every seventh transaction is aborted on purpose and its input read
	// again from the committed offsets.
	r := runCTP(t, c, py, 7, nil)
	if r.runs != 1 || r.aborts == 0 {
		t.Fatalf("the script ran %d times without a fault (want once) and aborted %d transactions on purpose (want some)", r.runs, r.aborts)
	}
	if all := checkCTP(t, c); all != ctpRecords+r.abortedRecords {
		t.Fatalf("read_uncommitted sees %d output records, want %d: %d committed and the %d aborted on purpose", all, ctpRecords+r.abortedRecords, ctpRecords, r.abortedRecords)
	}

	// DescribeProducers on the cluster: the pipeline's producer is on the
	// leader of each output partition with no transaction open, and a
	// follower answers NOT_LEADER_OR_FOLLOWER.
	adm := clusterAdmin(t, c)
	ds, err := adm.DescribeTransactions(ctxT(t, 10*time.Second), "ctp-tx")
	must(t, "DescribeTransactions", err)
	pid := ds["ctp-tx"].ProducerID
	leader := partitionLeader(t, adm, "out", 0)
	for _, id := range c.IDs() {
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = "out", []int32{0}
		req.Topics = append(req.Topics, rt)
		kr, err := tc.DirectRequest(ctxT(t, 10*time.Second), c.Direct(t, id), req)
		must(t, "DescribeProducers", err)
		rp := kr.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
		err = kerr.ErrorForCode(rp.ErrorCode)
		switch {
		case id != leader && !errors.Is(err, kerr.NotLeaderForPartition):
			t.Errorf("DescribeProducers out-0 at follower %d: %v, want NOT_LEADER_OR_FOLLOWER", id, err)
		case id == leader && (err != nil || !slices.ContainsFunc(rp.ActiveProducers, func(p kmsg.DescribeProducersResponseTopicPartitionActiveProducer) bool {
			return p.ProducerID == pid && p.CurrentTxnStartOffset == -1
		})):
			t.Errorf("DescribeProducers out-0 at leader %d: %v %+v, want producer %d with no open transaction", id, err, rp.ActiveProducers, pid)
		}
	}
}

func TestTxnLibrdkafkaConsumeTransformProduceClusterLeaderKilled(t *testing.T) {
	ctpWithKill(t, "the leader of out-0", func(adm *kadm.Client) (int32, error) {
		return partitionLeader(t, adm, "out", 0), nil
	})
}

func TestTxnLibrdkafkaConsumeTransformProduceClusterCoordinatorKilled(t *testing.T) {
	ctpWithKill(t, "the transaction coordinator of ctp-tx", func(adm *kadm.Client) (int32, error) {
		r, ok := adm.FindTxnCoordinators(ctxT(t, 10*time.Second), "ctp-tx")["ctp-tx"]
		if !ok {
			return 0, errors.New("no answer")
		}
		return r.NodeID, r.Err
	})
}

// ctpWithKill runs the pipeline and kills the node victim names while a
// transaction is open (its records flushed to the output partitions) once
// a quarter of the records are processed; the pipeline must commit after
// that, and the result is still exactly once.
func ctpWithKill(t *testing.T, what string, victim func(*kadm.Client) (int32, error)) {
	c, py := startCTPCluster(t)
	adm := clusterAdmin(t, c)
	r := runCTP(t, c, py, 0, func(_ func()) {
		id, err := victim(adm)
		must(t, "finding "+what, err)
		t.Logf("transaction open: killing node %d, %s", id, what)
		c.Kill(id)
	})
	if r.commitsAfterPause == 0 {
		t.Fatal("the script committed nothing after the kill")
	}
	t.Logf("the script ran %d time(s), committed %d time(s) after the kill", r.runs, r.commitsAfterPause)
	checkCTP(t, c)
}

// The script is SIGKILLed with a transaction open (its records flushed
// to the output partitions); the next run fences it, which aborts that
// transaction, and goes on from the group's committed offsets.
func TestTxnLibrdkafkaConsumeTransformProduceClusterWorkerKilled(t *testing.T) {
	c, py := startCTPCluster(t)
	adm := clusterAdmin(t, c)
	r := runCTP(t, c, py, 0, func(killScript func()) {
		// What an operator sees of the open transaction: DescribeProducers
		// on the output partitions' leaders shows where it starts.
		ds, err := adm.DescribeTransactions(ctxT(t, 10*time.Second), "ctp-tx")
		must(t, "DescribeTransactions", err)
		d := ds["ctp-tx"]
		if d.State != "Ongoing" {
			t.Fatalf("ctp-tx paused in state %q, want Ongoing", d.State)
		}
		dp, err := adm.DescribeProducers(ctxT(t, 10*time.Second), kadm.TopicsSet{"out": {}})
		must(t, "DescribeProducers", err)
		open := 0
		dp.EachProducer(func(p kadm.DescribedProducer) {
			if p.ProducerID == d.ProducerID && p.ProducerEpoch == d.ProducerEpoch && p.CurrentTxnStartOffset >= 0 {
				open++
			}
		})
		if open == 0 {
			t.Fatalf("DescribeProducers shows no open transaction of producer %d: %+v", d.ProducerID, dp.SortedProducers())
		}
		t.Logf("transaction open on %d output partition(s): killing the script", open)
		killScript()
	})
	if r.runs != 2 {
		t.Fatalf("the script ran %d times, want 2 (killed once)", r.runs)
	}
	// The killed run's open transaction was written (flushed) and aborted.
	if all := checkCTP(t, c); all <= ctpRecords {
		t.Fatalf("read_uncommitted sees %d output records, want more than the %d committed", all, ctpRecords)
	}
}

// startCTPCluster starts three nodes with topics in and out (three
// partitions, three replicas) and writes the input records.
func startCTPCluster(t *testing.T) (*tc.Cluster, string) {
	t.Helper()
	py := need(t, "/usr/bin/python3")
	if exec.Command(py, "-c", "import confluent_kafka").Run() != nil {
		need(t, "/nonexistent/python3-confluent-kafka")
	}
	c := tc.StartCluster(t, 3, "--transaction.state.log.num.partitions", "4")
	adm := tc.Admin(t, c.Addrs()[0])
	for _, topic := range []string{"in", "out"} {
		resp, err := adm.CreateTopic(ctxT(t, 30*time.Second), 3, 3, nil, topic)
		if err == nil {
			err = resp.Err
		}
		must(t, "CreateTopic "+topic, err)
	}
	cl := tc.Client(t, c.Addrs()[0], kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("in"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range ctpRecords {
		recs = append(recs, &kgo.Record{Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i)), Partition: int32(i % 3)})
	}
	produceSync(t, cl, recs...)
	return c, py
}

// clusterAdmin is an admin client seeded with every node, so it works
// with any of them down.
func clusterAdmin(t *testing.T, c *tc.Cluster) *kadm.Client {
	return kadm.NewClient(tc.Client(t, c.Addrs()[0], kgo.SeedBrokers(c.Addrs()...)))
}

func partitionLeader(t *testing.T, adm *kadm.Client, topic string, p int32) int32 {
	t.Helper()
	var leader int32
	poll.Until(t, 10*time.Second, func() error {
		td, err := adm.ListTopics(ctxT(t, 10*time.Second), topic)
		if err != nil {
			return err
		}
		if leader = td[topic].Partitions[p].Leader; leader <= 0 {
			return fmt.Errorf("%s-%d has no leader", topic, p)
		}
		return nil
	})
	return leader
}

type ctpResult struct {
	runs              int // script runs, the last one finished
	commitsAfterPause int // "committed" lines after "paused"
	aborts            int // transactions aborted on purpose
	abortedRecords    int // the records they had written
}

// runCTP runs the script until it says "done", starting it again (at most
// three runs) when it exits with an error or is killed. With abortEvery,
// every abortEvery-th transaction of a run is aborted on purpose. With onPause, the
// first run pauses with a transaction open once a quarter of the records
// are processed, and onPause runs then, with a function that SIGKILLs the
// script; the script goes on when it returns.
func runCTP(t *testing.T, c *tc.Cluster, py string, abortEvery int, onPause func(killScript func())) ctpResult {
	t.Helper()
	var res ctpResult
	paused := false
	deadline := time.Now().Add(50 * time.Second)
	for run := 1; run <= 3; run++ {
		res.runs = run
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		args := []string{"testdata/confluent_txn_ctp.py", strings.Join(c.Addrs(), ","),
			"in", "out", "ctp-group", "ctp-tx", strconv.Itoa(ctpBatch)}
		pauseAt := 0
		if onPause != nil && run == 1 {
			pauseAt = ctpRecords / 4
		}
		args = append(args, strconv.Itoa(pauseAt), strconv.Itoa(abortEvery))
		cmd := exec.CommandContext(ctx, py, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		stop := func() {
			once.Do(func() {
				_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) // by PID: this run's process only
				_ = cmd.Wait()
				cancel()
			})
		}
		t.Cleanup(stop)
		kill := func() { _ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) }
		var lines []string
		done := false
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			lines = append(lines, line)
			switch {
			case strings.HasPrefix(line, "paused "):
				paused = true
				onPause(kill)
				_, _ = io.WriteString(stdin, "go\n") // fails harmlessly if killed
			case strings.HasPrefix(line, "committed ") && paused:
				res.commitsAfterPause++
			case strings.HasPrefix(line, "aborting ") && strings.HasSuffix(line, " records on purpose"):
				res.aborts++
				n, _ := strconv.Atoi(strings.Fields(line)[1])
				res.abortedRecords += n
			case strings.HasPrefix(line, "done "):
				done = true
			}
		}
		err = cmd.Wait()
		timedOut := ctx.Err() != nil
		once.Do(cancel)
		t.Logf("run %d: %v; stdout:\n%s", run, err, strings.Join(lines, "\n"))
		if done && err == nil {
			if onPause != nil && !paused {
				t.Fatal("the script never paused")
			}
			return res
		}
		if timedOut {
			t.Fatalf("the script did not finish within 50 s; stderr:\n%s", stderr.String())
		}
		t.Logf("run %d stderr:\n%s", run, stderr.String())
	}
	t.Fatal("the script failed three times")
	return res
}

// readOut reads every output partition from its start up to the "end"
// record checkCTP wrote there, at an isolation level.
func readOut(t *testing.T, seeds []string, level kgo.IsolationLevel) []string {
	t.Helper()
	cons := tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("out"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	defer cons.Close()
	ends := map[int32]bool{}
	var got []string
	ctx := ctxT(t, 30*time.Second)
	for len(ends) < 3 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d output records and the end of partitions %v in 30 s", len(got), ends)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Logf("fetch %s-%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" {
				ends[r.Partition] = true
			} else if !ends[r.Partition] {
				got = append(got, string(r.Value))
			}
		})
	}
	return got
}

// checkCTP checks that out holds, in read_committed, exactly one
// "out-<value>" per input record, and that the group's committed offsets
// are the input's end offsets. It returns how many output records
// read_uncommitted sees (aborted ones too).
func checkCTP(t *testing.T, c *tc.Cluster) int {
	t.Helper()
	seeds := c.Addrs()
	adm := clusterAdmin(t, c)

	// A plain record at the end of each output partition marks where
	// reading in read_committed stops: all before it is decided (the
	// script's transactions are committed or aborted), so nothing missing
	// or extra can arrive later.
	cl := tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("out"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		produceSync(t, cl, &kgo.Record{Value: []byte("end"), Partition: p})
	}
	got := readOut(t, seeds, kgo.ReadCommitted())
	var want []string
	for i := range ctpRecords {
		want = append(want, "out-v"+strconv.Itoa(i))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		seen := map[string]int{}
		for _, v := range got {
			seen[v]++
		}
		var dups, missing []string
		for _, v := range want {
			switch seen[v] {
			case 0:
				missing = append(missing, v)
			case 1:
			default:
				dups = append(dups, v)
			}
		}
		t.Fatalf("read_committed output: %d records, want %d; duplicated %v, missing %v", len(got), len(want), dups, missing)
	}

	inEnds, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), "in")
	must(t, "ListEndOffsets", err)
	// The last transaction's offsets are committed once its marker
	// reaches __consumer_offsets, after EndTxn answers.
	poll.Until(t, 20*time.Second, func() error {
		offs, err := adm.FetchOffsets(ctxT(t, 10*time.Second), "ctp-group")
		if err != nil {
			return err
		}
		var diff []string
		inEnds.Each(func(o kadm.ListedOffset) {
			if at, ok := offs.Lookup("in", o.Partition); !ok || at.Err != nil || at.At != o.Offset {
				diff = append(diff, fmt.Sprintf("in-%d committed %d (%v), end %d", o.Partition, at.At, at.Err, o.Offset))
			}
		})
		if len(diff) > 0 {
			return errors.New(strings.Join(diff, "; "))
		}
		return nil
	})
	return len(readOut(t, seeds, kgo.ReadUncommitted()))
}
