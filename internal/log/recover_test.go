package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/berthmq/berth/internal/batch"
	"github.com/berthmq/berth/internal/vfs"
)

// recoveryFixture is a crashed log: 40 batches of 3 records (offsets 3i to
// 3i+2), epochs 1-4 changing every 10 batches, over several segments.
type recoveryFixture struct {
	dir       string
	batchSize int64
	segs      []SegmentInfo
}

func (f *recoveryFixture) last() SegmentInfo { return f.segs[len(f.segs)-1] }

// pos is the file position of the batch with base offset base in segment s.
func (f *recoveryFixture) pos(s SegmentInfo, base int64) int64 {
	return (base - s.BaseOffset) / 3 * f.batchSize
}

func (f *recoveryFixture) logPath(s SegmentInfo) string {
	return segFile(f.dir, s.BaseOffset, logSuffix)
}

func newRecoveryFixture(t *testing.T, clean bool) *recoveryFixture {
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{})
	b := simpleBatch(3, 100, 1)
	for i := range 40 {
		appendT(t, l, b, int32(1+i/10))
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	f := &recoveryFixture{dir: dir, batchSize: int64(len(b)), segs: l.Segments()}
	if len(f.segs) < 3 || f.last().Size < 2*f.batchSize {
		t.Fatalf("fixture needs 3 segments and 2 batches in the last: %+v", f.segs)
	}
	if clean {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		crash(l)
	}
	return f
}

