package testcluster

import (
	"testing"

	"github.com/berthmq/berth/internal/testports"
)

// ReservePorts returns n distinct loopback ports that are free now and
// stay reserved for this test until its cleanup: no other test process
// reserves them, and the kernel hands none of them out (they lie below
// its ephemeral range). See internal/testports.
func ReservePorts(t testing.TB, n int) []int {
	t.Helper()
	return testports.Reserve(t, n)
}
