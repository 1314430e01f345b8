package poll

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	Until(t, time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("%d calls, want 3", calls)
	}
}

// fatalRecorder records Fatalf instead of stopping the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

func TestUntilFailsWithTheLastError(t *testing.T) {
	r := &fatalRecorder{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("Until did not fail the test (recovered %v)", p)
			}
		}()
		Until(r, 50*time.Millisecond, func() error { return errors.New("never") })
	}()
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %v, want about 50ms", d)
	}
	if !strings.Contains(r.msg, "condition not met within") || !strings.Contains(r.msg, "never") {
		t.Errorf("failure message %q", r.msg)
	}
}