func mutateFile(t *testing.T, name string, fn func(b []byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, fn(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func flip(pos int64) func([]byte) []byte {
	return func(b []byte) []byte { b[pos] ^= 0x40; return b }
}

func TestRecovery(t *testing.T) {
	tests := []struct {
		name  string
		clean bool // Close before the damage instead of crashing
		// damage breaks the files; it returns the LEO recovery must reach.
		damage func(t *testing.T, f *recoveryFixture) int64
	}{
		{"intact", false, func(t *testing.T, f *recoveryFixture) int64 { return 120 }},
		{"intact after clean shutdown", true, func(t *testing.T, f *recoveryFixture) int64 { return 120 }},
		{"truncated mid-header", false, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			os.Truncate(f.logPath(s), f.pos(s, 117)+30)
			return 117
		}},
		{"truncated inside the length field", false, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			os.Truncate(f.logPath(s), f.pos(s, 117)+10)
			return 117
		}},
		{"truncated mid-records", false, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			os.Truncate(f.logPath(s), f.pos(s, 117)+f.batchSize-7)
			return 117
		}},
		{"truncated mid-records after clean shutdown", true, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			os.Truncate(f.logPath(s), f.pos(s, 117)+f.batchSize-7)
			return 117
		}},
		{"garbage appended", false, func(t *testing.T, f *recoveryFixture) int64 {
			mutateFile(t, f.logPath(f.last()), func(b []byte) []byte {
				g := make([]byte, 300)
				for i := range g {
					g[i] = byte(rand.IntN(256))
				}
				return append(b, g...)
			})
			return 120
		}},
		{"a plausible header appended", false, func(t *testing.T, f *recoveryFixture) int64 {
			mutateFile(t, f.logPath(f.last()), func(b []byte) []byte {
				h := simpleBatch(3, 100, 1)
				putHeader(h, 120, 4)
				return append(b, h[:batch.HeaderSize+20]...)
			})
			return 120
		}},
		{"zero-filled tail", false, func(t *testing.T, f *recoveryFixture) int64 {
			mutateFile(t, f.logPath(f.last()), func(b []byte) []byte { return append(b, make([]byte, 8192)...) })
			return 120
		}},
		{"flipped byte in the last batch's records", false, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			mutateFile(t, f.logPath(s), flip(f.pos(s, 117)+f.batchSize-5))
			return 117
		}},
		{"flipped byte in the last batch's CRC-covered header", false, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			mutateFile(t, f.logPath(s), flip(f.pos(s, 117)+offMaxTimestamp+7))
			return 117
		}},
		{"flipped CRC field", false, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			mutateFile(t, f.logPath(s), flip(f.pos(s, 117)+offCRC))
			return 117
		}},
		{"bad magic", false, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			mutateFile(t, f.logPath(s), func(b []byte) []byte { b[f.pos(s, 117)+offMagic] = 1; return b })
			return 117
		}},
		{"huge length", false, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			mutateFile(t, f.logPath(s), func(b []byte) []byte {
				binary.BigEndian.PutUint32(b[f.pos(s, 117)+offLength:], 0x7fffffff)
				return b
			})
			return 117
		}},
		{"offset going backwards", false, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			mutateFile(t, f.logPath(s), func(b []byte) []byte {
				binary.BigEndian.PutUint64(b[f.pos(s, 117):], 100) // outside the CRC
				return b
			})
			return 117
		}},
		{"corrupted middle batch of the last segment", false, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			base := s.BaseOffset + 3
			mutateFile(t, f.logPath(s), flip(f.pos(s, base)+batch.HeaderSize+10))
			return base
		}},
		{"corrupted batch in an early segment, no recovery point", false, func(t *testing.T, f *recoveryFixture) int64 {
			os.Remove(filepath.Join(f.dir, recoveryPointFile))
			s := f.segs[0]
			mutateFile(t, f.logPath(s), flip(f.pos(s, 6)+batch.HeaderSize+10))
			return 6
		}},
		{"empty trailing segment", false, func(t *testing.T, f *recoveryFixture) int64 {
			os.WriteFile(segFile(f.dir, 120, logSuffix), nil, 0o644)
			return 120
		}},
		{"missing index files", false, func(t *testing.T, f *recoveryFixture) int64 {
			os.Remove(segFile(f.dir, f.segs[0].BaseOffset, indexSuffix))
			os.Remove(segFile(f.dir, f.segs[1].BaseOffset, timeIndexSuffix))
			return 120
		}},
		{"missing index files after clean shutdown", true, func(t *testing.T, f *recoveryFixture) int64 {
			for _, s := range f.segs {
				os.Remove(segFile(f.dir, s.BaseOffset, indexSuffix))
				os.Remove(segFile(f.dir, s.BaseOffset, timeIndexSuffix))
			}
			return 120
		}},
		{"garbage index", true, func(t *testing.T, f *recoveryFixture) int64 {
			os.WriteFile(segFile(f.dir, f.segs[0].BaseOffset, indexSuffix), []byte("not an index, 21 b"), 0o644)
			return 120
		}},
		{"index entries not increasing", true, func(t *testing.T, f *recoveryFixture) int64 {
			mutateFile(t, segFile(f.dir, f.segs[1].BaseOffset, indexSuffix), func(b []byte) []byte {
				if len(b) < 16 {
					t.Fatal("index too small for the test")
				}
				copy(b[len(b)-8:], b[:8])
				return b
			})
			return 120
		}},
		{"index points past the file end", true, func(t *testing.T, f *recoveryFixture) int64 {
			mutateFile(t, segFile(f.dir, f.segs[0].BaseOffset, indexSuffix), func(b []byte) []byte {
				return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(b, 1000), 1<<30)
			})
			return 120
		}},
		{"index names offsets beyond the data", true, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.segs[0]
			mutateFile(t, segFile(f.dir, s.BaseOffset, indexSuffix), func(b []byte) []byte {
				// The last batch's position, with an offset past the segment.
				return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(b, 5000), uint32(s.Size-f.batchSize))
			})
			return 120
		}},
		{"active index names offsets beyond the data", true, func(t *testing.T, f *recoveryFixture) int64 {
			s := f.last()
			os.Truncate(f.logPath(s), 0) // and the index still has entries
			return s.BaseOffset
		}},
		{"garbage time index", true, func(t *testing.T, f *recoveryFixture) int64 {
			os.WriteFile(segFile(f.dir, f.segs[1].BaseOffset, timeIndexSuffix), bytes.Repeat([]byte{0xff}, 24), 0o644)
			return 120
		}},
		{"missing leader-epoch checkpoint", false, func(t *testing.T, f *recoveryFixture) int64 {
			os.Remove(filepath.Join(f.dir, leaderEpochFile))
			return 120
		}},
		{"missing leader-epoch checkpoint after clean shutdown", true, func(t *testing.T, f *recoveryFixture) int64 {
			os.Remove(filepath.Join(f.dir, leaderEpochFile))
			return 120
		}},
		{"malformed leader-epoch checkpoint", true, func(t *testing.T, f *recoveryFixture) int64 {
			os.WriteFile(filepath.Join(f.dir, leaderEpochFile), []byte("0\n2\n1 0\n"), 0o644)
			return 120
		}},
		{"malformed recovery point and log start", false, func(t *testing.T, f *recoveryFixture) int64 {
			os.WriteFile(filepath.Join(f.dir, recoveryPointFile), []byte("x"), 0o644)
			os.WriteFile(filepath.Join(f.dir, logStartFile), []byte("0\n1\n-5\n"), 0o644)
			return 120
		}},
		{"leftover tmp files", true, func(t *testing.T, f *recoveryFixture) int64 {
			os.WriteFile(filepath.Join(f.dir, leaderEpochFile+tmpSuffix), []byte("junk"), 0o644)
			os.WriteFile(segFile(f.dir, 0, indexSuffix+tmpSuffix), []byte("junk"), 0o644)
			return 120
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newRecoveryFixture(t, tc.clean)
			want := tc.damage(t, f)
			l := openT(t, f.dir, testConfig(), Options{})
			checkRecovered(t, l, want)
			// Appends continue at the recovered end.
			res := appendT(t, l, simpleBatch(3, 100, 1), 9)
			if res.FirstOffset != want {
				t.Fatalf("append at %d, want %d", res.FirstOffset, want)
			}
			// And the result is stable across both kinds of restart.
			crash(l)
			l = openT(t, f.dir, testConfig(), Options{})
			checkRecovered(t, l, want+3)
			l.Close()
			l = openT(t, f.dir, testConfig(), Options{})
			checkRecovered(t, l, want+3)
			names, _ := os.ReadDir(f.dir)
			for _, n := range names {
				if filepath.Ext(n.Name()) == tmpSuffix {
					t.Fatalf("leftover %s", n.Name())
				}
			}
		})
	}
}

