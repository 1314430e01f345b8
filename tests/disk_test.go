package tests

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// logTB keeps the broker's log lines (testcluster logs through t.Log) so a
// test can check what an operator would see.
type logTB struct {
	testing.TB
	mu    sync.Mutex
	lines []string
}

func (l *logTB) Log(args ...any) {
	line := fmt.Sprint(args...)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	l.TB.Log(args...)
}

func (l *logTB) logged(substr string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			return nil
		}
	}
	return fmt.Errorf("broker has not logged %q", substr)
}

// freeBytes is the space available to an unprivileged user under dir.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// With less free space than log.dir.min.free.bytes the broker refuses
// produce with KAFKA_STORAGE_ERROR (before anything is written, so a full
// disk never tears a batch) and says so in its log; metadata and reads go
// on. Restarted with room to write, the same topic takes records from
// offset 0: nothing of the refused attempts reached the log.
func TestProduceRefusedWhileDiskLow(t *testing.T) {
	dir := t.TempDir()
	lt := &logTB{TB: t}
	minFree := freeBytes(t, dir) + 1<<30
	n := tc.StartIn(lt, dir, tc.With("log.dir.min.free.bytes", strconv.FormatInt(minFree, 10)))
	poll.Until(t, 10*time.Second, func() error { return lt.logged("log directory nearly full") })

	tc.CreateTopic(t, n.Addr(), "full", 1, nil)
	// KAFKA_STORAGE_ERROR is retriable: kgo refreshes metadata before
	// retrying, no sooner than MetadataMinAge (5 s by default).
	cl := tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("full"), kgo.RecordRetries(1),
		kgo.RecordDeliveryTimeout(10*time.Second), kgo.MetadataMinAge(10*time.Millisecond), kgo.ProducerLinger(0))
	for i := range 2 {
		err := cl.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Value: []byte("lost")}).FirstErr()
		if !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("produce %d with the disk low: %v, want KAFKA_STORAGE_ERROR", i, err)
		}
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), "full")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := ends.Lookup("full", 0); !ok || o.Err != nil || o.Offset != 0 {
		t.Fatalf("end offset while refusing writes: %+v", o)
	}
	n.Close()

	n = tc.StartIn(t, dir) // log.dir.min.free.bytes=0: the check is off
	cl = tc.Client(t, n.Addr(), kgo.DefaultProduceTopic("full"))
	rec := &kgo.Record{Value: []byte("kept")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce with room to write: %v", err)
	}
	if rec.Offset != 0 {
		t.Fatalf("first accepted record at offset %d, want 0", rec.Offset)
	}
	got := consumeN(t, n.Addr(), "full", 1)
	if string(got[0].Value) != "kept" || got[0].Offset != 0 {
		t.Fatalf("read back %q at %d", got[0].Value, got[0].Offset)
	}
}
