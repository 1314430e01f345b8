package metadata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berthmq/berth/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(dir string) Config {
	return Config{
		Dir:          dir,
		NodeID:       RaftID(0),
		TickInterval: 10 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// open opens and starts a controller on dir and closes it at cleanup.
func open(t testing.TB, cfg Config) *Controller {
	t.Helper()
	c, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c
}

func mustClose(t testing.TB, c *Controller) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createRec(name string, partitions int) Record {
	reps := make([][]int32, partitions)
	for i := range reps {
		reps[i] = []int32{0}
	}
	return Record{CreateTopic: &CreateTopic{Name: name, ID: NewTopicID(), Partitions: int32(partitions), Replicas: reps}}
}

// copyDir copies the metadata files as they are: what a crash at this
// moment would leave on disk.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestControllerProposeRestart(t *testing.T) {
	dir := t.TempDir()
	c := open(t, testConfig(dir))
	im := c.Image()
	if len(im.ClusterID) != 22 {
		t.Fatalf("cluster id %q, want 22 characters", im.ClusterID)
	}
	sub, cancel := c.Subscribe()
	defer cancel()

	if err := c.Propose(ctx(t), Record{RegisterBroker: &RegisterBroker{ID: 0, Host: "localhost", Port: 9092}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub:
	default:
		t.Fatal("no notification after an image change")
	}
	rec := createRec("orders", 3)
	if err := c.Propose(ctx(t), rec); err != nil {
		t.Fatal(err)
	}
	if err := c.Propose(ctx(t), createRec("orders", 1)); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create: %v, want ErrTopicExists", err)
	}
	// A failing batch applies nothing.
	err := c.Propose(ctx(t), createRec("payments", 1), Record{DeleteTopic: &DeleteTopic{Name: "nope"}})
	if !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("batch: %v, want ErrUnknownTopic", err)
	}
	im = c.Image()
	if im.Topic("payments") != nil {
		t.Fatal("failed batch left topic payments behind")
	}
	tp := im.TopicByID(rec.CreateTopic.ID)
	if tp == nil || tp.Name != "orders" || len(tp.Partitions) != 3 || tp.Partitions[2].Leader != 0 {
		t.Fatalf("topic by id: %+v", tp)
	}
	if _, ok := im.Broker(0); !ok {
		t.Fatal("broker 0 not registered")
	}
	before := EncodeImage(im)
	mustClose(t, c)
	if err := c.Propose(ctx(t), createRec("late", 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Propose after Close: %v, want ErrClosed", err)
	}

	c2, err := Open(testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := EncodeImage(c2.Image()); !bytes.Equal(got, before) {
		t.Fatalf("restart: image\n%s\nwant\n%s", got, before)
	}
	if err := c2.Propose(ctx(t), createRec("x", 1)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Propose before Start: %v, want ErrNotLeader", err)
	}
	if err := c2.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if c2.Image().ClusterID != im.ClusterID {
		t.Fatalf("cluster id changed: %q -> %q", im.ClusterID, c2.Image().ClusterID)
	}
	if c2.Image().Index <= im.Index {
		t.Fatalf("index %d after restart and election, want > %d", c2.Image().Index, im.Index)
	}
	if !c2.IsLeader() {
		t.Fatal("not leader after Start")
	}
}

func TestControllerClusterID(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.ClusterID = "MkU3OEVBNTcwNTJENDM2Qk"
	c := open(t, cfg)
	if got := c.Image().ClusterID; got != cfg.ClusterID {
		t.Fatalf("cluster id %q, want %q", got, cfg.ClusterID)
	}
	mustClose(t, c)
	cfg.ClusterID = "other"
	if _, err := Open(cfg); !errors.Is(err, ErrClusterIDMismatch) {
		t.Fatalf("Open with another cluster id: %v, want ErrClusterIDMismatch", err)
	}
	cfg.ClusterID = ""
	cfg.NodeID = 5
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "not a member") {
		t.Fatalf("Open with another node id: %v", err)
	}
	cfg.NodeID = RaftID(0)
	c = open(t, cfg)
	if got := c.Image().ClusterID; got != "MkU3OEVBNTcwNTJENDM2Qk" {
		t.Fatalf("cluster id %q after restart without one configured", got)
	}
}

func walSize(t testing.TB, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, walName))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestControllerSnapshotCompaction(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SnapshotEvery = 20
	c := open(t, cfg)
	var maxWAL int64
	for i := range 300 {
		if err := c.Propose(ctx(t), createRec(fmt.Sprintf("t%03d", i), 1)); err != nil {
			t.Fatal(err)
		}
		maxWAL = max(maxWAL, walSize(t, dir))
	}
	// 20 entries of ~150 bytes plus HardStates; without compaction the WAL
	// would be ~300 entries.
	if maxWAL > 8<<10 {
		t.Fatalf("WAL grew to %d bytes with SnapshotEvery=20", maxWAL)
	}
	snaps, err := listSnapshots(vfs.OS(), dir)
	if err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots %v (%v), want exactly one", snaps, err)
	}
	if snaps[0] < c.Image().Index-cfg.SnapshotEvery {
		t.Fatalf("newest snapshot %d, image at %d", snaps[0], c.Image().Index)
	}
	// A crash now: restart from the snapshot plus the WAL tail.
	crash := copyDir(t, dir)
	want := EncodeImage(c.Image())
	mustClose(t, c)

	for _, d := range []string{crash, dir} {
		c2, err := Open(testConfig(d))
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodeImage(c2.Image()); !bytes.Equal(got, want) {
			t.Fatalf("%s: image after restart differs:\n%s\nwant\n%s", d, got, want)
		}
		mustClose(t, c2)
	}
	// Close took a snapshot at the last index: the WAL holds no entries.
	if n := walSize(t, dir); n > 256 {
		t.Fatalf("WAL after Close is %d bytes", n)
	}
}

