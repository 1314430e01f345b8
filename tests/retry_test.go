package tests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
	"github.com/berthmq/berth/pkg/berthmsg"
	"github.com/berthmq/berth/pkg/breaker"
	"github.com/berthmq/berth/pkg/retry"
)

// handledLog records what a retry consumer's handler saw.
type handledLog struct {
	mu       sync.Mutex
	attempts map[string]int
	done     []string // values handled successfully, in order
}

func (l *handledLog) attempt(v string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts[v]++
	return l.attempts[v]
}

func (l *handledLog) ok(v string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = append(l.done, v)
}

func (l *handledLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.done...)
}

func startRetry(t *testing.T, addr string, cfg retry.Config, h retry.Handler) *retry.Consumer {
	t.Helper()
	cfg.Client = append(cfg.Client, kgo.SeedBrokers(addr))
	c, err := retry.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("retry consumer: %v", err)
		}
		c.Close()
	})
	return c
}

// Retry topics on an ordinary consumer group: a flaky record succeeds on
// its third attempt (through two retry topics) while the records behind
// it go on; one that always fails and one that fails permanently reach
// the dead-letter topic with the context headers `berth dlq` reads.
func TestRetryTopics(t *testing.T) {
	n := tc.Start(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := tc.Admin(t, n.Addr()).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	l := &handledLog{attempts: map[string]int{}}
	var healed atomic.Bool // the warehouse API is back: what failed succeeds after a redrive
	c := startRetry(t, n.Addr(), retry.Config{Topic: "orders", Group: "fulfilment",
		Delays: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}},
		func(ctx context.Context, r *kgo.Record) error {
			v := string(r.Value)
			a := l.attempt(v)
			switch {
			case healed.Load():
			case v == "flaky" && a < 3:
				return fmt.Errorf("warehouse API timeout (attempt %d)", a)
			case v == "doomed":
				return errors.New("warehouse API 503")
			case v == "bad":
				return retry.Permanent(errors.New("no such SKU"))
			}
			l.ok(v)
			return nil
		})
	// A second group on the same topic, whose handler fails once for
	// everything: its retries share orders.retry.* and never reach the
	// first group's handler, nor the first group's its.
	other := &handledLog{attempts: map[string]int{}}
	startRetry(t, n.Addr(), retry.Config{Topic: "orders", Group: "analytics",
		Delays: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}},
		func(ctx context.Context, r *kgo.Record) error {
			if other.attempt(string(r.Value)) == 1 {
				return errors.New("warehouse DB busy")
			}
			other.ok(string(r.Value))
			return nil
		})
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("orders"))
	for _, v := range []string{"flaky", "a", "doomed", "b", "bad", "c"} {
		produceSync(t, cl, &kgo.Record{Key: []byte("k-" + v), Value: []byte(v)})
	}
	poll.Until(t, 30*time.Second, func() error {
		if got := l.snapshot(); len(got) != 4 {
			return fmt.Errorf("handled %v, want a, b, c and flaky", got)
		}
		if st := c.Stats(); st.Dead != 2 {
			return fmt.Errorf("stats %+v, want 2 dead-lettered", st)
		}
		return nil
	})
	poll.Until(t, 30*time.Second, func() error {
		if got := other.snapshot(); len(got) != 6 {
			return fmt.Errorf("the other group handled %v, want all 6 on their second attempt", got)
		}
		return nil
	})
	for v, a := range other.attempts {
		if a != 2 {
			t.Errorf("the other group attempted %s %d times, want 2", v, a)
		}
	}
	for v, a := range l.attempts {
		if want := map[string]int{"flaky": 3, "doomed": 3}[v]; want == 0 && a != 1 || want > 0 && a != want {
			t.Errorf("fulfilment attempted %s %d times", v, a)
		}
	}
	if got := l.snapshot(); got[len(got)-1] != "flaky" {
		t.Errorf("handled %v: flaky (retried) should come last, the others not waiting for it", got)
	}
	if st := c.Stats(); st.Retried != 4 { // flaky twice, doomed twice
		t.Errorf("stats %+v, want 4 retries", st)
	}
	dead := consumeN(t, n.Addr(), "orders.dlq", 2)
	for _, r := range dead {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		want := map[string]string{berthmsg.HeaderDLQTopic: "orders", berthmsg.HeaderDLQGroup: "fulfilment"}
		switch string(r.Value) {
		case "doomed":
			want[berthmsg.HeaderDLQDeliveryCount] = "3"
			want[berthmsg.HeaderDLQReason] = "delivery limit reached"
			want[berthmsg.HeaderDLQMessage] = "warehouse API 503"
		case "bad":
			want[berthmsg.HeaderDLQDeliveryCount] = "1"
			want[berthmsg.HeaderDLQReason] = "rejected"
			want[berthmsg.HeaderDLQMessage] = "no such SKU"
		default:
			t.Fatalf("dead-lettered %q", r.Value)
		}
		for k, v := range want {
			if h[k] != v {
				t.Errorf("%s: header %s = %q, want %q", r.Value, k, h[k], v)
			}
		}
		if h[berthmsg.HeaderDLQOffset] == "" || h[berthmsg.HeaderDLQPartition] == "" {
			t.Errorf("%s: no source coordinates: %v", r.Value, h)
		}
		if string(r.Key) != "k-"+string(r.Value) {
			t.Errorf("key %q lost", r.Key)
		}
	}
	// `berth dlq` reads it as a work queue's dead-letter topic.
	out, stderr, err := berthCLI(ctx, "", "dlq", "list", "-b", n.Addr())
	if err != nil || !strings.Contains(out, "orders.dlq") {
		t.Errorf("berth dlq list: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err = berthCLI(ctx, "", "dlq", "inspect", "orders.dlq", "-b", n.Addr())
	if err != nil || !strings.Contains(out, "warehouse API 503") || !strings.Contains(out, "no such SKU") {
		t.Errorf("berth dlq inspect orders.dlq: %v\n%s%s", err, out, stderr)
	}
	// The dead-letter topic is one `berth dlq` lists.
	cfgs, err := tc.Admin(t, n.Addr()).DescribeTopicConfigs(ctx, "orders.dlq")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range cfgs[0].Configs {
		if c.Key == berthmsg.TopicConfigDLQGroupEnable && c.MaybeValue() == "true" {
			found = true
		}
	}
	if !found {
		t.Errorf("orders.dlq lacks %s=true", berthmsg.TopicConfigDLQGroupEnable)
	}
	// Once the cause is fixed, `berth dlq redrive` sends the dead records
	// back to orders, where the group handles them; every group of the
	// topic reads them again (an inbox makes that harmless).
	healed.Store(true)
	out, stderr, err = berthCLI(ctx, "", "dlq", "redrive", "orders.dlq", "-b", n.Addr())
	if err != nil {
		t.Fatalf("berth dlq redrive orders.dlq: %v\n%s%s", err, out, stderr)
	}
	poll.Until(t, 30*time.Second, func() error {
		got := l.snapshot()
		if len(got) != 6 || !slices.Contains(got, "doomed") || !slices.Contains(got, "bad") {
			return fmt.Errorf("handled %v, want doomed and bad too after the redrive", got)
		}
		if got := other.snapshot(); len(got) != 8 {
			return fmt.Errorf("the other group handled %v, want doomed and bad a second time", got)
		}
		return nil
	})
	if st := c.Stats(); st.Dead != 2 {
		t.Errorf("stats %+v after the redrive, want still 2 dead-lettered", st)
	}
	// The redriven copies are the dead ones, with the redrive counted.
	back := consumeN(t, n.Addr(), "orders", 8)
	redriven := 0
	for _, r := range back {
		for _, h := range r.Headers {
			if h.Key == berthmsg.HeaderDLQRedriveCount && string(h.Value) == "1" {
				redriven++
			}
			if strings.HasPrefix(h.Key, "__dlq.errors.") && h.Key != berthmsg.HeaderDLQRedriveCount {
				t.Errorf("redriven %s carries %s", r.Value, h.Key)
			}
		}
	}
	if redriven != 2 {
		t.Errorf("%d records in orders carry %s=1, want the 2 redriven", redriven, berthmsg.HeaderDLQRedriveCount)
	}
}

// With OrderedKeys, later records of a key in retry wait behind it: the
// key's records are handled in order, while other keys go on. Without
// it, the retried record comes after the later ones.
func TestRetryOrderedKeys(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			n := tc.Start(t)
			ctx := ctxT(t, 60*time.Second)
			if _, err := tc.Admin(t, n.Addr()).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
				t.Fatal(err)
			}
			l := &handledLog{attempts: map[string]int{}}
			startRetry(t, n.Addr(), retry.Config{Topic: "orders", Group: "email", OrderedKeys: ordered,
				Delays: []time.Duration{100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond}},
				func(ctx context.Context, r *kgo.Record) error {
					v := string(r.Value)
					if l.attempt(v) < 3 && v == "k#0" {
						return errors.New("mail server down")
					}
					l.ok(v)
					return nil
				})
			cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("orders"))
			for _, v := range []string{"k#0", "k#1", "other#0", "k#2"} {
				key, _, _ := strings.Cut(v, "#")
				produceSync(t, cl, &kgo.Record{Key: []byte(key), Value: []byte(v)})
			}
			poll.Until(t, 30*time.Second, func() error {
				if got := l.snapshot(); len(got) != 4 {
					return fmt.Errorf("handled %v", got)
				}
				return nil
			})
			var k []string
			for _, v := range l.snapshot() {
				if strings.HasPrefix(v, "k#") {
					k = append(k, v)
				}
			}
			got := strings.Join(k, " ")
			want := "k#0 k#1 k#2"
			if !ordered {
				want = "k#1 k#2 k#0"
			}
			if got != want {
				t.Fatalf("key k handled as %s, want %s", got, want)
			}
			if l.snapshot()[0] != "other#0" && ordered {
				t.Errorf("handled %v: the other key should not wait", l.snapshot())
			}
		})
	}
}

