package log

import (
	"context"
	"time"
)

// throttle bounds the cleaner's I/O to rate bytes per second
// (log.cleaner.io.max.bytes.per.second), like Kafka's Throttler: it counts
// the bytes read and written in a window and, when they run ahead of the
// rate, sleeps until they no longer do. Windows last throttleWindow so
// time spent idle (or computing) does not bank an unbounded burst. It uses
// the real clock, not the log's injected one: it paces the disk, not
// logical time.
type throttle struct {
	rate  int64 // bytes per second; <= 0 unlimited
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	start time.Time // of the current window
	n     int64     // bytes in the current window
	slept time.Duration
}

const throttleWindow = time.Second

func newThrottle(rate int64) *throttle {
	return &throttle{rate: rate, now: time.Now, sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// take accounts for n bytes of I/O, sleeping as needed. It returns the
// context's error if ctx ends during a sleep.
func (t *throttle) take(ctx context.Context, n int64) error {
	if t.rate <= 0 || n <= 0 {
		return nil
	}
	now := t.now()
	if t.start.IsZero() {
		t.start = now
	}
	t.n += n
	due := time.Duration(float64(t.n) / float64(t.rate) * float64(time.Second))
	if d := due - now.Sub(t.start); d > 0 {
		if err := t.sleep(ctx, d); err != nil {
			return err
		}
		t.slept += d
		now = t.now()
	}
	if now.Sub(t.start) >= throttleWindow {
		t.start, t.n = now, 0
	}
	return nil
}
