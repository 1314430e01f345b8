package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/berthmq/berth/internal/vfs"
)

// Compaction output goes through two sets of files beside the segments,
// named after the base offset of the group's first segment (see
// docs/format/log.md):
//
//   - <base>.log.cleaned, .index.cleaned, .timeindex.cleaned (and
//     .txnindex.cleaned when the group has aborted transactions): being
//     written. Never trusted: Open deletes them.
//   - <base>.log.swap (and the index .swap files): complete, fsynced,
//     replacing every segment whose base lies in [base, end of the swap's
//     data). Open completes the swap (Kafka's rule).
//
// The output's transaction index is the group's entries, concatenated,
// less those of the ABORT markers the clean removed: an entry exists iff
// its marker does. When none is left the output still gets an empty
// .txnindex through the same steps, replacing the first segment's, and
// the empty file is removed once the swap is complete (Open removes an
// empty one too).
//
// Every rewritten group keeps its last batch (as an empty batch if none of
// its records stay), so the .swap's data ends exactly where the group did
// and Open knows which segments it replaces.
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// cleanFiles names one group's output files with a suffix.
type cleanFiles struct{ log, idx, tidx, txn string }

func (l *Log) cleanFiles(base int64, suffix string) cleanFiles {
	stem := l.path(segmentName(base))
	return cleanFiles{stem + logSuffix + suffix, stem + indexSuffix + suffix, stem + timeIndexSuffix + suffix,
		stem + txnIndexSuffix + suffix}
}

func (f cleanFiles) all() []string { return []string{f.idx, f.tidx, f.txn, f.log} }

// errSimulatedCrash is returned by test hooks to stop a clean as a crash
// would, leaving its files on disk.
var errSimulatedCrash = errors.New("log: simulated crash")

// cleanAt runs the test hook, if any, at a named point of a clean.
func (l *Log) cleanAt(point string) error {
	if l.cleanHook == nil {
		return nil
	}
	return l.cleanHook(point)
}

// cleanWriteBuffer is how much output the cleaner gathers per write.
const cleanWriteBuffer = 1 << 20

// cleanGroup rewrites the segments g into one and swaps it in. ok is false
// when the log changed under the clean and the group was left alone. Its
// phases: createCleaned, rewriteGroup, finishCleaned, then swapIn. Until the
// swap, a failure removes the output files (a simulated crash leaves them,
// as a crash would).
func (c *cleaner) cleanGroup(ctx context.Context, g []*segment, st *CompactStats) (ok bool, err error) {
	l := c.l
	base := g[0].base
	cleaned, swap := l.cleanFiles(base, cleanedSuffix), l.cleanFiles(base, swapSuffix)
	f, out, err := l.createCleaned(base, cleaned)
	if err != nil {
		return false, err
	}
	swapped, crashed := false, false
	defer func() {
		if swapped {
			return
		}
		out.release()
		if crashed {
			return // leave the files as a crash would
		}
		for _, p := range append(cleaned.all(), swap.all()...) {
			if rerr := l.fs.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				l.logger.Warn("log: removing compaction output", "dir", l.dir, "file", p, "err", rerr)
			}
		}
	}()

	removed, tombstones, markers := c.f.removed, c.f.tombstones, c.f.markers
	c.f.dropped = c.f.dropped[:0]
	w := segWriter{f: f, s: out, buf: c.wbuf[:0], th: c.th, ctx: ctx,
		interval: int64(c.snap.cfg.IndexIntervalBytes), maxEntries: c.snap.cfg.maxIndexEntries()}
	before, changed, err := c.rewriteGroup(ctx, g, &w)
	if err != nil {
		return false, err
	}
	c.wbuf = w.buf
	if !changed {
		return true, nil // a lone segment with nothing to drop stays as it is
	}
	txnCounts, hasTxn, err := l.finishCleaned(g, &w, cleaned, c.f.dropped)
	if err != nil {
		return false, err
	}
	if err := l.cleanAt("cleaned"); err != nil {
		crashed = errors.Is(err, errSimulatedCrash)
		return false, err
	}
	swapped, err = l.swapIn(g, out, cleaned, swap, c.snap.gen, txnCounts, hasTxn)
	if errors.Is(err, errSimulatedCrash) {
		crashed = true
		return false, err
	}
	if !swapped {
		return false, err
	}
	st.SegmentsCleaned += len(g)
	st.BytesBefore += before
	st.BytesAfter += w.pos
	st.RecordsRemoved += c.f.removed - removed
	st.TombstonesRemoved += c.f.tombstones - tombstones
	st.MarkersRemoved += c.f.markers - markers
	return true, err
}

