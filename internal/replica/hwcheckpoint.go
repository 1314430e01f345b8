package replica

// The high-watermark checkpoint (Kafka's replication-offset-checkpoint,
// one small file per partition here): a replica of a partition with
// several replicas writes its high watermark every
// hwCheckpointInterval and at shutdown, and starts from it after a
// restart, so consumers and ListOffsets see the committed records at once
// instead of waiting for the followers' first fetches. It only lags: a
// stale or missing checkpoint means a lower high watermark for a moment,
// never records served that were not committed.

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	hwCheckpointFile     = "high-watermark-checkpoint"
	hwCheckpointInterval = 5 * time.Second
)

// readHWCheckpoint returns the checkpointed high watermark of the log in
// dir, or -1.
func readHWCheckpoint(dir string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, hwCheckpointFile))
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return -1
	}
	return v
}

// checkpointHW writes the high watermark if it moved since the last
// checkpoint. No fsync: losing the newest checkpoint in a machine crash
// only lowers the high watermark after the restart.
func (p *Partition) checkpointHW() {
	hw := p.hw.Load()
	if hw == p.hwCheckpointed.Load() || p.closed.Load() {
		return
	}
	p.rmu.Lock()
	single := len(p.repl.replicas) <= 1
	p.rmu.Unlock()
	if single {
		return // its high watermark is its durable log end at every start
	}
	path := filepath.Join(p.log.Dir(), hwCheckpointFile)
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, []byte(strconv.FormatInt(hw, 10)+"\n"), 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) { // the partition was deleted meanwhile
			p.logg.Warn("writing the high-watermark checkpoint", "topic", p.Topic, "partition", p.Index, "err", err)
		}
		return
	}
	p.hwCheckpointed.Store(hw)
}
