package tests

// Transactions under randomized faults on three nodes: concurrent kgo
// transactional producers (one on Transactions V1, the others on V2) commit
// and abort at random while nodes are SIGKILLed and restarted, paused
// (SIGSTOP) and resumed, or cut off the metadata quorum and healed:
// transaction coordinators, partition leaders, any node. At the end every partition is
// read from the start at both isolation levels and checked against what
// each producer was told: nothing committed is lost or doubled, nothing
// aborted is visible to read_committed, every transaction is all or
// nothing, and a producer's records keep their order. The seed is logged
// (replay: BERTH_FAULT_SEED); BERTH_TXN_CHAOS_FAULTS sets the number of
// faults (default 6).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// txnOutcome is what a producer knows of how one of its transactions
// ended.
type txnOutcome int

const (
	// txnCommitted: EndTransaction(TryCommit) returned nil.
	txnCommitted txnOutcome = iota
	// txnAborted: no commit was ever asked for (the test chose to abort,
	// or a produce failed), so the transaction can only have aborted,
	// whatever the abort call returned.
	txnAborted
	// txnUnknown: EndTransaction(TryCommit) returned an error; the
	// commit may or may not have happened.
	txnUnknown
)

func (o txnOutcome) String() string {
	return [...]string{"committed", "aborted", "unknown"}[o]
}

// chaosRecord is one record of a transaction and the partition it went to.
type chaosRecord struct {
	Value     string
	Partition int32
}

// chaosTxn is one transaction as its producer saw it.
type chaosTxn struct {
	Producer, N int
	Records     []chaosRecord
	Outcome     txnOutcome
	Err         string // the error that decided an abort or an unknown outcome
	Start, End  time.Time
}

func (x chaosTxn) name() string { return fmt.Sprintf("p%d-t%d", x.Producer, x.N) }

// chaosVal parses "p1-t17-r2".
func chaosVal(v string) (producer, txn, rec int, ok bool) {
	parts := strings.Split(v, "-")
	if len(parts) != 3 || len(parts[0]) < 2 || len(parts[1]) < 2 || len(parts[2]) < 2 {
		return 0, 0, 0, false
	}
	var err [3]error
	producer, err[0] = strconv.Atoi(parts[0][1:])
	txn, err[1] = strconv.Atoi(parts[1][1:])
	rec, err[2] = strconv.Atoi(parts[2][1:])
	return producer, txn, rec, err[0] == nil && err[1] == nil && err[2] == nil
}

// chaosProducer runs transactions with one transactional id until told to
// stop, replacing its client (which fences the old one) after any error.
type chaosProducer struct {
	id    int
	txnID string
	opts  []kgo.Opt
	rng   *rand.Rand

	mu   sync.Mutex
	txns []chaosTxn

	committed atomic.Int64
	clients   atomic.Int64 // clients made, the first included
}

func (p *chaosProducer) record(x chaosTxn) {
	x.End = time.Now()
	p.mu.Lock()
	p.txns = append(p.txns, x)
	p.mu.Unlock()
	if x.Outcome == txnCommitted {
		p.committed.Add(1)
	}
}

func (p *chaosProducer) run(stop *atomic.Bool, parts int32) {
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	drop := func() {
		cl.Close()
		cl = nil
	}
	// Bounded: the test stops the producers long before this many.
	for n := 1; n <= 100000 && !stop.Load(); n++ {
		if cl == nil {
			var err error
			if cl, err = kgo.NewClient(p.opts...); err != nil {
				p.record(chaosTxn{Producer: p.id, N: n, Outcome: txnAborted, Err: "new client: " + err.Error()})
				continue
			}
			p.clients.Add(1)
		}
		commit := p.rng.IntN(4) != 0
		x := chaosTxn{Producer: p.id, N: n, Start: time.Now()}
		var recs []*kgo.Record
		for i := range 1 + p.rng.IntN(4) {
			r := chaosRecord{Value: fmt.Sprintf("p%d-t%d-r%d", p.id, n, i), Partition: p.rng.Int32N(parts)}
			x.Records = append(x.Records, r)
			recs = append(recs, &kgo.Record{Value: []byte(r.Value), Partition: r.Partition})
		}
		if err := cl.BeginTransaction(); err != nil {
			x.Records, x.Outcome, x.Err = nil, txnAborted, "begin: "+err.Error()
			p.record(x)
			drop()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		perr := cl.ProduceSync(ctx, recs...).FirstErr()
		switch {
		case perr != nil || !commit:
			x.Outcome = txnAborted
			if perr != nil {
				x.Err = "produce: " + perr.Error()
			}
			if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
				x.Err = strings.TrimPrefix(x.Err+"; abort: "+err.Error(), "; ")
				perr = err
			}
		default:
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				x.Outcome, x.Err, perr = txnUnknown, "commit: "+err.Error(), err
			} else {
				x.Outcome = txnCommitted
			}
		}
		cancel()
		p.record(x)
		if perr != nil {
			drop()
		}
		time.Sleep(10 * time.Millisecond) // pacing: two cores are shared
	}
}

