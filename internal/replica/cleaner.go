package replica

import (
	"context"
	"strings"
	"time"
)

// The cleaner compacts partitions of topics with cleanup.policy=compact
// (or compact,delete): every log.cleaner.backoff.ms it cleans, one at a
// time, those whose dirty ratio or max.compaction.lag.ms asks for it. One
// partition at a time keeps the cleaner's memory and I/O bounded.

// RunCleaner compacts every partition that needs it now.
func (m *Manager) RunCleaner(ctx context.Context) {
	for _, p := range m.All() {
		if ctx.Err() != nil {
			return
		}
		cfg := p.Config()
		if p.closed.Load() || !strings.Contains(cfg.CleanupPolicy, "compact") {
			continue
		}
		cc := cfg.Compact
		// Never clean past what is committed: a newer value above the high
		// watermark must not make an older committed one removable.
		cc.MaxOffset = p.LastStableOffset()
		if !p.log.NeedsCompaction(cc) {
			continue
		}
		start := time.Now()
		st, err := p.log.Compact(ctx, cc)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("compaction failed", "topic", p.Topic, "partition", p.Index, "err", err)
			}
			continue
		}
		m.Metrics.CleanerRuns.Add(1)
		m.Metrics.CleanerBytesFreed.Add(st.BytesBefore - st.BytesAfter)
		if st.SegmentsCleaned > 0 {
			m.log.Info("compacted", "topic", p.Topic, "partition", p.Index, "segments", st.SegmentsCleaned,
				"bytes_before", st.BytesBefore, "bytes_after", st.BytesAfter, "records_removed", st.RecordsRemoved,
				"tombstones_removed", st.TombstonesRemoved, "markers_removed", st.MarkersRemoved, "took", time.Since(start).Round(time.Millisecond))
		}
	}
}
