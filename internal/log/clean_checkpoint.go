package log

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/berthmq/berth/internal/vfs"
)

// cleanerCheckpointFile persists the cleaner's progress. See
// docs/format/log.md.
const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// maxCleanRounds bounds the rounds the checkpoint remembers; beyond it the
// two rounds with the closest delete horizons merge (see addRound).
const maxCleanRounds = 128

// cleanRound records one completed clean: it mapped every offset below End
// that an earlier round had not, and tombstones among those offsets may go
// once the clock reaches Horizon (the round's start time plus
// delete.retention.ms).
type cleanRound struct {
	End     int64
	Horizon int64
}

// cleanerState is the cleaner's persistent progress. Owned by Log.mu;
// written to disk with ckptMu held.
type cleanerState struct {
	// rounds are increasing in End; the last End is the first dirty
	// offset. Offsets below rounds[0]'s range start belong to it too
	// (they were cleaned no later than it).
	rounds []cleanRound
	// due is the earliest delete horizon of a tombstone the last round
	// kept; 0 if none. NeedsCompaction asks for a clean once it passes,
	// even without dirty data.
	due int64
}

// firstDirty is the first offset no round has mapped.
func (c *cleanerState) firstDirty(logStart, leo int64) int64 {
	fd := logStart
	if n := len(c.rounds); n > 0 {
		fd = c.rounds[n-1].End
	}
	if fd < logStart || fd > leo {
		return logStart
	}
	return fd
}

// horizonAt returns the delete horizon of offset off: the Horizon of the
// first round that mapped it. ok is false if no round has.
func horizonAt(rounds []cleanRound, off int64) (horizon int64, ok bool) {
	i := sort.Search(len(rounds), func(i int) bool { return rounds[i].End > off })
	if i == len(rounds) {
		return 0, false
	}
	return rounds[i].Horizon, true
}

// addRound appends a round ending at end (if it made progress) and keeps
// the list short: rounds wholly below the log start go, rounds whose
// horizons have both passed merge, and past maxCleanRounds the two
// adjacent rounds with the closest horizons merge. A merge keeps the later
// End and the later Horizon, so a tombstone may stay a little longer than
// delete.retention.ms, never shorter.
func addRound(rounds []cleanRound, end, horizon, logStart, now int64) []cleanRound {
	out := append([]cleanRound(nil), rounds...)
	if n := len(out); n == 0 || end > out[n-1].End {
		out = append(out, cleanRound{End: end, Horizon: horizon})
	}
	for len(out) > 1 && out[0].End <= logStart {
		out = out[1:]
	}
	for len(out) > 1 && out[0].Horizon <= now && out[1].Horizon <= now {
		out = out[1:] // both passed: the merged round has passed too
	}
	for len(out) > maxCleanRounds {
		best := 0
		for i := 1; i < len(out)-1; i++ {
			if out[i+1].Horizon-out[i].Horizon < out[best+1].Horizon-out[best].Horizon {
				best = i
			}
		}
		out[best+1].Horizon = max(out[best].Horizon, out[best+1].Horizon)
		out = append(out[:best], out[best+1:]...)
	}
	return out
}

// clampRounds drops what lies at or past leo (a truncation): offsets there
// will be new data, never mapped.
func clampRounds(rounds []cleanRound, leo int64) ([]cleanRound, bool) {
	for i, r := range rounds {
		if r.End > leo {
			out := append([]cleanRound(nil), rounds[:i+1]...)
			out[i].End = leo
			if i > 0 && out[i-1].End >= leo {
				out = out[:i]
			}
			return out, true
		}
	}
	return rounds, false
}

func encodeRounds(rounds []cleanRound) []byte {
	es := make([][2]int64, len(rounds))
	for i, r := range rounds {
		es[i] = [2]int64{r.End, r.Horizon}
	}
	return encodeCheckpoint(es, 2)
}

func decodeRounds(b []byte) ([]cleanRound, error) {
	es, err := decodeCheckpoint(b, 2)
	if err != nil {
		return nil, err
	}
	out := make([]cleanRound, len(es))
	for i, e := range es {
		if e[0] < 0 || e[1] < 0 || i > 0 && e[0] <= es[i-1][0] {
			return nil, fmt.Errorf("%w: entry %d %d", errBadCheckpoint, e[0], e[1])
		}
		out[i] = cleanRound{End: e[0], Horizon: e[1]}
	}
	return out, nil
}

func (l *Log) writeCleanerCheckpoint(rounds []cleanRound) error {
	return replaceFile(l.fs, l.path(cleanerCheckpointFile), encodeRounds(rounds))
}

// loadCleanerState reads the cleaner checkpoint at Open. A malformed one is
// treated as missing: the whole log is dirty again, and tombstones get a
// fresh delete.retention.ms. Rounds past the recovered log end are dropped
// and the file rewritten.
func (l *Log) loadCleanerState(leo int64) error {
	b, err := vfs.ReadFile(l.fs, l.path(cleanerCheckpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("log: read %s: %w", cleanerCheckpointFile, err)
	}
	rounds, err := decodeRounds(b)
	if err != nil {
		l.logger.Warn("log: ignoring malformed cleaner checkpoint", "dir", l.dir, "err", err)
		return nil
	}
	rounds, clamped := clampRounds(rounds, leo)
	if clamped {
		if err := l.writeCleanerCheckpoint(rounds); err != nil {
			return err
		}
	}
	l.cleaner.rounds = rounds
	// What the last round kept is unknown after a restart: expect the
	// earliest horizon still ahead. Tombstones whose horizon passed
	// while the log was closed go at the next clean of dirty data.
	now := l.nowMs()
	for _, r := range rounds {
		if r.Horizon > now && (l.cleaner.due == 0 || r.Horizon < l.cleaner.due) {
			l.cleaner.due = r.Horizon
		}
	}
	return nil
}

// cleanerTruncatedLocked forgets cleaner progress at or past leo after a
// truncation. Called with ckptMu and mu held.
func (l *Log) cleanerTruncatedLocked(leo int64) error {
	rounds, changed := clampRounds(l.cleaner.rounds, leo)
	if !changed {
		return nil
	}
	// Memory first: if the write fails, this process still treats the
	// new data as dirty, and the next round rewrites the file.
	l.cleaner.rounds = rounds
	return l.writeCleanerCheckpoint(rounds)
}

// satAdd is a + b for b >= 0, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// satSub is a - b for b >= 0, saturating at math.MinInt64.
func satSub(a, b int64) int64 {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}
