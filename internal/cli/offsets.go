package cli

// Offsets as the client commands use them (group, queue, dlq): a log's start
// and end offsets, an offset kept within them, a date-time flag for
// ListOffsets by time, and the record at an offset (for the age of the
// oldest unconsumed record).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// listBounds lists the start and end offsets of the topics in want. A topic
// that does not exist gets UNKNOWN_TOPIC_OR_PARTITION on the partitions of
// want (kadm marks it with a -1 partition), as kadm.Client.Lag does.
func listBounds(ctx context.Context, adm *kadm.Client, want kadm.TopicsSet) (starts, ends kadm.ListedOffsets, err error) {
	topics := want.Topics()
	if len(topics) == 0 {
		return nil, nil, nil
	}
	for _, l := range []struct {
		fn  func(context.Context, ...string) (kadm.ListedOffsets, error)
		dst *kadm.ListedOffsets
	}{{adm.ListStartOffsets, &starts}, {adm.ListEndOffsets, &ends}} {
		listed, err := l.fn(ctx, topics...)
		var se *kadm.ShardErrors
		if err != nil && !errors.As(err, &se) {
			return nil, nil, err
		}
		// On shard errors, what is missing shows as a per-partition error.
		for t, ps := range listed {
			if _, ok := ps[-1]; !ok || len(ps) != 1 {
				continue
			}
			delete(ps, -1)
			for p := range want[t] {
				ps[p] = kadm.ListedOffset{Topic: t, Partition: p, Offset: -1, Err: kerr.UnknownTopicOrPartition}
			}
		}
		*l.dst = listed
	}
	return starts, ends, nil
}

// clampOffset keeps o within [lo, hi].
func clampOffset(o, lo, hi int64) int64 { return max(lo, min(o, hi)) }

// parseResetDatetime parses --to-datetime: YYYY-MM-DDTHH:MM:SS with optional
// fractional seconds and zone (Z, +hh:mm or +hhmm); without a zone the time
// is in loc (local time, as Kafka's tool does).
func parseResetDatetime(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	var (
		t   time.Time
		err error
	)
	for _, layout := range []string{"2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05Z0700", "2006-01-02T15:04:05"} {
		if t, err = time.ParseInLocation(layout, s, loc); err == nil {
			break
		}
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("--to-datetime %q: want YYYY-MM-DDTHH:MM:SS[.sss][Z|+hh:mm], e.g. 2026-11-29T10:00:00Z (no zone: local time)", s)
	}
	if t.Before(time.UnixMilli(0)) {
		// ListOffsets reads negative timestamps as earliest/latest.
		return time.Time{}, fmt.Errorf("--to-datetime %q: must be after 1970-01-01T00:00:00Z", s)
	}
	return t, nil
}

// recordTimestamps reads, with a direct partition consumer, the first record
// at or after each offset in want, and returns their timestamps. It gives up
// after --timeout, returning what it has.
func recordTimestamps(ctx context.Context, cf *clientFlags, want map[string]map[int32]int64) map[string]map[int32]time.Time {
	got := map[string]map[int32]time.Time{}
	for t, ps := range firstRecords(ctx, cf, want) {
		got[t] = map[int32]time.Time{}
		for p, r := range ps {
			got[t][p] = r.Timestamp
		}
	}
	return got
}

// firstRecords is recordTimestamps with the whole records.
func firstRecords(ctx context.Context, cf *clientFlags, want map[string]map[int32]int64) map[string]map[int32]*kgo.Record {
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	offsets := map[string]map[int32]kgo.Offset{}
	remaining := 0
	for t, ps := range want {
		offsets[t] = map[int32]kgo.Offset{}
		for p, o := range ps {
			offsets[t][p] = kgo.NewOffset().At(o)
			remaining++
		}
	}
	got := map[string]map[int32]*kgo.Record{}
	cl, err := cf.connect(ctx,
		kgo.ConsumePartitions(offsets),
		kgo.FetchMaxPartitionBytes(64<<10), // one record is all we need
		kgo.FetchMaxWait(time.Second),
	)
	if err != nil {
		return got
	}
	defer cl.Close()
	for remaining > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			break
		}
		var done map[string][]int32
		for r := range fetches.RecordsAll() {
			at, ok := want[r.Topic][r.Partition]
			if !ok || r.Offset < at {
				continue
			}
			if _, seen := got[r.Topic][r.Partition]; seen {
				continue
			}
			if got[r.Topic] == nil {
				got[r.Topic] = map[int32]*kgo.Record{}
			}
			got[r.Topic][r.Partition] = r
			remaining--
			if done == nil {
				done = map[string][]int32{}
			}
			done[r.Topic] = append(done[r.Topic], r.Partition)
		}
		if done != nil {
			cl.PauseFetchPartitions(done)
		}
	}
	return got
}
