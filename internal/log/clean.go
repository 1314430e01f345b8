package log

// Log compaction (cleanup.policy=compact), after Kafka's log cleaner.
//
// A round (one Compact call) works between the first dirty offset (the
// cleaner checkpoint: everything below it has been mapped by an earlier
// round) and the first uncleanable offset: the base of the active segment,
// of the first dirty segment whose largest timestamp is within
// min.compaction.lag.ms, or of the first segment holding offsets at or above
// CompactConfig.MaxOffset, whichever is lowest.
//
//  1. Map: read the dirty batches and record, for each key, the latest
//     offset (offsetMap, bounded by MaxMemoryBytes), skipping aborted
//     transactional batches and control batches. If the map fills, the
//     round ends at the last batch mapped whole; the rest stays dirty.
//  2. Clean: rewrite every segment from the log start to the end of the
//     mapped section, in groups whose sizes add up to at most
//     segment.bytes, one group at a time. A record goes if the map holds a
//     later offset for its key, or if it is a tombstone past its delete
//     horizon, and so does every record of an aborted transaction (see
//     abortedSet), and a transaction marker once its transaction has no
//     batch left and its delete horizon has passed (batchFilter.marker).
//     Each group is written as <base>.log.cleaned (and indexes),
//     fsynced, and swapped in under Log.mu through <base>.*.swap files (see
//     clean_swap.go and docs/format/log.md).
//  3. Checkpoint: append the round to cleaner-offset-checkpoint.
//
// Offsets never change: a rewritten batch keeps its base offset, leader
// epoch, producer id, epoch and base sequence, lastOffsetDelta and
// baseTimestamp, and each surviving record its offset and timestamp deltas.
//
// Tombstones follow Kafka's rule (KIP-534): a tombstone stays readable for
// delete.retention.ms after the first round that mapped it, whatever its
// own timestamp says. The checkpoint keeps, per round, the offset range it
// mapped first and its delete horizon (round start + delete.retention.ms
// at that time), standing in for the horizon Kafka writes into each batch
// header; the log keeps batch headers as the producer wrote them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/berthmq/berth/internal/batch"
)

// CompactConfig holds the settings of one partition's compaction. Names in
// comments are Kafka's topic (and broker) config names.
type CompactConfig struct {
	// DeleteRetentionMs (delete.retention.ms): a tombstone stays readable
	// this long after the first clean that passed it.
	DeleteRetentionMs int64
	// MinCompactionLagMs (min.compaction.lag.ms): a segment whose largest
	// timestamp is younger than this is not cleaned, nor any after it.
	MinCompactionLagMs int64
	// MaxCompactionLagMs (max.compaction.lag.ms): a dirty segment whose
	// first batch is older than this makes NeedsCompaction true whatever
	// the dirty ratio. Only closed segments are cleaned: as Kafka does,
	// the owner should cap segment.ms at this value.
	MaxCompactionLagMs int64
	// MinCleanableDirtyRatio (min.cleanable.dirty.ratio): NeedsCompaction
	// is true once dirty bytes / (clean + dirty bytes) exceeds it.
	MinCleanableDirtyRatio float64
	// MaxMemoryBytes (log.cleaner.dedupe.buffer.size, per clean here)
	// bounds the key map; 0 means 16 MiB. Each key costs 24 bytes; a
	// map too small for the dirty section cleans it over several rounds.
	MaxMemoryBytes int64
	// IORateBytesPerSec (log.cleaner.io.max.bytes.per.second) throttles
	// the bytes the cleaner reads and writes; 0 is unlimited.
	IORateBytesPerSec int64
	// MaxOffset is the exclusive bound of what may be cleaned: the
	// partition's last stable offset (at most its high watermark), as
	// Kafka never cleans past it. A record above it may yet be truncated
	// away, so it must not supersede anything. math.MaxInt64 (as in
	// DefaultCompactConfig) bounds nothing, for a log without replicas;
	// the zero value cleans nothing.
	MaxOffset int64
}

// DefaultCompactConfig returns Kafka's defaults, and no MaxOffset bound.
func DefaultCompactConfig() CompactConfig {
	return CompactConfig{
		DeleteRetentionMs:      24 * time.Hour.Milliseconds(),
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
		MinCleanableDirtyRatio: 0.5,
		MaxMemoryBytes:         defaultCleanerMemory,
		IORateBytesPerSec:      0,
		MaxOffset:              math.MaxInt64,
	}
}

const defaultCleanerMemory = 16 << 20

