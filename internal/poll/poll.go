// Package poll is how Berth's tests wait for something that happens
// asynchronously: they poll a condition with a deadline instead of
// sleeping for a guessed time. Its only dependency is the standard
// library, so any package's tests may import it.
package poll

import (
	"testing"
	"time"
)

// maxInterval bounds the wait between two calls of the condition.
const maxInterval = 20 * time.Millisecond

// Until calls fn until it returns nil; if within passes first, it fails t
// with fn's last error. The waits between calls start at a millisecond and
// double up to 20 ms, so a condition that holds soon is seen soon.
func Until(t testing.TB, within time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	wait := time.Millisecond
	for {
		err := fn()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("condition not met within %v: %v", within, err)
		}
		time.Sleep(min(wait, time.Until(deadline)))
		wait = min(2*wait, maxInterval)
	}
}
