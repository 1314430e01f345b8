package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// TestHelperGroupMember is not a test: run as a subprocess (by
// TestMemberKilledLosesPartitions) it is one group member that prints what
// it is assigned and what it consumes, committing as it goes.
func TestHelperGroupMember(t *testing.T) {
	addr := os.Getenv("BERTH_HELPER_MEMBER_ADDR")
	if addr == "" {
		t.Skip("subprocess helper")
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	// The cooperative balancer reports partitions added and taken away;
	// print the whole current assignment each time.
	owned := map[int32]bool{}
	report := func() {
		var ps []int32
		for p := range owned {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		say("assigned %v", ps)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("crashy"), kgo.ConsumeTopics("work"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			for _, p := range a["work"] {
				owned[p] = true
			}
			report()
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			for _, p := range a["work"] {
				delete(owned, p)
			}
			report()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			for _, p := range a["work"] {
				delete(owned, p)
			}
			report()
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { say("record %d %d", r.Partition, r.Offset) })
		if err := cl.CommitUncommittedOffsets(ctx); err == nil && fs.NumRecords() > 0 {
			say("committed")
		}
	}
}

type memberProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
}

func startMember(t *testing.T, addr string) *memberProc {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGroupMember$", "-test.v=false")
	cmd.Env = append(os.Environ(), "BERTH_HELPER_MEMBER_ADDR="+addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &memberProc{cmd: cmd}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			m.mu.Lock()
			m.lines = append(m.lines, sc.Text())
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { m.kill() })
	return m
}

func (m *memberProc) kill() {
	if m.cmd.ProcessState == nil {
		_ = syscall.Kill(m.cmd.Process.Pid, syscall.SIGKILL) // by its own PID
		_ = m.cmd.Wait()
	}
}

// lastAssignment returns the newest "assigned [...]" line.
func (m *memberProc) lastAssignment() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(m.lines[i], "assigned ") {
			return strings.TrimPrefix(m.lines[i], "assigned ")
		}
	}
	return ""
}

func (m *memberProc) records() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for _, l := range m.lines {
		if strings.HasPrefix(l, "record ") {
			out[strings.TrimPrefix(l, "record ")] = true
		}
	}
	return out
}

// A member killed with SIGKILL loses its partitions to the survivor within
// the session timeout, and the survivor resumes from the committed offsets
// so every record is processed.
func TestMemberKilledLosesPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs group members as processes")
	}
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "work", 4, nil)
	produceN(t, n.Addr(), "work", 200)
	a := startMember(t, n.Addr())
	b := startMember(t, n.Addr())
	poll.Until(t, 60*time.Second, func() error {
		la, lb := a.lastAssignment(), b.lastAssignment()
		if la == "" || lb == "" || la == "[]" || lb == "[]" {
			return fmt.Errorf("assignments a=%q b=%q", la, lb)
		}
		if len(a.records())+len(b.records()) < 200 {
			return fmt.Errorf("%d records consumed", len(a.records())+len(b.records()))
		}
		return nil
	})
	kept := b.lastAssignment()
	a.kill()
	killedAt := time.Now()
	produceN(t, n.Addr(), "work", 200)
	poll.Until(t, 40*time.Second, func() error {
		if got := b.lastAssignment(); strings.Count(got, " ")+1 != 4 {
			return fmt.Errorf("survivor has %q", got)
		}
		return nil
	})
	took := time.Since(killedAt)
	// Cooperative-sticky: the survivor never gave up what it had; only the
	// dead member's partitions moved.
	b.mu.Lock()
	var after []string
	for i := len(b.lines) - 1; i >= 0 && strings.TrimPrefix(b.lines[i], "assigned ") != kept; i-- {
		if strings.HasPrefix(b.lines[i], "assigned ") {
			after = append(after, strings.TrimPrefix(b.lines[i], "assigned "))
		}
	}
	b.mu.Unlock()
	for _, a := range after {
		for _, p := range strings.Fields(strings.Trim(kept, "[]")) {
			if !strings.Contains(" "+strings.Trim(a, "[]")+" ", " "+p+" ") {
				t.Fatalf("survivor gave up partition %s (had %s, later %s): more than the orphaned partitions moved", p, kept, a)
			}
		}
	}
	poll.Until(t, 30*time.Second, func() error {
		seen := b.records()
		for k := range a.records() {
			seen[k] = true
		}
		if len(seen) < 400 {
			return fmt.Errorf("%d of 400 records processed", len(seen))
		}
		return nil
	})
	t.Logf("survivor took over all 4 partitions %v after SIGKILL (session timeout 6s)", took.Round(time.Millisecond))
}