// Validate checks every field's range.
func (c CompactConfig) Validate() error {
	switch {
	case c.DeleteRetentionMs < 0:
		return fmt.Errorf("log: delete.retention.ms %d must be at least 0", c.DeleteRetentionMs)
	case c.MinCompactionLagMs < 0:
		return fmt.Errorf("log: min.compaction.lag.ms %d must be at least 0", c.MinCompactionLagMs)
	case c.MaxCompactionLagMs < 1:
		return fmt.Errorf("log: max.compaction.lag.ms %d must be at least 1", c.MaxCompactionLagMs)
	case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("log: min.cleanable.dirty.ratio %v not in [0, 1]", c.MinCleanableDirtyRatio)
	case c.MaxMemoryBytes < 0:
		return fmt.Errorf("log: cleaner memory %d must be at least 0", c.MaxMemoryBytes)
	case c.IORateBytesPerSec < 0:
		return fmt.Errorf("log: cleaner I/O rate %d must be at least 0", c.IORateBytesPerSec)
	case c.MaxOffset < 0:
		return fmt.Errorf("log: compaction bound %d must be at least 0", c.MaxOffset)
	}
	return nil
}

func (c CompactConfig) memory() int64 {
	if c.MaxMemoryBytes == 0 {
		return defaultCleanerMemory
	}
	return c.MaxMemoryBytes
}

// CompactStats describes one Compact call.
type CompactStats struct {
	SegmentsCleaned   int   // segments rewritten (a group of n counts n)
	BytesBefore       int64 // their size before
	BytesAfter        int64 // the size of what replaced them
	RecordsRemoved    int64 // records dropped, tombstones included
	TombstonesRemoved int64 // tombstones dropped because their delete horizon passed
	MarkersRemoved    int64 // transaction markers dropped (not counted in RecordsRemoved)
	Skipped           string
}

// ErrCompactMapTooSmall: CompactConfig.MaxMemoryBytes cannot hold the keys
// of a single batch, so compaction cannot make progress.
var ErrCompactMapTooSmall = errors.New("log: compaction memory too small for one batch")

// cleanSnap is what a round starts from, taken under mu.
type cleanSnap struct {
	segs       []*segment // acquired; unpin when done
	gen        int64      // truncGen: any truncation aborts the round
	cfg        Config
	firstDirty int64
	rounds     []cleanRound
	due        int64
}

func (l *Log) cleanSnapshot() cleanSnap {
	l.mu.Lock()
	defer l.mu.Unlock()
	segs := l.segments()
	out := make([]*segment, 0, len(segs))
	for _, s := range segs {
		if s.acquire() { // cannot fail: the list holds a reference
			out = append(out, s)
		}
	}
	return cleanSnap{
		segs:       out,
		gen:        l.truncGen.Load(),
		cfg:        l.cfg,
		firstDirty: l.cleaner.firstDirty(l.logStart.Load(), l.leo.Load()),
		rounds:     l.cleaner.rounds,
		due:        l.cleaner.due,
	}
}

// cleanPlan locates the cleanable dirty section: segs[dirty:stop].
type cleanPlan struct {
	dirty, stop int
	cleanBytes  int64 // below the dirty section
	dirtyBytes  int64
	forced      bool   // a dirty segment is older than max.compaction.lag.ms
	why         string // why the dirty section is empty
}

func (l *Log) plan(segs []*segment, firstDirty int64, cfg CompactConfig, now int64) cleanPlan {
	var p cleanPlan
	last := len(segs) - 1
	if last < 0 {
		p.why = "log closed"
		return p
	}
	i := findSegment(segs, firstDirty)
	if i < last && segs[i].next.Load() <= firstDirty {
		i++
	}
	lagCut := satSub(now, cfg.MinCompactionLagMs)
	j := i
	for ; j < last; j++ {
		s := segs[j]
		if s.next.Load() > cfg.MaxOffset {
			p.why = fmt.Sprintf("dirty segment %s reaches past MaxOffset %d", s.name(), cfg.MaxOffset)
			break
		}
		if cfg.MinCompactionLagMs > 0 && s.maxTS.Load() > lagCut {
			p.why = fmt.Sprintf("dirty segment %s is younger than min.compaction.lag.ms", s.name())
			break
		}
	}
	if j == last {
		p.why = "no dirty data outside the active segment"
	}
	p.dirty, p.stop = i, j
	for k, s := range segs[:j] {
		if k < i {
			p.cleanBytes += s.size.Load()
		} else {
			p.dirtyBytes += s.size.Load()
		}
	}
	if cut := satSub(now, cfg.MaxCompactionLagMs); cut > 0 {
		for _, s := range segs[i:j] {
			if ts := firstBatchTimestamp(s); ts > 0 && ts < cut {
				p.forced = true
				break
			}
		}
	}
	return p
}

