package breaker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// The breaker's life: closed until Failures in a row (a success between
// resets the count), open for OpenFor refusing every call, half-open with
// one probe at a time; the probe's failure opens it again, its success
// closes it. Canceled calls do not count.
func TestBreakerStates(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New(Options{Name: "payments", Failures: 3, OpenFor: 10 * time.Second,
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	boom := errors.New("503")
	step := func(want State, allowed bool) {
		t.Helper()
		if got := b.State(); got != want {
			t.Fatalf("state %v, want %v", got, want)
		}
		if ok, _ := b.Allow(); ok != allowed {
			t.Fatalf("Allow() = %v in %v, want %v", ok, want, allowed)
		}
	}
	b.Record(boom)
	b.Record(boom)
	b.Record(nil) // resets
	b.Record(boom)
	b.Record(context.Canceled)
	b.Record(boom)
	step(Closed, true)
	b.Record(boom) // third in a row
	step(Open, false)
	if _, wait := b.Allow(); wait != 10*time.Second {
		t.Fatalf("wait %v, want 10s", wait)
	}
	now = now.Add(10 * time.Second)
	step(HalfOpen, true)        // the probe
	if ok, _ := b.Allow(); ok { // a second caller while the probe runs
		t.Fatal("two probes at once")
	}
	b.Record(boom) // probe failed
	step(Open, false)
	now = now.Add(10 * time.Second)
	step(HalfOpen, true)
	b.Record(nil)
	step(Closed, true)
	if b.transitions[Open] != 2 || b.transitions[HalfOpen] != 2 || b.transitions[Closed] != 1 {
		t.Fatalf("transitions %v", b.transitions)
	}
}

func TestBreakerWait(t *testing.T) {
	b := New(Options{Failures: 1, OpenFor: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	b.Record(errors.New("down"))
	start := time.Now()
	if err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Fatalf("Wait returned after %v, before the breaker half-opened", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Record(errors.New("down")) // the probe failed
	if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context: %v", err)
	}
}
