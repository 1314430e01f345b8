// Package testcluster starts real Berth brokers for tests: in-process nodes
// on loopback ports (Start), and separate berth processes (StartProcess)
// for tests that kill a broker with SIGKILL by its own PID.
package testcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/app"
	"github.com/berthmq/berth/internal/config"
)

// Node is an in-process broker.
type Node struct {
	*app.Node
	Dir  string
	t    testing.TB
	cfg  *config.Config
	once sync.Once
}

// Option changes a node's settings before it starts.
type Option func(c *config.Config)

// With sets one broker setting.
func With(name, value string) Option {
	return func(c *config.Config) {
		if err := c.Set(name, value, config.SourceFlag); err != nil {
			panic(err)
		}
	}
}

// Start runs a single-node broker in this process on a free loopback port,
// with data in a temporary directory. It is closed at test cleanup.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	return StartIn(t, t.TempDir(), opts...)
}

// StartIn is Start with a given data directory (to restart over old data).
func StartIn(t testing.TB, dir string, opts ...Option) *Node {
	t.Helper()
	cfg := config.Defaults()
	for k, v := range map[string]string{
		"log.dirs":               dir,
		"listeners":              "PLAINTEXT://127.0.0.1:0",
		"http.listener":          "127.0.0.1:0",
		"log.dir.min.free.bytes": "0",
		// Groups form at once instead of waiting 3 s for more members.
		"group.initial.rebalance.delay.ms": "0",
	} {
		if err := cfg.Set(k, v, config.SourceFlag); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range opts {
		o(cfg)
	}
	level := slog.LevelWarn
	if os.Getenv("BERTH_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
	n, err := app.Start(context.Background(), cfg, logger)
	if err != nil {
		t.Fatalf("starting broker: %v", err)
	}
	node := &Node{Node: n, Dir: dir, t: t, cfg: cfg}
	t.Cleanup(node.Close)
	return node
}

// Close stops the node (idempotent).
func (n *Node) Close() {
	n.once.Do(func() {
		if err := n.Node.Close(); err != nil {
			n.t.Errorf("closing broker: %v", err)
		}
	})
}

// Addr is the Kafka listener address.
func (n *Node) Addr() string { return n.KafkaAddr() }

// Client returns a kgo client for the node, closed at cleanup.
func Client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client, closed at cleanup.
func Admin(t testing.TB, addr string) *kadm.Client {
	return kadm.NewClient(Client(t, addr))
}

// CreateTopic creates a topic or fails the test.
func CreateTopic(t testing.TB, addr, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := Admin(t, addr).CreateTopic(ctx, partitions, 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", name, err)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds the berth binary once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		removeStaleBinaries()
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", binDirPrefix, os.Getpid()))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "berth")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/berth")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// binDirPrefix names the directory of a test process's binary: the
// prefix and its process id. Nothing removes it when the process exits
// (no test owns it), so the next build removes those of processes gone.
const binDirPrefix = "berth-bin-"

func removeStaleBinaries() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), binDirPrefix))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), binDirPrefix) || err != nil || pid == os.Getpid() {
			continue
		}
		// (Old enough too: a directory made by an older version of this
		// helper has a random number, not a process id.)
		info, ierr := e.Info()
		gone := errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
		if gone && ierr == nil && time.Since(info.ModTime()) > 6*time.Hour {
			os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// Process is a berth broker in its own process.
type Process struct {
	t    testing.TB
	Dir  string
	Args []string
	// LogFile, when set before a (re)start, receives the process's stderr
	// (appended, so restarts add to it).
	LogFile string

	cmd      *exec.Cmd
	addr     string
	httpAddr string
	ready    chan [2]string
	done     chan struct{}
	err      error
}

var readyRE = regexp.MustCompile(`berth ready.* kafka=(\S+) http=(\S*)`)

// StartProcess runs `berth serve` with data in dir on a free loopback port
// and waits until it is ready. Later args override the defaults (a
// --listeners of the caller's wins). It is stopped at test cleanup.
func StartProcess(t testing.TB, dir string, args ...string) *Process {
	t.Helper()
	p := newProcess(t, dir, args...)
	p.start()
	return p
}

// StartProcessLogged is StartProcess with the process's stderr (its log
// and the start-up warnings of berth serve) also written to logFile.
func StartProcessLogged(t testing.TB, dir, logFile string, args ...string) *Process {
	t.Helper()
	p := newProcess(t, dir, args...)
	p.LogFile = logFile
	p.start()
	return p
}

// newProcess makes a Process that is not started yet; it is killed at
// test cleanup.
func newProcess(t testing.TB, dir string, args ...string) *Process {
	p := &Process{t: t, Dir: dir, Args: args}
	t.Cleanup(func() { p.Kill() })
	return p
}

func (p *Process) start() {
	p.t.Helper()
	Binary(p.t)
	if err := p.launch(); err != nil {
		p.t.Fatal(err)
	}
	if err := p.waitReady(60 * time.Second); err != nil {
		p.t.Fatal(err)
	}
}

// launch starts the process without waiting for it to be ready. It does
// not touch the testing.TB, so it may run on any goroutine.
func (p *Process) launch() error {
	args := append([]string{"serve", "--log.dirs", p.Dir, "--listeners", "PLAINTEXT://127.0.0.1:0",
		"--http.listener", "127.0.0.1:0", "--log.dir.min.free.bytes", "0"}, p.Args...)
	cmd := exec.Command(binPath, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	var logw io.WriteCloser
	if p.LogFile != "" {
		f, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "=== %s start: berth %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.Join(args, " "))
		logw = f
	}
	if err := cmd.Start(); err != nil {
		if logw != nil {
			logw.Close()
		}
		return err
	}
	p.cmd, p.done, p.ready = cmd, make(chan struct{}), make(chan [2]string, 1)
	p.addr, p.httpAddr = "", ""
	ready, echo, t := p.ready, os.Getenv("BERTH_TEST_LOG") != "", p.t
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if m := readyRE.FindStringSubmatch(line); m != nil {
				select {
				case ready <- [2]string{m[1], m[2]}:
				default:
				}
			}
			if logw != nil {
				io.WriteString(logw, line+"\n")
			}
			if echo {
				t.Log(line)
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	done := p.done
	go func() {
		<-scanned // Wait closes the pipe: read it all first
		err := cmd.Wait()
		if logw != nil {
			fmt.Fprintf(logw, "=== %s exit: %v\n", time.Now().UTC().Format(time.RFC3339Nano), err)
			logw.Close()
		}
		p.err = err
		close(done)
	}()
	return nil
}

// waitReady waits for the "berth ready" line of the process launched last.
func (p *Process) waitReady(within time.Duration) error {
	select {
	case a := <-p.ready:
		p.addr, p.httpAddr = a[0], a[1]
		return nil
	case <-p.done:
		return fmt.Errorf("berth exited before it was ready: %v (log: %s)", p.err, p.LogFile)
	case <-time.After(within):
		p.Kill()
		return fmt.Errorf("berth did not become ready within %v (log: %s)", within, p.LogFile)
	}
}

// Addr is the Kafka listener address of the running process.
func (p *Process) Addr() string { return p.addr }

// HTTPAddr is the HTTP (metrics) listener address of the running process,
// "" when it has none.
func (p *Process) HTTPAddr() string { return p.httpAddr }

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Running reports whether the process was started and has not exited.
func (p *Process) Running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL to this process (by its PID) and waits for it.
func (p *Process) Kill() {
	if !p.Running() {
		return
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Pause stops the process with SIGSTOP (by its PID): it keeps its
// sockets but runs no code until Resume.
func (p *Process) Pause() {
	if p.Running() {
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGSTOP)
	}
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() {
	if p.Running() {
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
	}
}

// Stop sends SIGTERM (and SIGCONT, in case it is paused) and waits for a
// clean exit.
func (p *Process) Stop() error {
	if !p.Running() {
		return p.err
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
	select {
	case <-p.done:
		return p.err
	case <-time.After(60 * time.Second):
		p.Kill()
		return fmt.Errorf("berth did not stop within 60s of SIGTERM")
	}
}

// Restart starts the process again over the same data directory and
// waits until it is ready.
func (p *Process) Restart() {
	p.t.Helper()
	p.start()
}
