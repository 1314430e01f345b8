package tests

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// Stock librdkafka clients against a three-node cluster: kcat produces
// with acks=all through one broker to a replicated topic and reads it back
// through another; confluent-kafka-python does a keyed round trip and a
// consumer group whose offsets live in the replicated __consumer_offsets.
func TestClusterStockClients(t *testing.T) {
	kcat := need(t, "/usr/bin/kcat")
	py := need(t, "/usr/bin/python3")
	if exec.Command(py, "-c", "import confluent_kafka").Run() != nil {
		need(t, "/nonexistent/python3-confluent-kafka")
	}
	c := tc.StartCluster(t, 3)
	addrs := c.Addrs()
	boot := strings.Join(addrs, ",")
	adm := tc.Admin(t, addrs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	minISR := "2"
	for _, topic := range []string{"kc", "py"} {
		resp, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}

	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, "key%d:value-%d\n", i%7, i)
	}
	run(t, in.String(), kcat, "-b", addrs[0], "-P", "-t", "kc", "-K:", "-X", "acks=all", "-z", "lz4")
	out := run(t, "", kcat, "-b", addrs[2], "-C", "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%k:%s\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 300 {
		t.Fatalf("kcat read %d records from the cluster, want 300", len(lines))
	}
	slices.Sort(lines)
	if !slices.Contains(lines, "key3:value-150") {
		t.Fatalf("record key3:value-150 missing: %v", lines[:5])
	}

	if out := run(t, "", py, "testdata/confluent_roundtrip.py", boot, "py", "zstd", "200"); !strings.Contains(out, "ok 200") {
		t.Fatalf("confluent round trip: %q", out)
	}
	if out := run(t, "", py, "testdata/confluent_group.py", boot, "py", "pyg", "200"); !strings.Contains(out, "ok 200") {
		t.Fatalf("confluent group: %q", out)
	}

	// Every partition is on three brokers, all in sync, and the group's
	// offsets are committed in the replicated __consumer_offsets. A
	// follower that fell behind for replica.lag.time.max.ms (2 s here) on
	// a busy machine is out of the ISR until it catches up: wait for that.
	poll.Until(t, 30*time.Second, func() error {
		md, err := adm.Metadata(ctxT(t, 10*time.Second), "kc", "py", "__consumer_offsets")
		if err != nil {
			return err
		}
		for _, td := range md.Topics {
			for _, pd := range td.Partitions {
				if len(pd.Replicas) != 3 || len(pd.ISR) != 3 {
					return fmt.Errorf("%s-%d: replicas %v isr %v, want 3 of each", td.Topic, pd.Partition, pd.Replicas, pd.ISR)
				}
			}
		}
		return nil
	})
	offs, err := adm.FetchOffsets(ctxT(t, 10*time.Second), "pyg")
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != 200 {
		t.Fatalf("group pyg committed %d records in all, want 200", committed)
	}
}
