package tests

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
	"github.com/berthmq/berth/internal/testpg"
)

// HarborCart end to end on three brokers while its parts die: the order
// service, the relay, a consumer of each group, a shipment worker (each
// killed with SIGKILL by its process id, then restarted by `up` as a
// supervisor would) and a broker (killed, then restarted). After the
// orders stop, `harborcart check` finds every order with exactly one
// email, one revenue contribution, one shipment and its fraud flag.
//
// Once on SQLite and once on PostgreSQL, one to two minutes each, most
// of it waiting out the killed members' sessions and job locks: a drill,
// run with BERTH_HARBORCART_DRILL=1 (a count repeats it:
// BERTH_HARBORCART_DRILL=3).
func TestHarborCartSurvivesKills(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("BERTH_HARBORCART_DRILL"))
	if runs <= 0 {
		t.Skip("a chaos drill of a few minutes: set BERTH_HARBORCART_DRILL=1 to run it")
	}
	for i := range runs {
		t.Run(fmt.Sprint("sqlite-", i+1), func(t *testing.T) { harborCartDrill(t, false) })
		t.Run(fmt.Sprint("postgres-", i+1), func(t *testing.T) { harborCartDrill(t, true) })
	}
}

func harborCartDrill(t *testing.T, postgres bool) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "harborcart")
	build := exec.Command("go", "build", "-o", bin, "./examples/harborcart")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	start := time.Now()
	c := tc.StartCluster(t, 3)
	brokers := strings.Join(c.Addrs(), ",")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := l.Addr().String()
	l.Close()
	db := filepath.Join(dir, "harborcart.db")
	pids := filepath.Join(dir, "pids")
	common := []string{"--brokers", brokers, "--db", db, "--http", httpAddr}
	if postgres {
		common = append(common, "--postgres", testpg.Start(t).DSN)
	}
	out := &lockedBuffer{}
	up := exec.Command(bin, append([]string{"up", "--rate", "25", "--pids", pids}, common...)...)
	up.Stdout, up.Stderr = out, out
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children too, for the cleanup
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	go func() { upDone <- up.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-up.Process.Pid, syscall.SIGKILL)
		select {
		case <-upDone:
		case <-time.After(10 * time.Second):
		}
		if t.Failed() || os.Getenv("BERTH_HARBORCART_VERBOSE") != "" {
			t.Logf("harborcart up:\n%s", tail(out.String(), 80))
			// The whole output, and the brokers' logs, stay for a look.
			keep := filepath.Join(os.TempDir(), fmt.Sprintf("harborcart-drill-%d.log", time.Now().UnixNano()))
			if os.WriteFile(keep, []byte(out.String()), 0o644) == nil {
				t.Logf("harborcart up's whole output: %s; the brokers' logs: %s", keep, c.Dir)
			}
		}
	})
	pidOf := func(name string) int {
		var pid int
		poll.Until(t, 30*time.Second, func() error {
			b, _ := os.ReadFile(pids)
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == name {
					pid, _ = strconv.Atoi(f[1])
					return nil
				}
			}
			return fmt.Errorf("no pid of %s yet", name)
		})
		return pid
	}
	// Orders flow before the first kill.
	poll.Until(t, 60*time.Second, func() error {
		if !strings.Contains(out.String(), "consuming") {
			return fmt.Errorf("the consumers have not started")
		}
		return nil
	})
	time.Sleep(2 * time.Second) // orders placed and relayed before the faults: the drill's subject
	for _, name := range []string{"orders", "relay", "consumer-email-notifier", "worker-0", "consumer-sales-analytics", "consumer-fraud-monitor"} {
		pid := pidOf(name)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s (%d): %v", name, pid, err)
		}
		poll.Until(t, 30*time.Second, func() error { // up restarts it
			if p := pidOf(name); p == pid {
				return fmt.Errorf("%s not restarted yet", name)
			}
			return nil
		})
		time.Sleep(time.Second) // let it take up its work before the next fault
	}
	t.Logf("%v: components killed and restarted; killing broker 2", time.Since(start))
	c.Kill(2)
	time.Sleep(3 * time.Second) // orders go on with two of three replicas
	c.Restart(2)
	time.Sleep(2 * time.Second)
	t.Logf("%v: broker 2 back; stopping the orders", time.Since(start))
	// Stop placing orders: up lets the pipeline drain, then stops.
	if err := up.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-upDone:
	case <-time.After(180 * time.Second):
		t.Fatal("harborcart up did not stop within 180 s of SIGINT (it drains for at most 2 minutes)")
	}
	t.Logf("%v: up drained and stopped", time.Since(start))
	check := exec.Command(bin, append([]string{"check", "--wait", "10s"}, common...)...)
	res, err := check.CombinedOutput()
	t.Logf("%v: harborcart check:\n%s", time.Since(start), res)
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	m := regexp.MustCompile(`(?m)^orders\s+(\d+)`).FindSubmatch(res)
	if m == nil {
		t.Fatal("check printed no order count")
	}
	if n, _ := strconv.Atoi(string(m[1])); n < 100 {
		t.Fatalf("only %d orders placed: the drill tested too little", n)
	}
}

// lockedBuffer collects the output of processes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