// createCleaned removes what a failed clean of the group at base may have
// left and creates the output segment, <base>.log.cleaned.
func (l *Log) createCleaned(base int64, cleaned cleanFiles) (vfs.File, *segment, error) {
	for _, p := range cleaned.all() {
		l.fs.Remove(p) // a leftover of a failed clean, if any
	}
	f, err := l.fs.OpenFile(cleaned.log, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("log: compaction output: %w", wrapDiskFull(err))
	}
	return f, newSegment(l.dir, base, f), nil
}

// rewriteGroup writes what the filter keeps of every batch of g to w, the
// output segment's writer. before is the size of g; changed is false when
// the group is one segment from which nothing went.
func (c *cleaner) rewriteGroup(ctx context.Context, g []*segment, w *segWriter) (before int64, changed bool, err error) {
	lastSeg := len(g) - 1
	for lastSeg > 0 && g[lastSeg].size.Load() == 0 {
		lastSeg--
	}
	changed = len(g) > 1
	for gi, s := range g {
		size := s.size.Load()
		before += size
		sc := newScanner(s.f, s.name(), 0, size, s.base, 0)
		for {
			if err := ctx.Err(); err != nil {
				return 0, false, err
			}
			h, pos, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, false, fmt.Errorf("log: compaction: %w", err)
			}
			bsize := int64(h.Size())
			if err := c.th.take(ctx, bsize); err != nil {
				return 0, false, err
			}
			b, err := sc.window(pos, bsize)
			if err != nil {
				return 0, false, err
			}
			nb, err := c.f.filter(h, b, gi == lastSeg && pos+bsize == size)
			if err != nil {
				return 0, false, err
			}
			if nb == nil || &nb[0] != &b[0] {
				changed = true
			}
			if nb != nil {
				if err := w.add(nb); err != nil {
					return 0, false, err
				}
			}
		}
	}
	return before, changed, nil
}

// finishCleaned completes the output of the group g: the rest of its data
// written and fsynced, its index files written and fsynced as .cleaned
// files, and its transaction index (carryTxnIndex: the group's entries less
// dropped, those of the ABORT markers the clean removed). It returns what
// carryTxnIndex does, for swapIn.
func (l *Log) finishCleaned(g []*segment, w *segWriter, cleaned cleanFiles, dropped []AbortedTxn) (txnCounts []int, hasTxn bool, err error) {
	if err := w.flush(); err != nil {
		return nil, false, err
	}
	if err := w.f.Sync(); err != nil {
		return nil, false, fmt.Errorf("log: fsync %s: %w", cleaned.log, err)
	}
	out := w.s
	out.size.Store(w.pos)
	out.finishIndex()
	idx, tidx := out.indexBytes()
	if err := writeFileSync(l.fs, cleaned.idx, idx); err != nil {
		return nil, false, err
	}
	if err := writeFileSync(l.fs, cleaned.tidx, tidx); err != nil {
		return nil, false, err
	}
	return l.carryTxnIndex(g, out, cleaned.txn, dropped)
}

// swapIn replaces the segments g with out under mu. It first checks that g
// are still in the log, unchanged (no truncation since the round began)
// and closed; if not it returns false and the caller deletes the output.
//
// On disk: the .cleaned files become the .swap set (the .log last: it
// commits the set), the directory is fsynced, the old segments' files are
// deleted, the directory is fsynced again, and the .swap files take the
// final names (the .log last, replacing the first old segment's atomically).
// A crash at any point leaves either the old segments or a .swap set that
// Open completes; the two fsyncs keep a crash from leaving the new segment
// beside old ones it replaced. A group of one segment needs neither fsync:
// its swap is one atomic rename. Readers holding an old segment keep its
// open file until they release it.
//
// After the old files are deleted there is no way back: an error then
// fails the log (reopening completes the swap).
//
// The steps, in order: groupUnchanged, formSwapSet, deleteReplaced,
// nameSwapIndexes, nameSwapSegment, installCleaned; the test hook's points
// ("swap", "deleted", "indexed") lie between them.
func (l *Log) swapIn(g []*segment, out *segment, cleaned, swap cleanFiles, gen int64, txnCounts []int, hasTxn bool) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	segs, i, ok := l.groupUnchanged(g, gen, txnCounts)
	if !ok {
		return false, nil
	}
	multi := len(g) > 1
	if err := l.formSwapSet(cleaned, swap, hasTxn, multi); err != nil {
		return false, err
	}
	if err := l.cleanAt("swap"); err != nil {
		return false, err
	}

	// No way back from here.
	ferr := l.deleteReplaced(g, multi)
	if err := l.cleanAt("deleted"); err != nil {
		return false, err
	}
	if ferr == nil {
		ferr = l.nameSwapIndexes(out, swap, hasTxn)
		if err := l.cleanAt("indexed"); err != nil {
			return false, err
		}
		if ferr == nil {
			ferr = l.nameSwapSegment(out, swap, hasTxn)
		}
	}

	l.installCleaned(segs, i, g, out)
	if ferr != nil {
		l.fail(ferr)
		return true, fmt.Errorf("%w: %w", ErrFailed, ferr)
	}
	return true, nil
}

