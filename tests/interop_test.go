package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// need returns a tool's path, skipping the test when it is missing outside
// CI and failing in CI (where .ci/run installs it).
func need(t *testing.T, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing in CI: .ci/run should install it", path)
		}
		t.Skipf("%s not installed (apt-get install kcat python3-confluent-kafka python3-kafka)", path)
	}
	return path
}

func run(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s %v: %v\nstdout: %s\nstderr: %s", name, args, err, out.String(), errb.String())
		}
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s %v timed out\nstderr: %s", name, args, errb.String())
	}
	return out.String()
}

// kcat (librdkafka) produces keyed records with headers in every codec and
// reads them back.
func TestKcatEveryCodec(t *testing.T) {
	kcat := need(t, "/usr/bin/kcat")
	n := tc.Start(t)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "kcat-" + codec
			var in strings.Builder
			for i := 0; i < 50; i++ {
				fmt.Fprintf(&in, "key%d:value-%d\n", i%3, i)
			}
			run(t, in.String(), kcat, "-b", n.Addr(), "-P", "-t", topic, "-p", "0", "-K:", "-H", "src=kcat",
				"-X", "compression.codec="+codec, "-X", "enable.idempotence=true")
			out := run(t, "", kcat, "-b", n.Addr(), "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
				"-f", "%k|%s|%h|%o\n")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 50 {
				t.Fatalf("kcat read %d records, want 50:\n%s", len(lines), out)
			}
			for i, l := range lines {
				if want := fmt.Sprintf("key%d|value-%d|src=kcat|%d", i%3, i, i); l != want {
					t.Fatalf("record %d: %q, want %q", i, l, want)
				}
			}
		})
	}
	// Metadata listing works too.
	if out := run(t, "", kcat, "-b", n.Addr(), "-L"); !strings.Contains(out, "kcat-zstd") {
		t.Fatalf("kcat -L does not list topics:\n%s", out)
	}
}

// confluent-kafka-python (librdkafka) and kafka-python round trips.
func TestPythonClients(t *testing.T) {
	py := need(t, "/usr/bin/python3")
	n := tc.Start(t)
	if exec.Command(py, "-c", "import confluent_kafka").Run() != nil {
		need(t, "/nonexistent/python3-confluent-kafka")
	}
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run("confluent-"+codec, func(t *testing.T) {
			out := run(t, "", py, "testdata/confluent_roundtrip.py", n.Addr(), "py-"+codec, codec, "200")
			if !strings.Contains(out, "ok 200") {
				t.Fatalf("script said %q", out)
			}
		})
	}
	if exec.Command(py, "-c", "import kafka").Run() != nil {
		need(t, "/nonexistent/python3-kafka")
	}
	t.Run("kafka-python", func(t *testing.T) {
		out := run(t, "", py, "testdata/kafkapython_roundtrip.py", n.Addr(), "kp", "100")
		if !strings.Contains(out, "ok 100") {
			t.Fatalf("script said %q", out)
		}
	})
}

// kcat's balanced consumer (librdkafka, -G) joins a group, reads everything
// and commits; a second run of the same group starts after the commit.
func TestKcatGroupConsumer(t *testing.T) {
	kcat := need(t, "/usr/bin/kcat")
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "kg", 2, nil)
	var in strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&in, "v%d\n", i)
	}
	run(t, in.String(), kcat, "-b", n.Addr(), "-P", "-t", "kg")
	out := run(t, "", kcat, "-b", n.Addr(), "-G", "kcat-group", "kg", "-e", "-f", "%s\n",
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000")
	if got := len(strings.Fields(out)); got != 40 {
		t.Fatalf("kcat -G read %d records, want 40:\n%s", got, out)
	}
	run(t, "v40\nv41\n", kcat, "-b", n.Addr(), "-P", "-t", "kg")
	out = run(t, "", kcat, "-b", n.Addr(), "-G", "kcat-group", "kg", "-e", "-f", "%s\n",
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000")
	if got := strings.Fields(out); len(got) != 2 {
		t.Fatalf("second kcat -G run read %v, want only the 2 new records", got)
	}
}

// confluent-kafka-python's group consumer commits; a restart resumes.
func TestPythonGroupConsumer(t *testing.T) {
	py := need(t, "/usr/bin/python3")
	if exec.Command(py, "-c", "import confluent_kafka").Run() != nil {
		need(t, "/nonexistent/python3-confluent-kafka")
	}
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "pyg", 3, nil)
	produceN(t, n.Addr(), "pyg", 90)
	if out := run(t, "", py, "testdata/confluent_group.py", n.Addr(), "pyg", "pygroup", "60"); !strings.Contains(out, "ok 60") {
		t.Fatalf("first run: %q", out)
	}
	if out := run(t, "", py, "testdata/confluent_group.py", n.Addr(), "pyg", "pygroup", "30"); !strings.Contains(out, "ok 30") {
		t.Fatalf("second run: %q", out)
	}
	offs, err := tc.Admin(t, n.Addr()).FetchOffsets(ctxT(t, 10*time.Second), "pygroup")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 90 {
		t.Fatalf("committed offsets sum to %d, want 90", total)
	}
}

// kafka-python's group consumer joins, reads and commits.
func TestKafkaPythonGroupConsumer(t *testing.T) {
	py := need(t, "/usr/bin/python3")
	if exec.Command(py, "-c", "import kafka").Run() != nil {
		need(t, "/nonexistent/python3-kafka")
	}
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "kpg", 2, nil)
	// Uncompressed: Debian's kafka-python has no snappy library.
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("kpg"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < 50; i++ {
		produceSync(t, cl, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	if out := run(t, "", py, "testdata/kafkapython_group.py", n.Addr(), "kpg", "kpgroup", "50"); !strings.Contains(out, "ok 50") {
		t.Fatalf("kafka-python group consumer: %q", out)
	}
	offs, err := tc.Admin(t, n.Addr()).FetchOffsets(ctxT(t, 10*time.Second), "kpgroup")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 50 {
		t.Fatalf("kafka-python committed offsets sum to %d, want 50", total)
	}
}