func TestControllerTornWAL(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SnapshotEvery = 1 << 30
	c := open(t, cfg)
	for i := range 10 {
		if err := c.Propose(ctx(t), createRec(fmt.Sprintf("t%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	base := copyDir(t, dir)
	mustClose(t, c)
	full := walSize(t, base)

	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"garbage tail", func(b []byte) []byte { return append(b, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7) }},
		{"zero tail", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }},
		{"cut last frame", func(b []byte) []byte { return b[:len(b)-3] }},
		{"flipped bit in last frame", func(b []byte) []byte { b[len(b)-2] ^= 0x10; return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t, base)
			path := filepath.Join(d, walName)
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path, tc.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := Open(testConfig(d))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer c.Close()
			if n := walSize(t, d); n > full {
				t.Fatalf("WAL not truncated: %d > %d bytes", n, full)
			}
			// The last write was the commit HardState after the last entry;
			// losing it leaves the entry uncommitted until the election.
			if err := c.Start(ctx(t)); err != nil {
				t.Fatal(err)
			}
			got := c.Image()
			for i := range 10 {
				if got.Topic(fmt.Sprintf("t%d", i)) == nil {
					t.Fatalf("topic t%d lost; image:\n%s", i, EncodeImage(got))
				}
			}
		})
	}
}

func TestControllerConcurrentProposals(t *testing.T) {
	c := open(t, testConfig(t.TempDir()))
	const workers, each = 16, 20
	var wg sync.WaitGroup
	errc := make(chan error, workers*each+workers)
	var raceWins sync.Map
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if err := c.Propose(ctx(t), createRec(fmt.Sprintf("w%d-%d", w, i), 1)); err != nil {
					errc <- err
				}
			}
			err := c.Propose(ctx(t), createRec("contended", 1))
			switch {
			case err == nil:
				raceWins.Store(w, true)
			case !errors.Is(err, ErrTopicExists):
				errc <- err
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	wins := 0
	raceWins.Range(func(any, any) bool { wins++; return true })
	if wins != 1 {
		t.Fatalf("%d creates of one topic succeeded, want 1", wins)
	}
	if n := len(c.Image().Topics); n != workers*each+1 {
		t.Fatalf("%d topics, want %d", n, workers*each+1)
	}
}

