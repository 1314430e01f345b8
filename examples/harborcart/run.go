package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/pkg/berthmsg"
)

// loadCmd places orders through the order service at --rate per second.
func loadCmd(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	c.register(fs)
	rate := fs.Float64("rate", 10, "orders per second")
	count := fs.Int("count", 0, "stop after this many orders (0: until stopped)")
	_ = fs.Parse(args)
	return load(ctx, c.http, *rate, *count)
}

func load(ctx context.Context, addr string, rate float64, count int) error {
	hc := &http.Client{Timeout: 10 * time.Second}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	placed, failed := 0, 0
	report := time.Now()
	for count == 0 || placed < count {
		select {
		case <-ctx.Done():
			fmt.Printf("load: %d orders placed, %d refused\n", placed, failed)
			return ctx.Err()
		case <-tick.C:
		}
		// Mostly small baskets, now and then one fraud-monitor flags.
		cents := int64(500 + rand.IntN(20000))
		if rand.IntN(20) == 0 {
			cents = fraudCents + int64(rand.IntN(100000))
		}
		body, _ := json.Marshal(map[string]any{"customer": fmt.Sprintf("customer-%d", rand.IntN(500)), "total_cents": cents})
		resp, err := hc.Post("http://"+addr+"/orders", "application/json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		if err != nil {
			failed++ // the service is down or restarting: the next order tries again
			continue
		}
		placed++
		if time.Since(report) > 10*time.Second {
			report = time.Now()
			fmt.Printf("load: %d orders placed, %d refused\n", placed, failed)
		}
	}
	return nil
}

