package tests

// Consume-transform-produce with kgo's GroupTransactSession: the output
// and the input group's offsets are committed in one transaction
// (TxnOffsetCommit), so N input records yield exactly N output records in
// read_committed, across a restart of the pipeline.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// etlOpts are the options of the pipeline's GroupTransactSession; small
// fetches make many transactions of a few records each, and short group
// timeouts let a killed worker's membership go quickly.
func etlOpts(addr string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(addr), kgo.TransactionalID("etl"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumerGroup("etl-group"), kgo.ConsumeTopics("in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("out"),
		kgo.FetchMaxWait(100 * time.Millisecond), kgo.RequireStableFetchOffsets(), kgo.FetchMaxPartitionBytes(1),
		kgo.SessionTimeout(1500 * time.Millisecond), kgo.RebalanceTimeout(2 * time.Second),
		kgo.HeartbeatInterval(300 * time.Millisecond)}
}

// transform runs a GroupTransactSession from "in" to "out" until stop
// says so, and returns how many records it committed.
func transform(t *testing.T, addr string, stop func(total int) bool) int {
	t.Helper()
	sess, err := kgo.NewGroupTransactSession(etlOpts(addr)...)
	must(t, "NewGroupTransactSession", err)
	defer sess.Close()
	total := 0
	deadline := time.Now().Add(60 * time.Second)
	for !stop(total) {
		if time.Now().After(deadline) {
			t.Fatalf("pipeline committed %d records in 60 s", total)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := sess.PollFetches(ctx)
		cancel()
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		must(t, "Begin", sess.Begin())
		for _, r := range recs {
			sess.Produce(context.Background(), &kgo.Record{Value: append([]byte("out-"), r.Value...)}, nil)
		}
		committed, err := sess.End(ctxT(t, 30*time.Second), kgo.TryCommit)
		must(t, "End", err)
		if committed {
			total += len(recs)
		}
	}
	return total
}

func TestTxnGroupTransactSessionExactlyOnce(t *testing.T) {
	n := tc.Start(t, tc.With("group.min.session.timeout.ms", "1000"))
	tc.CreateTopic(t, n.Addr(), "in", 1, nil)
	tc.CreateTopic(t, n.Addr(), "out", 1, nil)
	const N = 200
	prod := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("in"))
	produceRange := func(from, to int) {
		for i := from; i < to; i++ {
			produceSync(t, prod, &kgo.Record{Value: []byte(strconv.Itoa(i))})
		}
	}

	// Two runs of the pipeline over two halves of the input: the second
	// goes on from the offsets the first committed in its transactions
	// (starting over would duplicate the first half).
	produceRange(0, N/2)
	transform(t, n.Addr(), func(total int) bool { return total >= N/2 })
	// The offsets become the group's once the COMMIT marker reached
	// __consumer_offsets, just after EndTxn answered.
	for deadline := time.Now().Add(20 * time.Second); committedOffset(t, n.Addr()) != N/2; {
		if time.Now().After(deadline) {
			t.Fatalf("committed offset after the first run %d, want %d", committedOffset(t, n.Addr()), N/2)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	produceRange(N/2, N)
	transform(t, n.Addr(), func(int) bool { return committedOffset(t, n.Addr()) >= N })

	out := newConsumer(t, n.Addr(), "out", kgo.ReadCommitted())
	want := make([]string, N)
	for i := range N {
		want[i] = "out-" + strconv.Itoa(i)
	}
	out.waitFor(t, want...)
	if got := out.poll(t, 300*time.Millisecond); len(got) != N {
		t.Fatalf("read_committed saw %d records, want exactly %d", len(got), N)
	}
	if !slices.Equal(out.got, want) {
		t.Fatal("output out of order")
	}
}

// committedOffset is the etl-group's committed offset of in-0 (-1: none).
func committedOffset(t *testing.T, addr string) int64 {
	t.Helper()
	os, err := tc.Admin(t, addr).FetchOffsets(ctxT(t, 10*time.Second), "etl-group")
	if err != nil {
		return -1
	}
	o, ok := os.Lookup("in", 0)
	if !ok {
		return -1
	}
	return o.At
}

// TestTxnWorkerProcess is the transforming process of
// TestTxnPipelineSurvivesSIGKILL, run as a child of the test binary: it
// prints a line after every committed transaction.
func TestTxnWorkerProcess(t *testing.T) {
	addr := os.Getenv("BERTH_TXN_WORKER_ADDR")
	if addr == "" {
		t.Skip("run by TestTxnPipelineSurvivesSIGKILL")
	}
	sess, err := kgo.NewGroupTransactSession(etlOpts(addr)...)
	must(t, "NewGroupTransactSession", err)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		recs := sess.PollFetches(ctx).Records()
		cancel()
		if len(recs) == 0 {
			continue
		}
		must(t, "Begin", sess.Begin())
		for _, r := range recs {
			sess.Produce(context.Background(), &kgo.Record{Value: append([]byte("out-"), r.Value...)}, nil)
		}
		if committed, err := sess.End(context.Background(), kgo.TryCommit); err == nil && committed {
			fmt.Println("committed", len(recs))
		}
	}
}

// The transforming process is killed (SIGKILL) in the middle of its
// stream three times and started again; a last run finishes the input.
// Each new instance fences the dead one and aborts its open transaction,
// and goes on from the offsets committed with the output: exactly N
// records come out in read_committed, in order.
func TestTxnPipelineSurvivesSIGKILL(t *testing.T) {
	n := tc.Start(t, tc.With("group.min.session.timeout.ms", "1000"))
	tc.CreateTopic(t, n.Addr(), "in", 1, nil)
	tc.CreateTopic(t, n.Addr(), "out", 1, nil)
	const N = 300
	prod := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("in"))
	for i := range N {
		produceSync(t, prod, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	exe, err := os.Executable()
	must(t, "os.Executable", err)
	for round := range 3 {
		cmd := exec.Command(exe, "-test.run=^TestTxnWorkerProcess$")
		cmd.Env = append(os.Environ(), "BERTH_TXN_WORKER_ADDR="+n.Addr())
		out, err := cmd.StdoutPipe()
		must(t, "StdoutPipe", err)
		must(t, "start the worker", cmd.Start())
		lines := bufio.NewScanner(out)
		seen := 0
		for seen < 20 && lines.Scan() {
			if strings.HasPrefix(lines.Text(), "committed") {
				seen++
			}
		}
		must(t, "SIGKILL", cmd.Process.Kill())
		_ = cmd.Wait()
		if seen < 20 {
			t.Fatalf("round %d: the worker committed %d transactions before its output ended", round, seen)
		}
	}
	transform(t, n.Addr(), func(int) bool { return committedOffset(t, n.Addr()) >= N })

	out := newConsumer(t, n.Addr(), "out", kgo.ReadCommitted())
	want := make([]string, N)
	for i := range N {
		want[i] = "out-" + strconv.Itoa(i)
	}
	out.waitFor(t, want...)
	if got := out.poll(t, 300*time.Millisecond); len(got) != N {
		t.Fatalf("read_committed saw %d records, want exactly %d", len(got), N)
	}
}
