// Package testports reserves loopback ports for tests whose nodes must
// know their addresses before they start (Raft voters, brokers that
// restart on the same port). It imports nothing of Berth's, so tests
// inside any package can use it; internal/testcluster's ReservePorts is
// the same function.
package testports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Ports of nodes that keep their addresses across restarts come from
// below the kernel's ephemeral range: a port handed out with ":0", or to
// an outgoing connection, can never be one of them, so nothing takes a
// node's port while the node is down. Test processes running at the same
// time (go test runs packages in parallel) keep out of each other's way
// with a lock file per port.
const (
	fixedPortsFirst = 10000
	// fallbackEphemeralFirst is Linux's default first ephemeral port,
	// for systems where the range cannot be read.
	fallbackEphemeralFirst = 32768
)

// ephemeralFirst is the first port of the kernel's ephemeral range.
func ephemeralFirst() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallbackEphemeralFirst
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return fallbackEphemeralFirst
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return fallbackEphemeralFirst
	}
	return n
}

// Reserve returns n distinct loopback ports that are free now and
// stay reserved for this test until its cleanup: no other test process
// reserves them, and the kernel hands none of them out.
func Reserve(t testing.TB, n int) []int {
	t.Helper()
	last := ephemeralFirst() - 1
	if last-fixedPortsFirst < 100*n {
		t.Fatalf("the ephemeral port range starts at %d: no room below it for fixed ports", last+1)
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("berth-test-ports-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	span := last - fixedPortsFirst + 1
	start := rand.IntN(span)
	var ports []int
	for i := 0; i < span && len(ports) < n; i++ {
		port := fixedPortsFirst + (start+i)%span
		lock, ok := lockPort(dir, port)
		if !ok {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			lock.Close() // in use by something else
			continue
		}
		ln.Close()
		t.Cleanup(func() { lock.Close() })
		ports = append(ports, port)
	}
	if len(ports) < n {
		t.Fatalf("found %d of %d free ports in %d-%d", len(ports), n, fixedPortsFirst, last)
	}
	return ports
}

// lockPort takes port's lock file in dir without waiting. The lock goes
// with the file's close, or the process's exit.
func lockPort(dir string, port int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// Addrs is Reserve as 127.0.0.1:port addresses.
func Addrs(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for _, p := range Reserve(t, n) {
		out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	return out
}
