package replica

// The high-watermark checkpoint (Kafka's replication-offset-checkpoint,
// one small file per partition here): a replica of a partition with
// several replicas writes its high watermark every
// hwCheckpointInterval and at shutdown, and starts from it after a
// restart, so consumers and ListOffsets see the committed records at once
// instead of waiting for the followers' first fetches. It only lags: a
// stale or missing checkpoint means a lower high watermark for a moment,
// never records served that were not committed. It is replaced durably
// (vfs.WriteFileAtomic): a power loss leaves the old value or the new one,
// never an empty or torn file that would read as no checkpoint.

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berthmq/berth/internal/vfs"
)

const (
	hwCheckpointFile     = "high-watermark-checkpoint"
	hwCheckpointInterval = 5 * time.Second
)

// readHWCheckpoint returns the checkpointed high watermark of the log in
// dir, or -1.
func readHWCheckpoint(fs vfs.FS, dir string) int64 {
	b, err := vfs.ReadFile(fs, filepath.Join(dir, hwCheckpointFile))
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return -1
	}
	return v
}

// checkpointHWs writes the checkpoint of every partition whose high
// watermark moved, several at a time (each write is two fsyncs). It runs on
// its own ticker, so the group commit never waits for it.
func (m *Manager) checkpointHWs() {
	var moved []*Partition
	for _, p := range m.All() {
		if p.hw.Load() != p.hwCheckpointed.Load() {
			moved = append(moved, p)
		}
	}
	m.forEach(moved, func(p *Partition) {
		if err := p.checkpointHW(); err != nil {
			m.log.Warn("writing the high-watermark checkpoint", "topic", p.Topic, "partition", p.Index, "err", err)
		}
	})
}

// checkpointHW writes the high watermark if it moved since the last
// checkpoint, and reports a failed write (the next call tries again).
func (p *Partition) checkpointHW() error {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	hw := p.hw.Load()
	if hw == p.hwCheckpointed.Load() || p.closed.Load() {
		return nil
	}
	p.rmu.Lock()
	single := len(p.repl.replicas) <= 1
	p.rmu.Unlock()
	if single {
		return nil // its high watermark is its durable log end at every start
	}
	path := filepath.Join(p.log.Dir(), hwCheckpointFile)
	if err := vfs.WriteFileAtomic(p.mgr.cfg.FS, path, []byte(strconv.FormatInt(hw, 10)+"\n")); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // the partition was deleted meanwhile
		}
		return err
	}
	p.hwCheckpointed.Store(hw)
	return nil
}