// fencedFrom asks node from whether node victim is out of every ISR and
// leads no partition of the fault topic or __transaction_state.
func fencedFrom(r *faultRig, from, victim int32) error {
	for _, topic := range []string{faultTopic, "__transaction_state"} {
		st, _, err := r.meta(from, topic)
		if err != nil {
			return err
		}
		for p, s := range st {
			if s.Leader < 0 || s.Leader == victim || slices.Contains(s.ISR, victim) {
				return fmt.Errorf("%s/%d: %+v", topic, p, s)
			}
		}
	}
	return nil
}

func chaosFaults(t *testing.T) int {
	n := 3 // BERTH_TXN_CHAOS_FAULTS=30 for a longer run in its own sitting
	if s := os.Getenv("BERTH_TXN_CHAOS_FAULTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > 100 {
			t.Fatalf("BERTH_TXN_CHAOS_FAULTS=%q: want 1..100", s)
		}
	}
	return n
}

// TestTxnChaosFailover: transaction coordinators and partition leaders
// killed (SIGKILL) and restarted, paused and resumed, or cut off the
// metadata quorum and healed while four transactional producers run
// lose no committed record, show no aborted record to read_committed
// readers, and keep every transaction atomic.
func TestTxnChaosFailover(t *testing.T) {
	const parts = 3
	r := newFaultRig(t, parts, "--transaction.state.log.num.partitions", "4",
		"--transaction.abort.timed.out.transaction.cleanup.interval.ms", "200")
	faults := chaosFaults(t)
	seeds := r.c.Addrs()
	adm := kadm.NewClient(tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...)))
	seed := r.h.Seed

	v1 := kversion.Stable()
	v1.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	var producers []*chaosProducer
	for i := 1; i <= 4; i++ {
		p := &chaosProducer{id: i, txnID: fmt.Sprintf("chaos-%d", i), rng: rand.New(rand.NewPCG(uint64(seed), uint64(i)))}
		p.opts = []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.TransactionalID(p.txnID), kgo.DefaultProduceTopic(faultTopic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(3 * time.Second),
			kgo.RecordDeliveryTimeout(15 * time.Second), kgo.MetadataMinAge(100 * time.Millisecond)}
		if i == 1 {
			p.opts = append(p.opts, kgo.MaxVersions(v1)) // Transactions V1
		}
		producers = append(producers, p)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, p := range producers {
		wg.Go(func() { p.run(&stop, parts) })
	}
	stopped := false
	stopProducers := func() {
		if stopped {
			return
		}
		stopped = true
		stop.Store(true)
		wg.Wait()
	}
	t.Cleanup(stopProducers)

	waitCommits := func(what string) {
		t.Helper()
		base := make([]int64, len(producers))
		for i, p := range producers {
			base[i] = p.committed.Load()
		}
		d := r.waitFor(30*time.Second, what, func() error {
			for i, p := range producers {
				if p.committed.Load() <= base[i] {
					return fmt.Errorf("producer %d: no commit yet (%d committed in all)", p.id, p.committed.Load())
				}
			}
			return nil
		})
		r.h.Fault("%s: after %v", what, d.Round(time.Millisecond))
	}
	waitCommits("every producer committed a transaction")

	txnIDs := make([]string, len(producers))
	for i, p := range producers {
		txnIDs[i] = p.txnID
	}
	for f := 1; f <= faults; f++ {
		time.Sleep(time.Duration(500+r.rng.IntN(2000)) * time.Millisecond) // pacing: let transactions run between faults
		var victim int32
		var why string
		switch r.rng.IntN(5) {
		case 0, 1:
			id := txnIDs[r.rng.IntN(len(txnIDs))]
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			co := adm.FindTxnCoordinators(ctx, id)[id]
			cancel()
			if co.Err == nil && co.NodeID > 0 {
				victim, why = co.NodeID, "transaction coordinator of "+id
			}
		case 2, 3:
			p := r.rng.Int32N(parts)
			if st, _, err := r.meta(r.c.IDs()[r.rng.IntN(3)], faultTopic); err == nil && st[p].Leader > 0 {
				victim, why = st[p].Leader, fmt.Sprintf("leader of %s/%d", faultTopic, p)
			}
		}
		if victim == 0 {
			victim, why = r.c.IDs()[r.rng.IntN(3)], "a random node"
		}
		// SIGKILL and restart mostly; sometimes SIGSTOP (a coordinator
		// or leader that wakes up as a zombie) or a cut off the metadata
		// quorum (one that keeps serving clients meanwhile).
		action := [...]string{"kill", "kill", "kill", "pause", "cut"}[r.rng.IntN(5)]
		var at time.Time
		switch action {
		case "kill":
			r.c.Kill(victim)
			at = r.h.Fault("fault %d: killed node %d (kill -9), %s", f, victim, why)
		case "pause":
			r.c.Pause(victim)
			at = r.h.Fault("fault %d: paused node %d (SIGSTOP), %s", f, victim, why)
		case "cut":
			r.c.Cut(victim)
			at = r.h.Fault("fault %d: cut node %d off the metadata quorum, %s", f, victim, why)
		}
		witness := r.others(victim)[0]
		// Wait (bounded; it is not a failure if it takes longer) until
		// the controller has fenced the victim: every partition of both
		// topics led by a survivor, the victim in no ISR. The producers
		// then run against the failed-over cluster.
		deadline := at.Add(10 * time.Second)
		for {
			err := fencedFrom(r, witness, victim)
			if err == nil {
				r.h.Fault("node %d sees node %d fenced: no leadership, in no ISR, after %v", witness, victim, time.Since(at).Round(time.Millisecond))
				break
			}
			if time.Now().After(deadline) {
				r.h.Fault("node %d: node %d not fenced after %v: %v", witness, victim, time.Since(at).Round(time.Millisecond), err)
				break
			}
			time.Sleep(50 * time.Millisecond) // polling with a deadline
		}
		time.Sleep(time.Duration(r.rng.IntN(1500)) * time.Millisecond) // pacing: run a while on two nodes
		switch action {
		case "kill":
			r.c.Restart(victim)
			r.h.Fault("node %d restarted", victim)
		case "pause":
			r.c.Resume(victim)
			r.h.Fault("node %d resumed (SIGCONT)", victim)
		case "cut":
			r.c.Heal(victim)
			r.h.Fault("node %d healed", victim)
		}
		d := r.waitFor(rejoinBound, fmt.Sprintf("node %d back in every ISR of %s and __transaction_state", victim, faultTopic), func() error {
			for _, topic := range []string{faultTopic, "__transaction_state"} {
				st, _, err := r.meta(witness, topic)
				if err != nil {
					return err
				}
				for p, s := range st {
					if s.Leader < 0 || len(s.ISR) != 3 {
						return fmt.Errorf("%s/%d: %+v", topic, p, s)
					}
				}
			}
			return nil
		})
		r.h.Fault("node %d back in every ISR after %v", victim, d.Round(time.Millisecond))
	}
	// After the last fault every producer still commits.
	waitCommits("every producer committed a transaction after the last fault")
	stopProducers()
	r.h.Fault("producers stopped")

	var txns []chaosTxn
	for _, p := range producers {
		p.mu.Lock()
		txns = append(txns, p.txns...)
		p.mu.Unlock()
	}
	chaosCheck(t, r, adm, seeds, txns, producers)
}