// firstBatchTimestamp is the maxTimestamp of the segment's first batch,
// which Kafka takes as the time the segment's data became dirty; -1 if
// unknown.
func firstBatchTimestamp(s *segment) int64 {
	if s.size.Load() < batch.HeaderSize {
		return -1
	}
	var b [batch.HeaderSize]byte
	if _, err := s.f.ReadAt(b[:], 0); err != nil {
		return -1
	}
	return peekMaxTimestamp(b[:])
}

// NeedsCompaction reports whether a clean is due now: the closed, cleanable
// dirty section is more than MinCleanableDirtyRatio of the log (dirty bytes
// over clean plus dirty bytes, as Kafka computes it), a dirty segment is
// older than MaxCompactionLagMs, or a tombstone kept by the last clean has
// reached its delete horizon. False for an invalid config or a closed or
// failed log.
func (l *Log) NeedsCompaction(cfg CompactConfig) bool {
	if cfg.Validate() != nil || l.writable() != nil {
		return false
	}
	snap := l.cleanSnapshot()
	defer unpin(snap.segs)
	now := l.nowMs()
	p := l.plan(snap.segs, snap.firstDirty, cfg, now)
	if p.dirtyBytes > 0 && (p.forced || float64(p.dirtyBytes)/float64(p.cleanBytes+p.dirtyBytes) > cfg.MinCleanableDirtyRatio) {
		return true
	}
	return snap.due > 0 && now >= snap.due
}

// Compact runs one round of compaction over the closed segments (never the
// active one), keeping the latest record per key; see the top of clean.go.
// It does not check MinCleanableDirtyRatio (ask NeedsCompaction first, as a
// cleaner loop does): it cleans whatever is cleanable, and if nothing is,
// returns with Skipped saying why. Calls on one log run one at a time.
// Appends, reads and retention go on meanwhile; Log.mu is held only to swap
// each rewritten group in. A truncation during the round, or retention
// deleting a segment being cleaned, stops it (groups already swapped stay,
// as they are valid) and the next round redoes the work. Cancelling ctx
// stops it likewise, returning ctx's error.
func (l *Log) Compact(ctx context.Context, cfg CompactConfig) (CompactStats, error) {
	var st CompactStats
	if err := cfg.Validate(); err != nil {
		return st, err
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if err := l.writable(); err != nil {
		return st, err
	}
	started := time.Now()
	snap := l.cleanSnapshot()
	defer unpin(snap.segs)
	now := l.nowMs()
	p := l.plan(snap.segs, snap.firstDirty, cfg, now)
	tombstonesDue := snap.due > 0 && now >= snap.due
	if p.dirtyBytes == 0 && !tombstonesDue {
		st.Skipped = p.why
		return st, nil
	}

	codecs := getCleanCodecs()
	defer putCleanCodecs(codecs)
	c := &cleaner{
		l: l, snap: snap, th: newThrottle(cfg.IORateBytesPerSec),
		f: batchFilter{rounds: snap.rounds, now: now, horizon: satAdd(now, cfg.DeleteRetentionMs), codecs: codecs,
			snapOff: l.prodSnap.Load()},
	}
	// Every batch the round reads lies below the end of the dirty section
	// (or below the first dirty offset: cleaned by earlier rounds, under
	// the same bound), so below the last stable offset: its transaction,
	// if any, has ended, and the transaction indexes say how.
	aborted, err := l.AbortedTxns(snap.segs[0].base, max(snap.segs[p.stop].base, snap.firstDirty))
	if err != nil {
		return c.stopped(st, err)
	}
	c.f.aborted = newAbortedSet(aborted)
	end := snap.firstDirty
	if p.dirtyBytes > 0 {
		m := newOffsetMap(cfg.memory(), snap.segs[p.stop].base-snap.firstDirty)
		var err error
		if end, err = c.buildMap(ctx, p, m); err != nil {
			return c.stopped(st, err)
		}
		c.f.m = m
	}
	c.f.end = end

	// Rewrite every segment below the end of the mapped section.
	n := sort.Search(len(snap.segs), func(i int) bool { return snap.segs[i].base >= end })
	n = min(n, p.stop)
	if n == 0 {
		st.Skipped = fmt.Sprintf("no closed segment below offset %d", end)
		return st, nil
	}
	for _, g := range groupSegments(snap.segs[:n], snap.cfg) {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		ok, err := c.cleanGroup(ctx, g, &st)
		if err != nil {
			return c.stopped(st, err)
		}
		if !ok {
			return c.stopped(st, nil)
		}
	}
	if err := l.commitRound(snap.gen, end, c.f.horizon, c.f.due, now); err != nil {
		return st, err
	}
	if c.f.nullKeys > 0 && !l.warnedNullKey {
		l.warnedNullKey = true
		l.logger.Warn("log: compacted log holds records without a key; they are kept", "dir", l.dir, "records", c.f.nullKeys)
	}
	if c.f.malformed > 0 {
		l.logger.Warn("log: compaction kept batches whose records it could not parse", "dir", l.dir, "batches", c.f.malformed)
	}
	l.logger.Info("log: compacted", "dir", l.dir, "first_dirty_offset", snap.firstDirty, "end_offset", end,
		"segments", st.SegmentsCleaned, "bytes_before", st.BytesBefore, "bytes_after", st.BytesAfter,
		"records_removed", st.RecordsRemoved, "tombstones_removed", st.TombstonesRemoved,
		"markers_removed", st.MarkersRemoved, "throttled", c.th.slept, "took", time.Since(started))
	return st, nil
}

// cleaner is one Compact round's working state.
type cleaner struct {
	l    *Log
	snap cleanSnap
	th   *throttle
	f    batchFilter
	wbuf []byte // the output segment's write buffer
}

// stopped ends a round that failed with err, or was refused its swap (nil
// err). A truncation under the round explains either (it may have cut a
// file being read), so then the round is skipped, not failed. Groups
// already swapped stay: they are valid.
func (c *cleaner) stopped(st CompactStats, err error) (CompactStats, error) {
	if err != nil && c.l.truncGen.Load() == c.snap.gen && c.l.writable() == nil {
		return st, err
	}
	if errors.Is(err, errSimulatedCrash) || errors.Is(err, ErrFailed) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) {
		return st, err
	}
	st.Skipped = "the log was truncated, closed or lost a segment to retention during the clean"
	return st, nil
}

