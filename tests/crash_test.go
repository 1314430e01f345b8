package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// SIGKILL during acks=all production loses no acknowledged record: after a
// restart every acknowledged offset holds the value that was acknowledged
// for it. The active segments' indexes are checkpointed every second, so
// the restart loads them from their index files and checks only the tails
// written after the last checkpoint.
func TestKillDuringAcksAllLosesNoAckedRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a broker process")
	}
	dir := t.TempDir()
	p := tc.StartProcess(t, dir, "--log.flush.offset.checkpoint.interval.ms", "1000")
	tc.CreateTopic(t, p.Addr(), "durable", 3, nil)

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("durable"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(0), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	type ack struct {
		part int32
		off  int64
	}
	var mu sync.Mutex
	acked := map[ack]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", w, i)
				r := &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(v)}
				done := make(chan struct{})
				cl.Produce(ctx, r, func(r *kgo.Record, err error) {
					if err == nil {
						mu.Lock()
						acked[ack{r.Partition, r.Offset}] = string(r.Value)
						mu.Unlock()
					}
					close(done)
				})
				select {
				case <-done:
				case <-stop:
					return
				}
			}
		}(w)
	}
	poll.Until(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < 2000 {
			return fmt.Errorf("%d acks so far", len(acked))
		}
		return nil
	})
	// Wait for an index checkpoint, then let the tails grow past it.
	poll.Until(t, 30*time.Second, func() error {
		m, _ := filepath.Glob(filepath.Join(dir, "durable-*", "*.index"))
		for _, f := range m {
			if fi, err := os.Stat(f); err == nil && fi.Size() > 0 {
				return nil
			}
		}
		return errors.New("no active segment index written yet")
	})
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	poll.Until(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < n+1000 {
			return fmt.Errorf("%d acks so far", len(acked))
		}
		return nil
	})
	p.Kill() // SIGKILL by PID, mid-production
	close(stop)
	cl.Close()
	wg.Wait()
	mu.Lock()
	snapshot := make(map[ack]string, len(acked))
	for k, v := range acked {
		snapshot[k] = v
	}
	mu.Unlock()

	p.Restart()
	ends := map[int32]int64{}
	for k := range snapshot {
		if k.off+1 > ends[k.part] {
			ends[k.part] = k.off + 1
		}
	}
	total := 0
	for _, e := range ends {
		total += int(e)
	}
	got := consumeN(t, p.Addr(), "durable", total)
	seen := map[ack]string{}
	for _, r := range got {
		seen[ack{r.Partition, r.Offset}] = string(r.Value)
	}
	for k, v := range snapshot {
		if seen[k] != v {
			t.Fatalf("acknowledged record %s at partition %d offset %d lost after SIGKILL (found %q)", v, k.part, k.off, seen[k])
		}
	}
	t.Logf("%d acknowledged records all present after SIGKILL and restart", len(snapshot))
}

// A clean restart keeps topics, configs and records.
func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	n := tc.StartIn(t, dir)
	tc.CreateTopic(t, n.Addr(), "keep", 2, map[string]*string{"retention.ms": strp("123456")})
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("keep"))
	for i := 0; i < 100; i++ {
		produceSync(t, cl, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	n.Close()
	n = tc.StartIn(t, dir)
	got := consumeN(t, n.Addr(), "keep", 100)
	if len(got) != 100 {
		t.Fatalf("%d records after restart", len(got))
	}
	rcs, err := tc.Admin(t, n.Addr()).DescribeTopicConfigs(ctxT(t, 10*time.Second), "keep")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("keep", nil)
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" && c.MaybeValue() != "123456" {
			t.Fatalf("retention.ms after restart = %q", c.MaybeValue())
		}
	}
}

// SIGTERM flushes and closes everything: the process exits 0 promptly and
// a restart finds every record.
func TestSigtermShutsDownCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a broker process")
	}
	dir := t.TempDir()
	p := tc.StartProcess(t, dir)
	tc.CreateTopic(t, p.Addr(), "bye", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("bye"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		produceSync(t, cl, &kgo.Record{Value: []byte(fmt.Sprint(i))})
	}
	cl.Close()
	start := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatalf("berth exited with %v after SIGTERM", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	p.Restart()
	if got := consumeN(t, p.Addr(), "bye", 50); string(got[49].Value) != "49" {
		t.Fatalf("last record %q", got[49].Value)
	}
}

// durability.mode=os (Kafka's default: ack after the page-cache write)
// serves the same records.
func TestPageCacheDurabilityMode(t *testing.T) {
	n := tc.Start(t, tc.With("durability.mode", "os"), tc.With("log.flush.interval.ms", "50"))
	tc.CreateTopic(t, n.Addr(), "fast", 1, nil)
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("fast"))
	for i := 0; i < 20; i++ {
		produceSync(t, cl, &kgo.Record{Value: []byte(fmt.Sprint(i))})
	}
	if got := consumeN(t, n.Addr(), "fast", 20); string(got[19].Value) != "19" {
		t.Fatalf("last record %q", got[19].Value)
	}
}