// chaosCheck waits until no transaction is open on any partition, reads
// every partition at both isolation levels and checks the transactions.
func chaosCheck(t *testing.T, r *faultRig, adm *kadm.Client, seeds []string, txns []chaosTxn, producers []*chaosProducer) {
	t.Helper()
	const parts = 3
	dir := r.c.Dir
	// Violations by kind, each kind's in the order found.
	bad := map[string][]string{}
	var kinds []string
	add := func(kind, msg string) {
		if bad[kind] == nil {
			kinds = append(kinds, kind)
		}
		bad[kind] = append(bad[kind], msg)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		r.h.Fail(t, dir, "%s\nfaults:\n%s", fmt.Sprintf(format, args...), r.h.Schedule())
	}
	writeChaosTxns(t, dir, txns, nil, nil) // rewritten with the reads below
	// Unknown outcomes and fenced producers' transactions end by the
	// coordinators' timeout (3 s, checked every 200 ms).
	d := r.waitFor(30*time.Second, "no open transaction on any partition (last stable offset = end offset)", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, faultTopic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return err
		}
		lsos, err := adm.ListCommittedOffsets(ctx, faultTopic)
		if err == nil {
			err = lsos.Error()
		}
		if err != nil {
			return err
		}
		for p := range int32(parts) {
			e, _ := ends.Lookup(faultTopic, p)
			l, _ := lsos.Lookup(faultTopic, p)
			if e.Offset != l.Offset {
				return fmt.Errorf("partition %d: last stable offset %d, end offset %d", p, l.Offset, e.Offset)
			}
		}
		return nil
	})
	r.h.Fault("no open transaction after %v", d.Round(time.Millisecond))

	// A plain record at the end of each partition marks how far to read.
	plain := tc.Client(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(parts) {
		if err := plain.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Topic: faultTopic, Partition: p, Value: []byte(fmt.Sprintf("end-%d", p))}).FirstErr(); err != nil {
			fail("producing the end record of partition %d: %v", p, err)
		}
	}
	committed, err := chaosRead(seeds, kgo.ReadCommitted())
	if err != nil {
		fail("read_committed: %v", err)
	}
	uncommitted, err := chaosRead(seeds, kgo.ReadUncommitted())
	if err != nil {
		fail("read_uncommitted: %v", err)
	}
	writeChaosTxns(t, dir, txns, committed, uncommitted)

	byName := map[string]chaosTxn{}
	for _, x := range txns {
		byName[x.name()] = x
	}
	// Where each value was read (read_committed).
	type at struct {
		Partition int32
		Offset    int64
	}
	seen := map[string][]at{}
	for _, c := range committed {
		seen[c.Value] = append(seen[c.Value], at{c.Partition, c.Offset})
	}
	ru := map[at]string{}
	inLog := map[string][]at{}
	for _, c := range uncommitted {
		ru[at{c.Partition, c.Offset}] = c.Value
		inLog[c.Value] = append(inLog[c.Value], at{c.Partition, c.Offset})
	}
	// Idempotence: a retried batch is never appended twice, whatever
	// became of its transaction.
	for v, ats := range inLog {
		if len(ats) > 1 {
			add("duplicate in the log", fmt.Sprintf("%s in the log %d times (read_uncommitted): %v", v, len(ats), ats))
		}
	}
	for _, c := range committed {
		if v, ok := ru[at{c.Partition, c.Offset}]; !ok || v != c.Value {
			add("read_uncommitted not a superset", fmt.Sprintf("read_committed read %s at %d/%d, read_uncommitted %q there", c.Value, c.Partition, c.Offset, v))
		}
		if strings.HasPrefix(c.Value, "end-") {
			continue
		}
		prod, n, _, ok := chaosVal(c.Value)
		if _, known := byName[fmt.Sprintf("p%d-t%d", prod, n)]; !ok || !known {
			add("phantom record", fmt.Sprintf("read_committed read %s at %d/%d: no transaction of the test wrote it", c.Value, c.Partition, c.Offset))
		}
	}
	for v, ats := range seen {
		if len(ats) > 1 {
			add("duplicate read", fmt.Sprintf("%s read %d times by read_committed: %v", v, len(ats), ats))
		}
	}
	counts := map[txnOutcome]int{}
	unknownVisible := 0
	for _, x := range txns {
		counts[x.Outcome]++
		visible := 0
		for _, rec := range x.Records {
			ats := seen[rec.Value]
			if len(ats) > 0 {
				visible++
				if ats[0].Partition != rec.Partition {
					add("wrong partition", fmt.Sprintf("%s read from partition %d, produced to %d", rec.Value, ats[0].Partition, rec.Partition))
				}
			}
			switch {
			case x.Outcome == txnAborted && len(ats) > 0:
				add("aborted record visible", fmt.Sprintf("%s of aborted transaction %s (%s) read by read_committed at %v", rec.Value, x.name(), x.Err, ats))
			case x.Outcome == txnCommitted && len(ats) == 0:
				add("committed record lost", fmt.Sprintf("%s of committed transaction %s lost: not read by read_committed", rec.Value, x.name()))
			}
		}
		if visible != 0 && visible != len(x.Records) {
			add("not atomic", fmt.Sprintf("transaction %s (%s %s) not atomic: %d of its %d records read by read_committed", x.name(), x.Outcome, x.Err, visible, len(x.Records)))
		}
		if x.Outcome == txnUnknown && visible > 0 {
			unknownVisible++
		}
	}
	// A producer's records in a partition are in (transaction, record)
	// order.
	type key struct {
		Partition int32
		Producer  int
	}
	last := map[key][2]int{}
	lastVal := map[key]string{}
	for _, c := range committed {
		prod, n, i, ok := chaosVal(c.Value)
		if !ok {
			continue
		}
		k := key{c.Partition, prod}
		if l, ok := last[k]; ok && (n < l[0] || n == l[0] && i <= l[1]) {
			add("out of order", fmt.Sprintf("partition %d: %s at offset %d after %s", c.Partition, c.Value, c.Offset, lastVal[k]))
		}
		last[k], lastVal[k] = [2]int{n, i}, c.Value
	}

	var per []string
	for _, p := range producers {
		per = append(per, fmt.Sprintf("p%d (%s): %d committed, %d clients", p.id, p.txnID, p.committed.Load(), p.clients.Load()))
	}
	summary := fmt.Sprintf("%d transactions: %d committed, %d aborted, %d unknown (%d of them visible); %s; read_committed read %d records, read_uncommitted %d",
		len(txns), counts[txnCommitted], counts[txnAborted], counts[txnUnknown], unknownVisible, strings.Join(per, ", "), len(committed), len(uncommitted))
	if len(kinds) > 0 {
		var b strings.Builder
		for _, k := range kinds {
			fmt.Fprintf(&b, "%s: %d\n", k, len(bad[k]))
			for i, msg := range bad[k] {
				if i == 5 {
					fmt.Fprintf(&b, "  ... and %d more\n", len(bad[k])-5)
					break
				}
				fmt.Fprintf(&b, "  %s\n", msg)
			}
		}
		fail("violations (every transaction and read in %s):\n%s%s", filepath.Join(dir, "txns.txt"), b.String(), summary)
	}
	t.Logf("checked %s; faults:\n%s", summary, r.h.Schedule())
}