// A breaker stops the attempts while the dependency is down: after two
// failures it opens, the consumer pauses, one probe goes through each
// time it half-opens; once the dependency is back every record is
// handled.
func TestRetryBreaker(t *testing.T) {
	n := tc.Start(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := tc.Admin(t, n.Addr()).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	down, calls := true, 0
	l := &handledLog{attempts: map[string]int{}}
	b := breaker.New(breaker.Options{Name: "mail", Failures: 2, OpenFor: 300 * time.Millisecond})
	startRetry(t, n.Addr(), retry.Config{Topic: "orders", Group: "email", Breaker: b,
		Delays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}},
		func(ctx context.Context, r *kgo.Record) error {
			mu.Lock()
			calls++
			isDown := down
			mu.Unlock()
			if isDown {
				return errors.New("mail server down")
			}
			l.ok(string(r.Value))
			return nil
		})
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("orders"))
	for i := range 10 {
		produceSync(t, cl, &kgo.Record{Value: []byte(fmt.Sprint("mail-", i))})
	}
	poll.Until(t, 10*time.Second, func() error {
		if s := b.State(); s == breaker.Closed {
			return fmt.Errorf("breaker %v", s)
		}
		return nil
	})
	time.Sleep(time.Second) // a second of the dependency down: the breaker holds the calls back
	mu.Lock()
	during := calls
	down = false
	mu.Unlock()
	if during > 8 {
		t.Errorf("%d calls in about a second of the dependency down, with the breaker open for 300 ms at a time", during)
	}
	poll.Until(t, 30*time.Second, func() error {
		if got := l.snapshot(); len(got) != 10 {
			return fmt.Errorf("handled %d of 10", len(got))
		}
		return nil
	})
	if s := b.State(); s != breaker.Closed {
		t.Errorf("breaker %v after recovery", s)
	}
}