func TestProducerIDsNeverRepeat(t *testing.T) {
	dir := t.TempDir()
	type block struct{ first, n int64 }
	var blocks []block
	for round := range 4 {
		c := open(t, testConfig(dir))
		for _, n := range []int64{1, 1000, 7} {
			first, err := c.AllocateProducerIDs(ctx(t), n)
			if err != nil {
				t.Fatal(err)
			}
			blocks = append(blocks, block{first, n})
		}
		if round%2 == 0 {
			mustClose(t, c)
			continue
		}
		// Simulate a crash: continue from a copy, without Close's snapshot.
		crash := copyDir(t, dir)
		mustClose(t, c)
		dir = crash
	}
	for i, a := range blocks {
		for _, b := range blocks[i+1:] {
			if a.first < b.first+b.n && b.first < a.first+a.n {
				t.Fatalf("producer id blocks overlap: %v and %v (all: %v)", a, b, blocks)
			}
		}
	}
	c := open(t, testConfig(dir))
	if _, err := c.AllocateProducerIDs(ctx(t), 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("count 0: %v, want ErrInvalidRecord", err)
	}
}

func TestControllerLifecycle(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	if c.Image() == nil || c.Image().Index == 0 {
		t.Fatalf("image after Open of an empty dir: %+v", c.Image())
	}
	mustClose(t, c) // never started
	mustClose(t, c) // idempotent
	if err := c.Start(ctx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}

	c = open(t, testConfig(dir))
	if err := c.Start(ctx(t)); err == nil {
		t.Fatal("second Start succeeded")
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Propose(cancelled, createRec("x", 1)); err == nil {
		// Either the context or the proposal may win; an applied proposal
		// is fine, but then the topic must exist.
		if c.Image().Topic("x") == nil {
			t.Fatal("nil error but topic not created")
		}
	}
	if err := c.Propose(ctx(t)); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("empty batch: %v", err)
	}
	if err := c.Propose(ctx(t), Record{}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("empty record: %v", err)
	}
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("zero Config is valid")
	}
}

// A crash between writing a snapshot and rewriting the WAL leaves a WAL
// whose last HardState (its commit is synced lazily) may trail the
// snapshot. Recovery must take the snapshot's index as committed.
func TestRecoverSnapshotAheadOfWALCommit(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SnapshotEvery = 1 << 30
	c := open(t, cfg)
	for i := range 5 {
		if err := c.Propose(ctx(t), createRec(fmt.Sprintf("t%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	crash := copyDir(t, dir)
	want := EncodeImage(c.Image())
	mustClose(t, c) // snapshot at the last index

	// The crash copy gets the snapshot, and its WAL loses the last
	// HardState (the one committing the last entry).
	snaps, _ := listSnapshots(vfs.OS(), dir)
	b, err := os.ReadFile(filepath.Join(dir, snapName(snaps[len(snaps)-1])))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crash, snapName(snaps[len(snaps)-1])), b, 0o644); err != nil {
		t.Fatal(err)
	}
	walPath := filepath.Join(crash, walName)
	w, _ := os.ReadFile(walPath)
	recs, _, err := readWAL(w)
	if err != nil || recs[len(recs)-1].hs == nil {
		t.Fatalf("WAL does not end with a HardState: %v", err)
	}
	_, cut, _ := readWAL(w[:len(w)-1])
	if err := os.WriteFile(walPath, w[:cut], 0o644); err != nil {
		t.Fatal(err)
	}

	c2, err := Open(testConfig(crash))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := EncodeImage(c2.Image()); !bytes.Equal(got, want) {
		t.Fatalf("image:\n%s\nwant\n%s", got, want)
	}
	if err := c2.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestOpenCorruptSnapshot(t *testing.T) {
	dir := t.TempDir()
	c := open(t, testConfig(dir))
	if err := c.Propose(ctx(t), createRec("orders", 1)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, c)
	snaps, _ := listSnapshots(vfs.OS(), dir)
	path := filepath.Join(dir, snapName(snaps[len(snaps)-1]))
	b, _ := os.ReadFile(path)
	i := bytes.Index(b, []byte("orders"))
	b[i] = 'O'
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var cerr *CorruptionError
	if _, err := Open(testConfig(dir)); !errors.As(err, &cerr) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a damaged snapshot: %v, want *CorruptionError", err)
	}
}