// groupUnchanged reports whether g are still in the log at segs[i:], with
// the transaction index entry counts txnCounts, not the active segment, and
// no truncation since the round began (gen), in a log still writable.
// Called with mu held.
func (l *Log) groupUnchanged(g []*segment, gen int64, txnCounts []int) (segs []*segment, i int, ok bool) {
	if l.writable() != nil || l.truncGen.Load() != gen {
		return nil, 0, false
	}
	segs = l.segments()
	i = slices.Index(segs, g[0])
	if i < 0 || i+len(g) >= len(segs) {
		return nil, 0, false
	}
	for j, s := range g {
		if segs[i+j] != s || s.txnCount() != txnCounts[j] {
			return nil, 0, false
		}
	}
	return segs, i, true
}

// formSwapSet renames the .cleaned files to .swap, the .log last: once it
// is there, the set is complete and Open completes the swap. For a group of
// several segments it then fsyncs the directory, so the set is durable
// before any old file goes; a failure of that fsync fails the log.
func (l *Log) formSwapSet(cleaned, swap cleanFiles, hasTxn, multi bool) error {
	renames := [][2]string{{cleaned.idx, swap.idx}, {cleaned.tidx, swap.tidx}}
	if hasTxn {
		renames = append(renames, [2]string{cleaned.txn, swap.txn})
	}
	for _, p := range append(renames, [2]string{cleaned.log, swap.log}) {
		if err := l.fs.Rename(p[0], p[1]); err != nil {
			return fmt.Errorf("log: compaction swap: %w", err)
		}
	}
	if multi {
		if err := l.fs.SyncDir(l.dir); err != nil {
			l.fail(fmt.Errorf("log: sync %s: %w", l.dir, err))
			return fmt.Errorf("%w: %w", ErrFailed, err)
		}
	}
	return nil
}

// deleteReplaced deletes the files of the segments the swap replaces: all
// of g[1:], and the first segment's indexes (its .log and .txnindex are
// replaced by renames). For a group of several segments it then fsyncs the
// directory, so the old segments are gone for good before the new one
// takes its name. It returns the first error that must fail the log.
func (l *Log) deleteReplaced(g []*segment, multi bool) error {
	var ferr error
	for _, s := range g[1:] {
		for _, p := range []string{s.path, s.indexPath(), s.timeIndexPath(), s.txnPath()} {
			if err := l.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) && ferr == nil {
				ferr = fmt.Errorf("log: remove %s: %w", p, err)
			}
		}
	}
	// The first segment's indexes go before the renames, so a crash never
	// pairs an index with the wrong data. Its transaction index is
	// replaced by the output's, which holds the group's entries.
	for _, p := range []string{g[0].indexPath(), g[0].timeIndexPath()} {
		if err := l.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("log: removing index of a compacted segment", "dir", l.dir, "file", p, "err", err)
		}
	}
	if multi && ferr == nil {
		if err := l.fs.SyncDir(l.dir); err != nil {
			ferr = fmt.Errorf("log: sync %s: %w", l.dir, err)
		}
	}
	return ferr
}

// nameSwapIndexes gives the .swap indexes their final names: the offset
// and time indexes (a failure is only logged: Open rebuilds a missing
// index), then the transaction index (a failure must fail the log).
func (l *Log) nameSwapIndexes(out *segment, swap cleanFiles, hasTxn bool) error {
	for _, p := range [][2]string{{swap.idx, out.indexPath()}, {swap.tidx, out.timeIndexPath()}} {
		if err := l.fs.Rename(p[0], p[1]); err != nil {
			// An index is a cache: Open rebuilds a missing one.
			l.logger.Warn("log: renaming compacted index", "dir", l.dir, "file", p[0], "err", err)
			l.fs.Remove(p[0])
		}
	}
	// The transaction index is not a cache: it takes its final name
	// before the .log does, so a crash in between leaves it for
	// completeSwap, which keeps it.
	if hasTxn {
		if err := l.fs.Rename(swap.txn, out.txnPath()); err != nil {
			return fmt.Errorf("log: compaction swap: %w", err)
		}
	}
	return nil
}