// checkCmd waits (bounded) for the pipeline to drain and verifies every
// order's effects: one email, one revenue contribution, one shipment, and
// a fraud flag exactly when the order breaks the rule.
func checkCmd(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	c.register(fs)
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for the pipeline to drain")
	_ = fs.Parse(args)
	s, err := openStore(c.db, c.postgres)
	if err != nil {
		return err
	}
	defer s.db.Close()
	deadline := time.Now().Add(*wait)
	said := time.Now()
	for {
		r, err := s.verify(ctx)
		if err != nil {
			return err
		}
		if r.missing == 0 || r.duplicated > 0 || time.Now().After(deadline) {
			fmt.Print(r)
			if r.missing > 0 {
				explainMissing(ctx, &c, r)
			}
			if r.missing > 0 || r.duplicated > 0 || r.stray > 0 {
				return fmt.Errorf("%d effects missing, %d duplicated, %d for orders that do not exist", r.missing, r.duplicated, r.stray)
			}
			fmt.Println("check: every order has exactly one of each effect")
			return nil
		}
		if time.Since(said) > 5*time.Second {
			said = time.Now()
			fmt.Printf("check: waiting for %d effects (%s)\n", r.missing, strings.Join(r.examples, "; "))
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

type report struct {
	orders, flagged                  int
	missing, duplicated, stray       int
	emails, revenue, shipments, flag int
	examples                         []string
	missingIDs                       map[string]bool // orders with an effect missing
}

func (r report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-26s %8d\n", "orders", r.orders)
	fmt.Fprintf(&b, "%-26s %8d\n", "emails (email-notifier)", r.emails)
	fmt.Fprintf(&b, "%-26s %8d\n", "revenue (sales-analytics)", r.revenue)
	fmt.Fprintf(&b, "%-26s %8d (of %d orders over the rule)\n", "flags (fraud-monitor)", r.flag, r.flagged)
	fmt.Fprintf(&b, "%-26s %8d\n", "shipments (warehouse)", r.shipments)
	fmt.Fprintf(&b, "%-26s %8d\n", "missing", r.missing)
	fmt.Fprintf(&b, "%-26s %8d\n", "duplicated", r.duplicated)
	for _, e := range r.examples {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// verify counts each order's effects.
func (s *store) verify(ctx context.Context) (report, error) {
	var r report
	totals := map[string]int64{}
	rows, err := s.db.QueryContext(ctx, `SELECT id, total_cents FROM orders`)
	if err != nil {
		return r, err
	}
	for rows.Next() {
		var id string
		var cents int64
		if err := rows.Scan(&id, &cents); err != nil {
			rows.Close()
			return r, err
		}
		totals[id] = cents
		if cents > fraudCents {
			r.flagged++
		}
	}
	rows.Close()
	r.orders = len(totals)
	for _, e := range []struct {
		table string
		n     *int
	}{{"emails", &r.emails}, {"revenue", &r.revenue}, {"shipments", &r.shipments}, {"fraud_flags", &r.flag}} {
		counts := map[string]int{}
		rows, err := s.db.QueryContext(ctx, `SELECT order_id, count(*) FROM `+e.table+` GROUP BY order_id`)
		if err != nil {
			return r, err
		}
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				rows.Close()
				return r, err
			}
			counts[id] = n
			*e.n += n
		}
		rows.Close()
		for id, cents := range totals {
			want := 1
			if e.table == "fraud_flags" && cents <= fraudCents {
				want = 0
			}
			switch got := counts[id]; {
			case got < want:
				r.missing++
				if r.missingIDs == nil {
					r.missingIDs = map[string]bool{}
				}
				r.missingIDs[id] = true
				if len(r.examples) < 5 {
					r.examples = append(r.examples, fmt.Sprintf("%s: no %s row yet", id, e.table))
				}
			case got > want:
				r.duplicated++
				r.examples = append(r.examples, fmt.Sprintf("%s: %d %s rows", id, got, e.table))
			}
		}
		for id := range counts {
			if _, ok := totals[id]; !ok {
				r.stray++
			}
		}
	}
	return r, nil
}

// up sets everything up and runs every component as a child process,
// restarting one that exits, until ctx is done.
func up(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	c.register(fs)
	rate := fs.Float64("rate", 10, "orders per second the load generator places (0: none)")
	workers := fs.Int("workers", 2, "shipment workers")
	pids := fs.String("pids", "", "keep a file of the components' process ids (name pid per line), for fault drills")
	drainFor := fs.Duration("drain", 2*time.Minute, "at Ctrl-C, how long to let the pipeline finish before stopping")
	_ = fs.Parse(args)
	if err := setup(ctx, &c); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	base := []string{"--brokers", c.brokers, "--db", c.db, "--postgres", c.postgres, "--http", c.http}
	comps := map[string][]string{
		"orders": {"orders"},
		"relay":  {"relay"},
	}
	for _, g := range groups {
		comps["consumer-"+g] = []string{"consumer", "--group", g}
	}
	for i := range *workers {
		comps[fmt.Sprintf("worker-%d", i)] = []string{"worker", "--name", fmt.Sprintf("worker-%d", i)}
	}
	if *rate > 0 {
		comps["load"] = []string{"load", "--rate", fmt.Sprint(*rate)}
	}
	var mu sync.Mutex
	running := map[string]int{}
	writePids := func() {
		if *pids == "" {
			return
		}
		var names []string
		for n := range running {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "%s %d\n", n, running[n])
		}
		tmp := *pids + ".tmp"
		if os.WriteFile(tmp, []byte(b.String()), 0o644) == nil {
			os.Rename(tmp, *pids)
		}
	}
	// The load stops at the first Ctrl-C; the rest runs until the
	// pipeline has drained (at most --drain), or a second Ctrl-C.
	rest, stopRest := context.WithCancel(context.Background())
	defer stopRest()
	var wg sync.WaitGroup
	for name, cargs := range comps {
		life := rest
		if name == "load" {
			life = ctx
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			supervise(life, self, name, append(append([]string{}, cargs...), base...), func(pid int) {
				mu.Lock()
				running[name] = pid
				writePids()
				mu.Unlock()
			})
		}()
	}
	fmt.Printf("up: HarborCart running against %s (database %s); Ctrl-C stops the orders, lets the pipeline drain, then stops; `harborcart check` verifies\n", c.brokers, dbName(&c))
	<-ctx.Done()
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	fmt.Printf("up: orders stopped; draining the pipeline (at most %v; Ctrl-C again stops now)\n", *drainFor)
	if s, err := openStore(c.db, c.postgres); err == nil {
		deadline := time.Now().Add(*drainFor)
		said := time.Now()
	drain:
		for time.Now().Before(deadline) {
			r, err := s.verify(context.Background())
			if err == nil && r.missing == 0 {
				fmt.Printf("up: drained: %d orders, every effect in place\n", r.orders)
				break
			}
			if err == nil && time.Since(said) > 5*time.Second {
				said = time.Now()
				fmt.Printf("up: draining: %d effects to go (%s)\n", r.missing, strings.Join(r.examples, "; "))
			}
			select {
			case <-again:
				break drain
			case <-time.After(500 * time.Millisecond):
			}
		}
		s.db.Close()
	}
	stopRest()
	wg.Wait()
	return ctx.Err()
}

// supervise runs the command until life is done, starting it again when
// it exits; at the end it asks it to stop (SIGTERM), then kills it after
// 15 s.
func supervise(life context.Context, self, name string, args []string, started func(pid int)) {
	for life.Err() == nil {
		cmd := exec.Command(self, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		// Its own process group, so a Ctrl-C in the terminal reaches only
		// up (which drains first); it dies with up.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "up: starting %s: %v\n", name, err)
			sleepCtx(life, time.Second)
			continue
		}
		started(cmd.Process.Pid)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if life.Err() == nil {
				fmt.Fprintf(os.Stderr, "up: %s exited (%v); restarting it\n", name, err)
				sleepCtx(life, 500*time.Millisecond)
			}
		case <-life.Done():
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
	}
}

func dbName(c *common) string {
	if c.postgres != "" {
		return "PostgreSQL"
	}
	return c.db
}

// explainMissing looks for the orders with a missing effect in the
// dead-letter topic: a job or a record that failed every attempt is
// there, with the reason (berth dlq inspect dlq.orders shows it).
func explainMissing(ctx context.Context, c *common, r report) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics(dlqTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, dlqTopic)
	if err != nil {
		fmt.Printf("check: cannot read %s: %v\n", dlqTopic, err)
		return
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	found := 0
	deadline := time.Now().Add(10 * time.Second)
	for len(left) > 0 && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(rec *kgo.Record) {
			if rec.Offset+1 >= left[rec.Partition] {
				delete(left, rec.Partition)
			}
			var o Order
			if json.Unmarshal(rec.Value, &o) == nil && r.missingIDs[o.ID] {
				found++
				h := map[string]string{}
				for _, x := range rec.Headers {
					h[x.Key] = string(x.Value)
				}
				why := h[berthmsg.HeaderDLQReason]
				if e := h[berthmsg.HeaderDLQClientError]; e != "" {
					why += ": " + e
				}
				fmt.Printf("check: %s is in %s (group %s, %s/%s@%s, %s deliveries, %s)\n", o.ID, dlqTopic, h[berthmsg.HeaderDLQGroup],
					h[berthmsg.HeaderDLQTopic], h[berthmsg.HeaderDLQPartition], h[berthmsg.HeaderDLQOffset], h[berthmsg.HeaderDLQDeliveryCount], why)
			}
		})
	}
	fmt.Printf("check: %d of the %d orders with a missing effect are in %s\n", found, len(r.missingIDs), dlqTopic)
}