// checkRecovered checks that l holds whole valid batches up to leo and that
// its leader-epoch cache matches the epochs in the batches.
func checkRecovered(t *testing.T, l *Log, leo int64) {
	t.Helper()
	if l.LogEndOffset() != leo {
		t.Fatalf("LEO %d, want %d", l.LogEndOffset(), leo)
	}
	hs := readAllBatches(t, l, l.LogStartOffset())
	var n int64
	for _, h := range hs {
		n += int64(h.LastOffsetDelta) + 1
	}
	if n != leo-l.LogStartOffset() {
		t.Fatalf("read %d records, want %d", n, leo-l.LogStartOffset())
	}
	var want epochCache
	for _, h := range hs {
		want.assign(h.LeaderEpoch, h.BaseOffset)
	}
	l.mu.Lock()
	got := fmt.Sprint(l.epochs.entries)
	l.mu.Unlock()
	if got != fmt.Sprint(want.entries) {
		t.Fatalf("epoch cache %s, batches say %v", got, want.entries)
	}
	for _, s := range l.segments() {
		s.idxMu.RLock()
		err := s.idx.check(s.size.Load())
		if err == nil {
			err = s.tidx.check()
		}
		s.idxMu.RUnlock()
		if err != nil {
			t.Fatalf("segment %d index: %v", s.base, err)
		}
	}
}

func TestRecoveryDropsSegmentsAfterCorruption(t *testing.T) {
	f := newRecoveryFixture(t, false)
	os.Remove(filepath.Join(f.dir, recoveryPointFile))
	s := f.segs[1]
	mutateFile(t, f.logPath(s), flip(f.pos(s, s.BaseOffset)+offCRC))
	l := openT(t, f.dir, testConfig(), Options{})
	checkRecovered(t, l, s.BaseOffset)
	for _, later := range f.segs[2:] {
		if _, err := os.Stat(f.logPath(later)); !os.IsNotExist(err) {
			t.Fatalf("segment %d after the corrupt one survived: %v", later.BaseOffset, err)
		}
	}
}

func TestRecoveryRebuildsIndexFiles(t *testing.T) {
	f := newRecoveryFixture(t, true)
	idx := segFile(f.dir, f.segs[0].BaseOffset, indexSuffix)
	want, _ := os.ReadFile(idx)
	os.Remove(idx)
	l := openT(t, f.dir, testConfig(), Options{})
	checkRecovered(t, l, 120)
	got, err := os.ReadFile(idx)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("rebuilt index differs (%v)", err)
	}
}

// A log start checkpoint past the recovered data (the data was lost)
// empties the log; with no leader-epoch checkpoint to go on, the epochs
// are rebuilt from what is left, not from the segments just released
// (Open failed with "file already closed").
func TestRecoveryLogStartPastDataWithoutEpochCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{})
	for i := range 3 {
		appendT(t, l, mkBatch(rec{ts: int64(i), value: []byte("v")}), 2)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := writeOffsetCheckpoint(vfs.OS(), filepath.Join(dir, logStartFile), 100); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, leaderEpochFile)); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, testConfig(), Options{})
	if start, end := l.LogStartOffset(), l.LogEndOffset(); start != 100 || end != 100 {
		t.Fatalf("log start %d, end %d, want both 100 (emptied)", start, end)
	}
	appendT(t, l, mkBatch(rec{ts: 9, value: []byte("after")}), 3)
	if e := l.LatestEpoch(); e != 3 {
		t.Fatalf("latest epoch %d after an append at 3", e)
	}
}