// buildMap maps the dirty section segs[p.dirty:p.stop] from the first dirty
// offset on and returns where the mapped section ends: the first
// uncleanable offset, or, if the map filled, the offset after the last
// batch mapped.
func (c *cleaner) buildMap(ctx context.Context, p cleanPlan, m *offsetMap) (int64, error) {
	from := c.snap.firstDirty
	latest := int64(-1)
	var hashes []keyHash
	var offs []int64
	for _, s := range c.snap.segs[p.dirty:p.stop] {
		pos := int64(0)
		if from > s.base {
			pos = s.lookup(from)
		}
		sc := newScanner(s.f, s.name(), pos, s.size.Load(), s.base, 0)
		for {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			h, bpos, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, fmt.Errorf("log: compaction map: %w", err)
			}
			if h.LastOffset() < from {
				continue
			}
			if err := c.th.take(ctx, int64(h.Size())); err != nil {
				return 0, err
			}
			b, err := sc.window(bpos, int64(h.Size()))
			if err != nil {
				return 0, err
			}
			var fits bool
			if fits, hashes, offs = c.f.mapBatch(m, h, b, from, hashes, offs); !fits {
				if latest < from {
					return 0, fmt.Errorf("%w: the batch at offset %d has %d keys, the map holds %d (MaxMemoryBytes)",
						ErrCompactMapTooSmall, h.BaseOffset, len(hashes), m.limit)
				}
				return latest + 1, nil
			}
			latest = h.LastOffset()
		}
	}
	return c.snap.segs[p.stop].base, nil
}

// groupSegments splits segs into runs cleaned into one output segment each:
// consecutive segments whose sizes add up to at most segment.bytes and
// whose offsets fit relative to the run's first base (Kafka's
// groupSegmentsBySize). The output never outgrows its inputs.
func groupSegments(segs []*segment, cfg Config) [][]*segment {
	var out [][]*segment
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].size.Load()
		for j < len(segs) {
			s := segs[j]
			if size+s.size.Load() > cfg.SegmentBytes || s.next.Load()-1-segs[i].base > math.MaxUint32 {
				break
			}
			size += s.size.Load()
			j++
		}
		out = append(out, segs[i:j:j])
		i = j
	}
	return out
}

// commitRound records a completed round in the cleaner checkpoint, unless
// the log was truncated meanwhile (the truncation has clamped the
// checkpoint; the round's map may cover offsets that are gone).
func (l *Log) commitRound(gen, end, horizon, due, now int64) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	if l.truncGen.Load() != gen || l.writable() != nil {
		l.mu.Unlock()
		return nil
	}
	rounds := addRound(l.cleaner.rounds, end, horizon, l.logStart.Load(), now)
	l.mu.Unlock()
	// Besides the checkpoint, this fsyncs the directory, making the
	// round's swaps durable.
	if err := l.writeCleanerCheckpoint(rounds); err != nil {
		return err
	}
	l.mu.Lock()
	l.cleaner.rounds, l.cleaner.due = rounds, due
	l.mu.Unlock()
	return nil
}
