package log

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berthmq/berth/internal/vfs"
)

// swapOps returns the operations of a Compact on l (through ffs) from the
// first rename of a .cleaned file to the cleaner checkpoint's write, with
// dir replaced by "DIR", and checks that every .cleaned file renamed was
// fsynced first.
func swapOps(t *testing.T, l *Log, ffs *vfs.FaultFS, dir string) []string {
	t.Helper()
	ffs.Record()
	if _, err := l.Compact(t.Context(), DefaultCompactConfig()); err != nil {
		t.Fatal(err)
	}
	ops := ffs.Ops()
	first := slices.IndexFunc(ops, func(op string) bool { return strings.HasPrefix(op, "rename ") })
	end := slices.Index(ops, "open "+filepath.Join(dir, cleanerCheckpointFile)+vfs.TempSuffix)
	if first < 0 || end < first {
		t.Fatalf("no swap in %q", ops)
	}
	for _, op := range ops[first:end] {
		if f := strings.Fields(op); f[0] == "rename" && strings.HasSuffix(f[1], cleanedSuffix) &&
			!slices.Contains(ops[:first], "sync "+f[1]) {
			t.Fatalf("%s renamed before it was fsynced: %q", f[1], ops)
		}
	}
	var out []string
	for _, op := range ops[first:end] {
		out = append(out, strings.ReplaceAll(op, dir, "DIR"))
	}
	return out
}

// The swap protocol (clean_swap.go, docs/format/log.md) in the order its
// crash safety needs: the .cleaned files become .swap files, the .log last
// (it commits the set); for a group, the directory is fsynced, the old
// segments' files are deleted and the directory fsynced again; then the
// .swap files take their final names, the .log last. A single segment
// needs no directory fsync: its .log.swap replaces it in one rename.
func TestCompactSwapProtocolOrder(t *testing.T) {
	name := func(base int64, suffix string) string { return "DIR/" + segmentName(base) + suffix }
	t.Run("group with transaction indexes", func(t *testing.T) {
		dir := t.TempDir()
		l, want := compactTxnLog(t, dir)
		l.Close()
		ffs := vfs.NewFaultFS(nil)
		cfg := compactTestConfig()
		cfg.SegmentBytes = 1 << 20
		l = openT(t, dir, cfg, Options{FS: ffs})
		old := l.Segments()
		got := swapOps(t, l, ffs, dir)
		exp := []string{
			"rename " + name(0, ".index.cleaned") + " " + name(0, ".index.swap"),
			"rename " + name(0, ".timeindex.cleaned") + " " + name(0, ".timeindex.swap"),
			"rename " + name(0, ".txnindex.cleaned") + " " + name(0, ".txnindex.swap"),
			"rename " + name(0, ".log.cleaned") + " " + name(0, ".log.swap"),
			"syncdir DIR",
		}
		for _, s := range old[1 : len(old)-1] {
			for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				exp = append(exp, "remove "+name(s.BaseOffset, suf))
			}
		}
		exp = append(exp,
			"remove "+name(0, ".index"),
			"remove "+name(0, ".timeindex"),
			"syncdir DIR",
			"rename "+name(0, ".index.swap")+" "+name(0, ".index"),
			"rename "+name(0, ".timeindex.swap")+" "+name(0, ".timeindex"),
			"rename "+name(0, ".txnindex.swap")+" "+name(0, ".txnindex"),
			"rename "+name(0, ".log.swap")+" "+name(0, ".log"),
		)
		if !slices.Equal(got, exp) {
			t.Fatalf("swap operations\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
		}
		if got := abortedT(t, l, 0, l.LogEndOffset()); !slices.Equal(got, want) {
			t.Fatalf("aborted transactions %+v, want %+v", got, want)
		}
	})
	t.Run("one segment", func(t *testing.T) {
		f := newCrashFixture(t, false)
		ffs := vfs.NewFaultFS(nil)
		l := openT(t, f.dir, f.cfg, Options{FS: ffs})
		got := swapOps(t, l, ffs, f.dir)
		exp := []string{
			"rename " + name(0, ".index.cleaned") + " " + name(0, ".index.swap"),
			"rename " + name(0, ".timeindex.cleaned") + " " + name(0, ".timeindex.swap"),
			"rename " + name(0, ".log.cleaned") + " " + name(0, ".log.swap"),
			"remove " + name(0, ".index"),
			"remove " + name(0, ".timeindex"),
			"rename " + name(0, ".index.swap") + " " + name(0, ".index"),
			"rename " + name(0, ".timeindex.swap") + " " + name(0, ".timeindex"),
			"rename " + name(0, ".log.swap") + " " + name(0, ".log"),
		}
		if !slices.Equal(got, exp) {
			t.Fatalf("swap operations\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
		}
		sameRecords(t, "after the swap", logRecords(t, l), f.post)
	})
}
