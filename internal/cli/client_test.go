package cli

import (
	"github.com/berthmq/berth/internal/testcluster"

	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
)

// runCLI runs the berth command line in-process with stdin, returning what
// it wrote to stdout and stderr.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return runCLIContext(ctx, stdin, args...)
}

func runCLIContext(ctx context.Context, stdin string, args ...string) (string, string, error) {
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

// integrationBootstrap returns the broker address integration tests run
// against: BERTH_TEST_BOOTSTRAP when set (a running `berth serve`), else a
// broker started in this process for the test.
func integrationBootstrap(t *testing.T) string {
	t.Helper()
	if addr := os.Getenv("BERTH_TEST_BOOTSTRAP"); addr != "" {
		return addr
	}
	return testcluster.Start(t).Addr()
}

// uniqueTopic returns a topic name no earlier run used.
func uniqueTopic(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return fmt.Sprintf("cli-%s-%d", strings.ToLower(name), time.Now().UnixNano())
}

// closedPort returns an address on which nothing listens, and nothing
// will while the test runs (a reserved port, which no other test and no
// ":0" listener is given).
func closedPort(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", testcluster.ReservePorts(t, 1)[0])
}

func TestResolveBootstrapEnv(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		args      []string
		want      []string
	}{
		{"default", "", nil, []string{"127.0.0.1:9092"}},
		{"env", "10.0.0.1:9092", nil, []string{"10.0.0.1:9092"}},
		{"flag beats env", "10.0.0.1:9092", []string{"-b", "a:1,b:2"}, []string{"a:1", "b:2"}},
		{"long flag, spaces", "", []string{"--bootstrap-server", " a:1 , ,b:2 "}, []string{"a:1", "b:2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envBootstrap, tc.env)
			cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
			cf := addClientFlags(cmd)
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if err := cf.resolve(cmd); err != nil {
				t.Fatal(err)
			}
			if got := cf.seeds(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("seeds = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResolveRejectsEmptyBootstrapAndTimeout(t *testing.T) {
	t.Setenv(envBootstrap, "")
	for _, args := range [][]string{{"-b", " , "}, {"--timeout", "0s"}} {
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
		cf := addClientFlags(cmd)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		if err := cf.resolve(cmd); err == nil {
			t.Errorf("%v: resolve succeeded, want an error", args)
		}
	}
}

func TestExplain(t *testing.T) {
	cf := &clientFlags{bootstrap: "127.0.0.1:9092", timeout: 30 * time.Second}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"dial", fmt.Errorf("unable to dial: %w", dial), []string{"cannot reach 127.0.0.1:9092", "is `berth serve` running?", "--bootstrap-server"}},
		{"dns", &net.DNSError{Err: "no such host", Name: "nohost", IsNotFound: true}, []string{"cannot resolve", "--bootstrap-server"}},
		{"deadline", context.DeadlineExceeded, []string{"no answer from 127.0.0.1:9092 within 30s", "--timeout"}},
		{"kerr", fmt.Errorf("topic %q: %w", "t", kerr.TopicAlreadyExists), []string{"TOPIC_ALREADY_EXISTS", "--if-not-exists"}},
		{"kerr with broker message", withBrokerMessage(kerr.InvalidReplicationFactor, "INVALID_REPLICATION_FACTOR: only 1 broker"), []string{"INVALID_REPLICATION_FACTOR: only 1 broker (--replication-factor"}},
		{"other", errors.New("boom"), []string{"boom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cf.explain(tc.err)
			if !errors.Is(got, tc.err) {
				t.Errorf("explain lost the original error: %v", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("explain(%v) = %q, want it to contain %q", tc.err, got, w)
				}
			}
		})
	}
	if cf.explain(nil) != nil {
		t.Error("explain(nil) != nil")
	}
}

func TestWithBrokerMessageDropsRepeats(t *testing.T) {
	err := withBrokerMessage(kerr.TopicAlreadyExists, "TOPIC_ALREADY_EXISTS: Topic with this name already exists.: topic \"a\" already exists")
	if got, want := err.Error(), `TOPIC_ALREADY_EXISTS: topic "a" already exists`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Error("the Kafka error is not wrapped")
	}
	if got := withBrokerMessage(kerr.InvalidConfig, "INVALID_CONFIG"); got != kerr.InvalidConfig {
		t.Errorf("a message that only repeats the code should be dropped, got %v", got)
	}
}

// TestUnreachableBrokerSaysWhatToDo runs each client command against a port
// nothing listens on: every one must fail fast, naming the address and the
// flag to fix.
func TestUnreachableBrokerSaysWhatToDo(t *testing.T) {
	addr := closedPort(t)
	for _, args := range [][]string{
		{"topic", "list"},
		{"topic", "create", "t"},
		{"topic", "describe", "t"},
		{"topic", "delete", "t"},
		{"produce", "t", "--value", "v"},
		{"consume", "t"},
		{"bench", "produce", "--num-records", "1"},
		{"bench", "consume"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			start := time.Now()
			_, _, err := runCLI(t, "", append(args, "-b", addr, "--timeout", "5s")...)
			if err == nil {
				t.Fatal("succeeded against a closed port")
			}
			want := "cannot reach " + addr + ": is `berth serve` running? (--bootstrap-server)"
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s to fail", d)
			}
		})
	}
}