// chaosRead reads every partition of the fault topic from the start
// through its "end-<p>" record at an isolation level.
func chaosRead(seeds []string, level kgo.IsolationLevel) ([]tc.Consumed, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(faultTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []tc.Consumed
	done := map[int32]bool{}
	for len(done) < 3 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("read through the end record of partitions %v only, in 30 s", done)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			if !kgoRetriableErr(err) {
				ferr = fmt.Errorf("partition %d: %w", p, err)
			}
		})
		if ferr != nil {
			return out, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, tc.Consumed{Value: string(r.Value), Partition: r.Partition, Offset: r.Offset})
			if string(r.Value) == fmt.Sprintf("end-%d", r.Partition) {
				done[r.Partition] = true
			}
		})
	}
	return out, nil
}

func kgoRetriableErr(err error) bool {
	var re interface{ IsRetriable() bool }
	return errors.As(err, &re) && re.IsRetriable()
}

// writeChaosTxns writes every transaction and what each isolation level
// read to <dir>/txns.txt.
func writeChaosTxns(t *testing.T, dir string, txns []chaosTxn, committed, uncommitted []tc.Consumed) {
	var b strings.Builder
	for _, x := range txns {
		fmt.Fprintf(&b, "%s %s %s..%s %v %s\n", x.name(), x.Outcome, x.Start.Format("15:04:05.000"), x.End.Format("15:04:05.000"), x.Records, x.Err)
	}
	for _, l := range []struct {
		name string
		recs []tc.Consumed
	}{{"read_committed", committed}, {"read_uncommitted", uncommitted}} {
		fmt.Fprintf(&b, "\n%s:\n", l.name)
		for _, c := range l.recs {
			fmt.Fprintf(&b, "%d/%d %s\n", c.Partition, c.Offset, c.Value)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "txns.txt"), []byte(b.String()), 0o644); err != nil {
		t.Errorf("txns.txt: %v", err)
	}
}