// nameSwapSegment renames the .log.swap over the first old segment, which
// completes the swap, then removes an output transaction index left empty.
func (l *Log) nameSwapSegment(out *segment, swap cleanFiles, hasTxn bool) error {
	if err := l.fs.Rename(swap.log, out.path); err != nil {
		return fmt.Errorf("log: compaction swap: %w", err)
	}
	if hasTxn && out.txnCount() == 0 {
		// Every entry went with its marker: the empty file only
		// stood in for the old one until the .log took its name
		// (Open removes it too).
		if err := l.fs.Remove(out.txnPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("log: removing an empty transaction index", "dir", l.dir, "file", out.txnPath(), "err", err)
		}
	}
	return nil
}

// installCleaned puts out in place of g (at segs[i:]) in the segment list
// and lets go of the old segments. Called with mu held.
func (l *Log) installCleaned(segs []*segment, i int, g []*segment, out *segment) {
	ns := make([]*segment, 0, len(segs)-len(g)+1)
	ns = append(append(append(ns, segs[:i]...), out), segs[i+len(g):]...)
	l.setSegments(ns)
	for _, s := range g {
		s.deleted.Store(true)
		s.release()
		l.unsynced = removeSegment(l.unsynced, s)
	}
	l.dirDirty = true
}

// segWriter writes a cleaned segment through a buffer, indexing each
// batch as the append path does.
type segWriter struct {
	f          vfs.File
	s          *segment
	buf        []byte
	pos        int64 // bytes added
	flushed    int64 // bytes written
	interval   int64
	maxEntries int
	th         *throttle
	ctx        context.Context
}

func (w *segWriter) add(b []byte) error {
	size := int64(len(b))
	w.s.indexBatch(w.pos, peekBase(b), size, peekMaxTimestamp(b), w.interval, w.maxEntries)
	w.buf = append(w.buf, b...)
	w.pos += size
	w.s.next.Store(peekBase(b) + peekLastDelta(b) + 1)
	if len(w.buf) >= cleanWriteBuffer {
		return w.flush()
	}
	return nil
}

func (w *segWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.th.take(w.ctx, int64(len(w.buf))); err != nil {
		return err
	}
	if _, err := w.f.WriteAt(w.buf, w.flushed); err != nil {
		return fmt.Errorf("log: write compacted %s: %w", w.s.name(), wrapDiskFull(err))
	}
	w.flushed += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// writeFileSync creates name with data and fsyncs it.
func writeFileSync(fs vfs.FS, name string, data []byte) error {
	f, err := fs.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("log: create %s: %w", name, wrapDiskFull(err))
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("log: write %s: %w", name, wrapDiskFull(err))
	}
	return nil
}

// recoverCleanerFiles finishes what a crash interrupted, before Open loads
// the segments: .cleaned files are deleted; each <base>.log.swap replaces
// the segments whose base lies in [base, end of its data) and takes its
// final name, with its index .swap files; index .swap files without their
// .log.swap are deleted. It returns the directory listing afterwards.
func (l *Log) recoverCleanerFiles(names []string) ([]string, error) {
	touched := false
	var swaps []int64
	for _, n := range names {
		if strings.HasSuffix(n, cleanedSuffix) {
			l.remove(n)
			touched = true
		} else if stem, ok := strings.CutSuffix(n, swapSuffix); ok {
			if base, ok := parseSegmentName(stem); ok {
				swaps = append(swaps, base)
			}
		}
	}
	for _, base := range swaps {
		if err := l.completeSwap(base, names); err != nil {
			return nil, err
		}
		touched = true
	}
	if !touched && !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, swapSuffix) }) {
		return names, nil
	}
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("log: list %s: %w", l.dir, err)
	}
	for _, n := range names {
		stem, ok := strings.CutSuffix(n, swapSuffix)
		if !ok {
			continue
		}
		// An index .swap without its .log.swap: the set was being
		// formed, or the .log.swap already took its final name before
		// this index did. Either way the segment's index files may not
		// match its data; they are rebuilt.
		// A .txnindex.swap without its .log.swap: the old segments and
		// their transaction indexes are intact; it just goes.
		l.remove(n)
		for _, suf := range []string{indexSuffix, timeIndexSuffix} {
			if base, ok := strings.CutSuffix(stem, suf); ok {
				l.remove(base + indexSuffix)
				l.remove(base + timeIndexSuffix)
			}
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return nil, fmt.Errorf("log: sync %s: %w", l.dir, err)
	}
	return l.fs.ReadDir(l.dir)
}

