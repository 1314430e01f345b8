package log

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berthmq/berth/internal/vfs"
)

var errCheckpointFault = errors.New("injected checkpoint fault")

// failCheckpoint arms a fault on op of the checkpoint file name (and its
// temporary file, which vfs.WriteFileAtomic writes and renames).
func failCheckpoint(ffs *vfs.FaultFS, op, name string) {
	ffs.Inject(vfs.Fault{Op: op, Err: errCheckpointFault,
		Match: func(n string) bool { return strings.HasPrefix(filepath.Base(n), name) }})
}

// syncLog collects what a log logs.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fillRoll appends batches of epoch until the log rolls at least once.
func fillRoll(t *testing.T, l *Log, epoch int32) {
	t.Helper()
	segs := len(l.Segments())
	for len(l.Segments()) == segs {
		appendT(t, l, simpleBatch(4, 200, 1), epoch)
	}
}

// The recovery-point and leader-epoch checkpoints are written after a
// Sync. A failed write of either (create, write, fsync or rename) is
// reported (logged: the data are durable all the same, so Sync succeeds),
// leaves the old file whole and valid, and the next Sync writes it. The
// recovery point is never written past the epoch checkpoint: when that
// fails, the recovery point stays too.
func TestFailedSyncCheckpointKeepsOldFile(t *testing.T) {
	for _, file := range []string{recoveryPointFile, leaderEpochFile} {
		for _, op := range []string{"open", "write", "sync", "rename"} {
			t.Run(file+"/"+op, func(t *testing.T) {
				dir := t.TempDir()
				ffs := vfs.NewFaultFS(nil)
				var logged syncLog
				l := openT(t, dir, testConfig(), Options{FS: ffs, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
				fillRoll(t, l, 0)
				if _, err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				rp0 := readFileT(t, filepath.Join(dir, recoveryPointFile))
				ep0 := readFileT(t, filepath.Join(dir, leaderEpochFile))

				failCheckpoint(ffs, op, file)
				fillRoll(t, l, 1) // a new epoch and a roll: both files are due
				d, err := l.Sync()
				if err != nil || d != l.LogEndOffset() {
					t.Fatalf("Sync with a failing checkpoint: %d, %v; want the data durable to %d", d, err, l.LogEndOffset())
				}
				if !strings.Contains(logged.String(), "writing checkpoint after sync") ||
					!strings.Contains(logged.String(), errCheckpointFault.Error()) {
					t.Fatalf("the failed checkpoint write was not reported; log:\n%s", logged.String())
				}
				rp, ep := readFileT(t, filepath.Join(dir, recoveryPointFile)), readFileT(t, filepath.Join(dir, leaderEpochFile))
				if want := rp0; file == leaderEpochFile && !bytes.Equal(rp, want) {
					t.Fatalf("recovery point written past a failed epoch checkpoint: %q, was %q", rp, want)
				}
				if file == recoveryPointFile && !bytes.Equal(rp, rp0) || file == leaderEpochFile && !bytes.Equal(ep, ep0) {
					t.Fatalf("%s changed by a failed write: rp %q (was %q), epochs %q (was %q)", file, rp, rp0, ep, ep0)
				}
				if _, ok, err := readOffsetCheckpoint(vfs.OS(), filepath.Join(dir, recoveryPointFile)); !ok || err != nil {
					t.Fatalf("recovery point unreadable after a failed write: %v", err)
				}
				if _, err := decodeEpochs(ep); err != nil {
					t.Fatalf("leader-epoch checkpoint unreadable after a failed write: %v", err)
				}

				ffs.ClearFaults()
				fillRoll(t, l, 1)
				if _, err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				if off, _, _ := readOffsetCheckpoint(vfs.OS(), filepath.Join(dir, recoveryPointFile)); off != l.LogEndOffset() {
					t.Fatalf("recovery point %d after healing, want %d", off, l.LogEndOffset())
				}
				if es, _ := decodeEpochs(readFileT(t, filepath.Join(dir, leaderEpochFile))); len(es) != 2 || es[1].Epoch != 1 {
					t.Fatalf("leader epochs %v after healing, want epoch 1 recorded", es)
				}
			})
		}
	}
}

// A failed write of the log-start checkpoint (DeleteRecords) is returned,
// the log start does not move, and the old file stays whole.
func TestFailedLogStartCheckpointKeepsOldFile(t *testing.T) {
	for _, op := range []string{"open", "write", "sync", "rename"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			ffs := vfs.NewFaultFS(nil)
			l := openT(t, dir, testConfig(), Options{FS: ffs})
			fillRoll(t, l, 0)
			fillRoll(t, l, 0)
			if err := l.SetLogStartOffset(3); err != nil {
				t.Fatal(err)
			}
			old := readFileT(t, filepath.Join(dir, logStartFile))

			failCheckpoint(ffs, op, logStartFile)
			if err := l.SetLogStartOffset(7); !errors.Is(err, errCheckpointFault) {
				t.Fatalf("SetLogStartOffset with a failing checkpoint: %v", err)
			}
			if l.LogStartOffset() != 3 {
				t.Fatalf("log start %d after a failed checkpoint, want 3", l.LogStartOffset())
			}
			if got := readFileT(t, filepath.Join(dir, logStartFile)); !bytes.Equal(got, old) {
				t.Fatalf("log-start checkpoint %q after a failed write, was %q", got, old)
			}
			ffs.ClearFaults()
			if err := l.SetLogStartOffset(7); err != nil || l.LogStartOffset() != 7 {
				t.Fatalf("after healing: %v, start %d", err, l.LogStartOffset())
			}
		})
	}
}

// A failed write of the cleaner checkpoint ends the round with the error;
// the old checkpoint stays whole, and the log reopens with it.
func TestFailedCleanerCheckpointKeepsOldFile(t *testing.T) {
	for _, op := range []string{"open", "write", "sync", "rename"} {
		t.Run(op, func(t *testing.T) {
			clk := newClock()
			dir := t.TempDir()
			ffs := vfs.NewFaultFS(nil)
			l := openT(t, dir, compactTestConfig(), Options{FS: ffs, Now: clk.Now})
			fillKeyed(t, l, clk, 20, 7, 0)
			compactT(t, l, DefaultCompactConfig())
			name := filepath.Join(dir, cleanerCheckpointFile)
			old := readFileT(t, name)

			fillKeyed(t, l, clk, 20, 7, 0)
			failCheckpoint(ffs, op, cleanerCheckpointFile)
			if _, err := l.Compact(t.Context(), DefaultCompactConfig()); !errors.Is(err, errCheckpointFault) {
				t.Fatalf("Compact with a failing checkpoint: %v", err)
			}
			if got := readFileT(t, name); !bytes.Equal(got, old) {
				t.Fatalf("cleaner checkpoint %q after a failed write, was %q", got, old)
			}
			if _, err := decodeRounds(old); err != nil {
				t.Fatal(err)
			}
			ffs.ClearFaults()
			want := logRecords(t, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2 := openT(t, dir, compactTestConfig(), Options{Now: clk.Now})
			sameRecords(t, "after reopening", logRecords(t, l2), want)
			if l2.cleaner.firstDirty(l2.LogStartOffset(), l2.LogEndOffset()) >= l2.Segments()[len(l2.Segments())-1].BaseOffset {
				t.Fatal("the failed round counted as checkpointed")
			}
		})
	}
}
