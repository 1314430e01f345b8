package log

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/berthmq/berth/internal/vfs"
)

// Config holds the topic-level settings the log honours. Names in comments are
// Kafka's topic config names.
type Config struct {
	SegmentBytes       int64 // segment.bytes: roll before the active segment would exceed it (at most 2 GiB - 1)
	SegmentMs          int64 // segment.ms: roll when the active segment's first append is older
	IndexIntervalBytes int32 // index.interval.bytes: bytes between offset index entries
	SegmentIndexBytes  int32 // segment.index.bytes: roll when the offset or time index would exceed it
	RetentionMs        int64 // retention.ms: -1 keeps forever
	RetentionBytes     int64 // retention.bytes: -1 no limit
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * time.Hour.Milliseconds(),
		IndexIntervalBytes: 4096,
		SegmentIndexBytes:  10 << 20,
		RetentionMs:        7 * 24 * time.Hour.Milliseconds(),
		RetentionBytes:     -1,
	}
}

// MaxSegmentBytes is the largest segment: index positions are uint32 and we
// keep them in int32 range, as Kafka does.
const MaxSegmentBytes = math.MaxInt32

// Validate checks every field's range.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < 1 || c.SegmentBytes > MaxSegmentBytes:
		return fmt.Errorf("log: segment.bytes %d not in [1, %d]", c.SegmentBytes, int64(MaxSegmentBytes))
	case c.SegmentMs < 1:
		return fmt.Errorf("log: segment.ms %d must be at least 1", c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("log: index.interval.bytes %d must be at least 0", c.IndexIntervalBytes)
	case c.SegmentIndexBytes < 12:
		return fmt.Errorf("log: segment.index.bytes %d must be at least %d", c.SegmentIndexBytes, 12)
	case c.RetentionMs < -1:
		return fmt.Errorf("log: retention.ms %d must be at least -1", c.RetentionMs)
	case c.RetentionBytes < -1:
		return fmt.Errorf("log: retention.bytes %d must be at least -1", c.RetentionBytes)
	}
	return nil
}

// Options are the log's injected dependencies.
type Options struct {
	FS     vfs.FS           // nil = the real OS filesystem
	Now    func() time.Time // nil = time.Now
	Logger *slog.Logger     // nil = slog.Default()

	// DeferMarkerSync makes Open remove the clean-shutdown marker without
	// fsyncing the directory: the caller opening many logs makes all the
	// removals durable at once (one syncfs of their filesystem) and then
	// calls FinishOpen on each, before the log takes a write.
	DeferMarkerSync bool
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
