package testports

import (
	"net"
	"strconv"
	"testing"
)

// Reserved ports lie below the ephemeral range, are distinct, and are
// not reserved twice while held.
func TestReserve(t *testing.T) {
	a := Reserve(t, 6)
	b := Reserve(t, 6)
	seen := map[int]bool{}
	for _, p := range append(a, b...) {
		if p < fixedPortsFirst || p >= ephemeralFirst() {
			t.Errorf("port %d outside %d-%d", p, fixedPortsFirst, ephemeralFirst()-1)
		}
		if seen[p] {
			t.Errorf("port %d reserved twice", p)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("reserved port %d is not free: %v", p, err)
			continue
		}
		ln.Close()
	}
	// The kernel's own ports come from elsewhere.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if p := ln.Addr().(*net.TCPAddr).Port; seen[p] {
		t.Errorf("the kernel handed out reserved port %d", p)
	}
}