// completeSwap finishes the swap of <base>.log.swap.
func (l *Log) completeSwap(base int64, names []string) error {
	swap := l.cleanFiles(base, swapSuffix)
	end, corrupt, err := l.swapEnd(swap.log, base)
	if err != nil {
		return err
	}
	l.logger.Warn("log: completing an interrupted compaction swap", "dir", l.dir,
		"segment", segmentName(base)+logSuffix, "replaces_below", end)
	// Without a .txnindex.swap the output's transaction index already
	// took its final name (or the group had none): keep it.
	txnSwap := slices.Contains(names, segmentName(base)+txnIndexSuffix+swapSuffix)
	for _, n := range names {
		if b, ok := parseSegmentName(n); ok && b >= base && (b < end || b == base) {
			if b == base && !txnSwap {
				for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
					l.remove(segmentName(b) + suf)
				}
				continue
			}
			l.removeSegmentFiles(b)
		}
	}
	// The old segments must be gone for good before the new one takes
	// its name; otherwise a crash could leave both.
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("log: sync %s: %w", l.dir, err)
	}
	final := l.cleanFiles(base, "")
	if txnSwap {
		// Open cuts entries past the data if the swap was corrupt.
		if err := l.fs.Rename(swap.txn, final.txn); err != nil {
			return fmt.Errorf("log: complete compaction swap: %w", err)
		}
	}
	for _, p := range [][2]string{{swap.idx, final.idx}, {swap.tidx, final.tidx}} {
		if corrupt {
			l.remove(p[0]) // rebuild the indexes while recovery truncates the data
			continue
		}
		if err := l.fs.Rename(p[0], p[1]); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.remove(p[0])
		}
	}
	if err := l.fs.Rename(swap.log, final.log); err != nil {
		return fmt.Errorf("log: complete compaction swap: %w", err)
	}
	l.dirDirty = true
	return nil
}

// swapEnd returns the offset after the last batch of a .swap segment file
// (base if it has none). corrupt reports a bad batch, which the swap had
// been fsynced before it was named .swap so only a failing disk explains;
// the end is then that of the valid prefix.
func (l *Log) swapEnd(name string, base int64) (end int64, corrupt bool, err error) {
	f, err := l.fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, false, fmt.Errorf("log: open %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("log: stat %s: %w", name, err)
	}
	sc := newScanner(f, name, 0, fi.Size(), base, 0)
	end = base
	for {
		h, _, err := sc.next()
		if err == io.EOF {
			return end, false, nil
		}
		var ce *CorruptionError
		if errors.As(err, &ce) {
			l.logger.Warn("log: compaction swap file is corrupt", "dir", l.dir, "file", name, "err", err)
			return end, true, nil
		}
		if err != nil {
			return 0, false, err
		}
		end = h.LastOffset() + 1
	}
}

// carryTxnIndex writes the transaction index entries of the group g,
// but those of the ABORT markers the clean removed (dropped), to name
// (fsynced) and opens it as out's, when the group had any entry (hasTxn).
// The file is written even when no entry is left, so that the swap
// replaces the first segment's index. It returns each segment's entry
// count, which swapIn checks again under mu.
func (l *Log) carryTxnIndex(g []*segment, out *segment, name string, dropped []AbortedTxn) (counts []int, hasTxn bool, err error) {
	counts = make([]int, len(g))
	var all []byte
	for i, s := range g {
		b, n, err := s.txnBytes()
		if err != nil {
			return nil, false, err
		}
		counts[i] = n
		// Both in marker order.
		for ; len(b) >= txnEntrySize; b = b[txnEntrySize:] {
			t, _ := decodeTxnEntry(b)
			for len(dropped) > 0 && dropped[0].LastOffset < t.LastOffset {
				dropped = dropped[1:]
			}
			if len(dropped) > 0 && dropped[0].LastOffset == t.LastOffset && dropped[0].ProducerID == t.ProducerID {
				continue
			}
			all = append(all, b[:txnEntrySize]...)
		}
		hasTxn = hasTxn || n > 0
	}
	if !hasTxn {
		return counts, false, nil
	}
	if err := writeFileSync(l.fs, name, all); err != nil {
		return nil, false, err
	}
	if len(all) > 0 {
		if _, _, err := out.openTxn(l.fs, name, out.next.Load()); err != nil {
			return nil, false, err
		}
	}
	return counts, true, nil
}
