package cli

// `berth dlq`: the dead-letter topics of share groups (KIP-1191) and the
// jobs parked in them. list finds the DLQ topics and their depth, inspect
// shows parked jobs with the context headers the broker wrote, redrive
// produces them back to their source topic at a bounded rate, and purge
// deletes them (DeleteRecords).
//
// A DLQ record carries the source record's key, value and headers plus
// the __dlq.errors.* context headers (internal/share/config.go). Redrive
// produces the key, value and the source's own headers, with the context
// headers removed and __dlq.errors.berth.redrive.count set to one more
// than before; a record redriven --max-redrives times already is refused
// and left in the DLQ (the loop guard).
//
// Redrive is resumable and lossless: it reads the DLQ as consumer group
// "berth-redrive.<dlq-topic>" (offsets only: it never joins the group)
// and commits a partition's offset past a record only once the record's
// produce is acknowledged (acks=all, idempotent producer), about once a
// second and when it stops. An interrupted redrive therefore starts again
// at the first record not known to be moved: nothing is lost, and the
// records acknowledged after the last commit (at most about a second's
// worth) are produced a second time. Redrive does not delete from the DLQ.
//
// The committed offset passes skipped (filtered) and refused records too,
// so the next run does not read them again; the commit's metadata
// ("kept=N") remembers the first offset at or after which a record was
// not moved, and `purge --redriven` deletes only below it, so a skipped
// or refused job is never purged as redriven.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/pkg/berthmsg"
)

func init() { clientCommands = append(clientCommands, newDLQCmd) }

// dlqHeaderPrefix is the prefix of every DLQ context header, Kafka's and
// Berth's; redrive drops headers with it.
const dlqHeaderPrefix = "__dlq.errors."

// redriveGroupPrefix names the consumer group whose committed offsets are
// a redrive's progress through a DLQ topic.
const redriveGroupPrefix = "berth-redrive."

func newDLQCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, inspect, redrive and purge the dead-letter topics of work queues (KIP-1191)",
		Args:  cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newDLQListCmd(cf), newDLQInspectCmd(cf), newDLQRedriveCmd(cf), newDLQPurgeCmd(cf))
	return cmd
}

// withDLQAdmin connects and runs fn.
func withDLQAdmin(cmd *cobra.Command, cf *clientFlags, fn func(context.Context, *kgo.Client, *kadm.Client) error) error {
	return withClients(cmd, cf, fn)
}

// ---- the parked job ----

// dlqJob is one DLQ record decoded.
type dlqJob struct {
	Partition       int32             `json:"partition"` // in the DLQ topic
	Offset          int64             `json:"offset"`    // in the DLQ topic
	Timestamp       int64             `json:"timestamp"` // the DLQ record's: when the job was parked, ms
	AgeMs           int64             `json:"age_ms"`    // now minus Timestamp: how long it has been parked
	SourceTopic     string            `json:"source_topic"`
	SourcePartition int32             `json:"source_partition"` // -1: unknown
	SourceOffset    int64             `json:"source_offset"`    // -1: unknown
	SourceMs        int64             `json:"source_timestamp"` // the job's own timestamp; -1: unknown
	SourceAgeMs     int64             `json:"source_age_ms"`    // now minus SourceMs: the job's age; -1: unknown
	Group           string            `json:"group"`
	Reason          string            `json:"reason"`
	Message         string            `json:"message"`
	DeliveryCount   int64             `json:"delivery_count"` // -1: unknown
	RedriveCount    int64             `json:"redrive_count"`
	ClientError     string            `json:"client_error,omitempty"`
	Key             *string           `json:"key"`
	KeyEncoding     string            `json:"key_encoding,omitempty"`
	Value           *string           `json:"value"`
	ValueEncoding   string            `json:"value_encoding,omitempty"`
	Headers         map[string]string `json:"headers"` // the source record's own headers
}

// encodeBytes renders b for JSON: nil stays nil, UTF-8 as is, else base64.
func encodeBytes(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, "base64"
}

func parseIntHeader(v string, def int64) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return def
	}
	return n
}

// decodeDLQ reads r's context headers.
func decodeDLQ(r *kgo.Record, now time.Time) dlqJob {
	j := dlqJob{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(),
		SourcePartition: -1, SourceOffset: -1, SourceMs: -1, DeliveryCount: -1, Headers: map[string]string{}}
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case berthmsg.HeaderDLQTopic:
			j.SourceTopic = v
		case berthmsg.HeaderDLQPartition:
			j.SourcePartition = int32(parseIntHeader(v, -1))
		case berthmsg.HeaderDLQOffset:
			j.SourceOffset = parseIntHeader(v, -1)
		case berthmsg.HeaderDLQGroup:
			j.Group = v
		case berthmsg.HeaderDLQDeliveryCount:
			j.DeliveryCount = parseIntHeader(v, -1)
		case berthmsg.HeaderDLQMessage:
			j.Message = v
		case berthmsg.HeaderDLQReason:
			j.Reason = v
		case berthmsg.HeaderDLQTimestamp:
			j.SourceMs = parseIntHeader(v, -1)
		case berthmsg.HeaderDLQClientError:
			j.ClientError = v
		case berthmsg.HeaderDLQRedriveCount:
			j.RedriveCount = max(parseIntHeader(v, 0), 0)
		default:
			if !strings.HasPrefix(h.Key, dlqHeaderPrefix) {
				j.Headers[h.Key] = v
			}
		}
	}
	j.Key, j.KeyEncoding = encodeBytes(r.Key)
	j.Value, j.ValueEncoding = encodeBytes(r.Value)
	j.AgeMs = max(now.UnixMilli()-j.Timestamp, 0)
	j.SourceAgeMs = -1
	if j.SourceMs >= 0 {
		j.SourceAgeMs = max(now.UnixMilli()-j.SourceMs, 0)
	}
	return j
}

// redriveRecord is the record redrive produces for DLQ record r: r's key
// and value, its headers without the context headers, and the redrive
// count one higher.
func redriveRecord(r *kgo.Record, topic string, redrives int64) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, dlqHeaderPrefix) {
			out.Headers = append(out.Headers, h)
		}
	}
	out.Headers = append(out.Headers, kgo.RecordHeader{Key: berthmsg.HeaderDLQRedriveCount, Value: strconv.AppendInt(nil, redrives+1, 10)})
	return out
}

// ---- filters ----

// dlqFilter selects parked jobs by reason and by the time they were
// parked: the DLQ record's timestamp, which retention counts from too
// (Berth's dead-letter writer and Kafka's both stamp the DLQ record with
// the time of the write).
type dlqFilter struct {
	reason       string // "" any; else a Reason token
	since, until time.Time
}

// reasonAliases maps what --reason accepts to the header's token.
var reasonAliases = map[string]string{
	"rejected":               "rejected",
	"reject":                 "rejected",
	"delivery limit reached": "delivery limit reached",
	"delivery-limit":         "delivery limit reached",
	"delivery_limit":         "delivery limit reached",
	"limit":                  "delivery limit reached",
}

func parseDLQFilter(reason, since, until string, now time.Time) (dlqFilter, error) {
	var f dlqFilter
	if reason != "" {
		tok, ok := reasonAliases[strings.ToLower(strings.TrimSpace(reason))]
		if !ok {
			return f, fmt.Errorf("--reason %q: want rejected or delivery-limit", reason)
		}
		f.reason = tok
	}
	var err error
	if since != "" {
		if f.since, err = parseWhen("--since", since, now); err != nil {
			return f, err
		}
	}
	if until != "" {
		if f.until, err = parseWhen("--until", until, now); err != nil {
			return f, err
		}
	}
	if !f.since.IsZero() && !f.until.IsZero() && !f.until.After(f.since) {
		return f, fmt.Errorf("--until %s is not after --since %s", until, since)
	}
	return f, nil
}

// parseWhen reads a time flag: a date-time (as --to-datetime of `berth
// group reset-offsets`) or a duration meaning that long ago (90m, 2h).
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(strings.TrimSpace(s)); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%s %q: a duration means that long ago and must not be negative", flag, s)
		}
		return now.Add(-d), nil
	}
	t, err := parseResetDatetime(s, time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: want a duration ago (2h, 90m) or YYYY-MM-DDTHH:MM:SS[Z|+hh:mm]", flag, s)
	}
	return t, nil
}

func (f dlqFilter) match(j dlqJob) bool {
	if f.reason != "" && !strings.EqualFold(j.Reason, f.reason) {
		return false
	}
	if !f.since.IsZero() && j.Timestamp < f.since.UnixMilli() {
		return false
	}
	if !f.until.IsZero() && j.Timestamp >= f.until.UnixMilli() {
		return false
	}
	return true
}

// ---- reading a DLQ topic ----

// dlqBounds are a topic's partitions with their log start and end
// (high watermark) offsets.
type dlqBounds map[int32][2]int64

// topicBounds lists topic's start and end offsets.
func topicBounds(ctx context.Context, adm *kadm.Client, topic string) (dlqBounds, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("topic %q: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("topic %q: %w", topic, err)
	}
	b := dlqBounds{}
	ends.Each(func(e kadm.ListedOffset) {
		s, _ := starts.Lookup(e.Topic, e.Partition)
		b[e.Partition] = [2]int64{s.Offset, e.Offset}
	})
	if len(b) == 0 {
		return nil, fmt.Errorf("topic %q: %w", topic, kerr.UnknownTopicOrPartition)
	}
	return b, nil
}

func (b dlqBounds) partitions() []int32 {
	ps := slices.Collect(maps.Keys(b))
	slices.Sort(ps)
	return ps
}

// scanRange reads topic's records in [from, to) per partition, in offset
// order within a partition, and hands each to fn; fn returns false to
// stop. It fails when a partition makes no progress for idle.
func scanRange(ctx context.Context, cf *clientFlags, topic string, rng dlqBounds, idle time.Duration, fn func(*kgo.Record) bool) error {
	offsets := map[int32]kgo.Offset{}
	for p, r := range rng {
		if r[0] < r[1] {
			offsets[p] = kgo.NewOffset().At(r[0])
		}
	}
	if len(offsets) == 0 {
		return nil
	}
	cl, err := cf.connect(ctx,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchMaxBytes(16<<20),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	remaining := len(offsets)
	last := time.Now()
	for remaining > 0 {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = fmt.Errorf("reading %s-%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		var done []int32
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := rng[r.Partition]
			if stop || !ok || r.Offset >= end[1] {
				return
			}
			if !fn(r) {
				stop = true
				return
			}
			last = time.Now() // after fn, which may wait (redrive's --rate)
			if r.Offset+1 >= end[1] {
				done = append(done, r.Partition)
			}
		})
		if stop {
			return nil
		}
		if len(done) > 0 {
			remaining -= len(done)
			cl.PauseFetchPartitions(map[string][]int32{topic: done})
		}
		if remaining > 0 && time.Since(last) > idle {
			return fmt.Errorf("reading %s: no records for %s before the end offsets (raise --timeout)", topic, idle)
		}
	}
	return nil
}

// ---- list ----

type dlqTopicInfo struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	Parked     int64  `json:"parked"` // high watermark minus log start, summed
	// OldestAgeMs is how long ago the job parked longest ago was parked
	// (the largest age of the first record of each partition), and
	// OldestJobAgeMs that job's own age (from its timestamp,
	// __dlq.errors.berth.timestamp); -1: empty or unknown.
	OldestAgeMs    int64    `json:"oldest_age_ms"`
	OldestJobAgeMs int64    `json:"oldest_job_age_ms"`
	Groups         []string `json:"groups"` // share groups whose DLQ topic it is (where group configs are served)
	Error          string   `json:"error,omitempty"`
}

func newDLQListCmd(cf *clientFlags) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List dead-letter topics with their parked records and the oldest one's age",
		Example: `  berth dlq list
  berth dlq list --prefix dead. --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDLQAdmin(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				infos, err := listDLQTopics(ctx, cf, cl, adm, prefix, time.Now)
				if err != nil {
					return cf.explain(err)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, infos)
				}
				if len(infos) == 0 {
					_, err := fmt.Fprintf(out, "No dead-letter topics (no topic named %s* or with %s=true).\n", prefix, berthmsg.TopicConfigDLQGroupEnable)
					return err
				}
				t := newTable(out, "topic", "partitions", "parked", "oldest", "oldest-job-age", "groups")
				for _, i := range infos {
					parked := strconv.FormatInt(i.Parked, 10)
					if i.Error != "" {
						parked = "- (" + i.Error + ")"
					}
					t.row(i.Topic, i.Partitions, parked, formatAge(i.OldestAgeMs), formatAge(i.OldestJobAgeMs),
						dashIfEmpty(strings.Join(i.Groups, ",")))
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", berthmsg.DefaultDLQTopicNamePrefix,
		"DLQ topic name prefix (the broker's "+berthmsg.BrokerDLQTopicNamePrefix+"); topics with "+berthmsg.TopicConfigDLQGroupEnable+"=true are listed too")
	return cmd
}

// listDLQTopics finds the DLQ topics: names with prefix, topics whose
// errors.deadletterqueue.group.enable is true, and the topics share
// groups name as their DLQ topic (which also gives each its groups).
func listDLQTopics(ctx context.Context, cf *clientFlags, cl *kgo.Client, adm *kadm.Client, prefix string, now func() time.Time) ([]dlqTopicInfo, error) {
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	dlq := map[string]bool{}
	var others []string
	for _, name := range tds.Names() {
		if prefix != "" && strings.HasPrefix(name, prefix) {
			dlq[name] = true
		} else {
			others = append(others, name)
		}
	}
	if len(others) > 0 {
		// A broker that does not know the config simply does not list it.
		if rcs, err := adm.DescribeTopicConfigs(ctx, others...); err == nil {
			for _, rc := range rcs {
				for _, c := range rc.Configs {
					if rc.Err == nil && c.Key == berthmsg.TopicConfigDLQGroupEnable && strings.EqualFold(c.MaybeValue(), "true") {
						dlq[rc.Name] = true
					}
				}
			}
		}
	}
	users := map[string][]string{} // DLQ topic -> share groups
	if listed, err := adm.ListGroupsByType(ctx, []string{"share"}); err == nil || len(listed) > 0 {
		for g, t := range groupDLQTopics(ctx, cl, listed.Groups()) {
			if _, ok := tds[t]; ok {
				dlq[t] = true
				users[t] = append(users[t], g)
			}
		}
	}
	names := slices.Sorted(maps.Keys(dlq))
	infos := make([]dlqTopicInfo, 0, len(names))
	oldestAt := map[string]map[int32]int64{}
	for _, name := range names {
		info := dlqTopicInfo{Topic: name, Partitions: len(tds[name].Partitions), OldestAgeMs: -1, OldestJobAgeMs: -1, Groups: users[name]}
		if info.Groups == nil {
			info.Groups = []string{}
		}
		slices.Sort(info.Groups)
		b, err := topicBounds(ctx, adm, name)
		if err != nil {
			info.Error = kerrName(err)
		}
		for p, r := range b {
			info.Parked += max(r[1]-r[0], 0)
			if r[1] > r[0] {
				if oldestAt[name] == nil {
					oldestAt[name] = map[int32]int64{}
				}
				oldestAt[name][p] = r[0]
			}
		}
		infos = append(infos, info)
	}
	if len(oldestAt) > 0 {
		firsts := firstRecords(ctx, cf, oldestAt)
		t := now()
		for i := range infos {
			for _, p := range slices.Sorted(maps.Keys(firsts[infos[i].Topic])) {
				j := decodeDLQ(firsts[infos[i].Topic][p], t)
				if j.AgeMs > infos[i].OldestAgeMs {
					infos[i].OldestAgeMs, infos[i].OldestJobAgeMs = j.AgeMs, j.SourceAgeMs
				}
			}
		}
	}
	return infos, nil
}

// ---- inspect ----

type dlqInspectOptions struct {
	limit                int
	reason, since, until string
}

func newDLQInspectCmd(cf *clientFlags) *cobra.Command {
	var o dlqInspectOptions
	cmd := &cobra.Command{
		Use:   "inspect DLQ-TOPIC",
		Short: "Show parked jobs: where they came from, why, how often delivered and redriven, the error text",
		Example: `  berth dlq inspect dlq.shipments
  berth dlq inspect dlq.shipments --reason rejected --since 2h --limit 10
  berth dlq inspect dlq.shipments --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			f, err := parseDLQFilter(o.reason, o.since, o.until, time.Now())
			if err != nil {
				return err
			}
			if o.limit < 0 {
				return fmt.Errorf("--limit %d: must not be negative", o.limit)
			}
			return withDLQAdmin(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
				b, err := topicBounds(ctx, adm, topic)
				if err != nil {
					return cf.explain(err)
				}
				now := time.Now()
				jobs := []dlqJob{}
				err = scanRange(ctx, cf, topic, b, cf.timeout, func(r *kgo.Record) bool {
					if j := decodeDLQ(r, now); f.match(j) {
						jobs = append(jobs, j)
					}
					return o.limit == 0 || len(jobs) < o.limit
				})
				if err != nil {
					return cf.explain(err)
				}
				sort.Slice(jobs, func(i, j int) bool { // parking order within a partition
					if jobs[i].Partition != jobs[j].Partition {
						return jobs[i].Partition < jobs[j].Partition
					}
					return jobs[i].Offset < jobs[j].Offset
				})
				out := cmd.OutOrStdout()
				if cf.json {
					return writeJSON(out, jobs)
				}
				return printDLQJobs(out, topic, jobs)
			})
		},
	}
	fs := cmd.Flags()
	fs.IntVarP(&o.limit, "limit", "n", 0, "show at most this many jobs (0: all)")
	fs.StringVar(&o.reason, "reason", "", "only jobs parked for this reason: rejected or delivery-limit")
	fs.StringVar(&o.since, "since", "", "only jobs parked at or after this time (a duration ago, 2h, or YYYY-MM-DDTHH:MM:SS[Z])")
	fs.StringVar(&o.until, "until", "", "only jobs parked before this time (as --since)")
	return cmd
}

// firstLine is s's first line, cut to n runes with "...".
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		s = string(r[:n-3]) + "..."
	}
	return s
}

func printDLQJobs(w io.Writer, topic string, jobs []dlqJob) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintf(w, "No parked jobs in %s match.\n", topic)
		return err
	}
	t := newTable(w, "partition", "offset", "source", "group", "reason", "deliveries", "redrives", "parked", "job-age", "key", "error")
	for _, j := range jobs {
		src := "-"
		if j.SourceTopic != "" {
			src = fmt.Sprintf("%s-%d@%d", j.SourceTopic, j.SourcePartition, j.SourceOffset)
		}
		key := "null"
		if j.Key != nil {
			key = firstLine(*j.Key, 24)
		}
		errText := firstLine(j.ClientError, 60)
		if errText == "" {
			errText = "-"
		}
		t.row(j.Partition, j.Offset, src, dashIfEmpty(j.Group), dashIfEmpty(j.Reason), dashIfNegative(j.DeliveryCount),
			j.RedriveCount, formatAge(j.AgeMs), formatAge(j.SourceAgeMs), key, errText)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d parked jobs shown.\n", len(jobs))
	return err
}

// ---- purge ----

type purgePartition struct {
	Partition int32  `json:"partition"`
	OldStart  int64  `json:"old_start"`
	NewStart  int64  `json:"new_start"`
	Error     string `json:"error,omitempty"`
}

type purgeResult struct {
	Topic      string           `json:"topic"`
	Removed    int64            `json:"removed"`
	Partitions []purgePartition `json:"partitions"`
}

func newDLQPurgeCmd(cf *clientFlags) *cobra.Command {
	var (
		yes, redriven bool
		before        string
		prefix, group string
	)
	cmd := &cobra.Command{
		Use:   "purge DLQ-TOPIC",
		Short: "Delete parked jobs (DeleteRecords): all, those older than a time, or those already redriven",
		Example: `  berth dlq purge dlq.shipments --redriven --yes
  berth dlq purge dlq.shipments --before 72h`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if redriven && before != "" {
				return errors.New("give at most one of --before and --redriven")
			}
			var beforeT time.Time
			if before != "" {
				var err error
				if beforeT, err = parseWhen("--before", before, time.Now()); err != nil {
					return err
				}
			}
			if group == "" {
				group = redriveGroupPrefix + topic
			}
			cf.clientID = "berth-dlq-purge" // the audit trail's io.berth.dlq.purge (handler.ClientIDDLQPurge)
			return withDLQAdmin(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
				if err := requireDLQTopic(ctx, adm, topic, prefix); err != nil {
					return cf.explain(err)
				}
				b, err := topicBounds(ctx, adm, topic)
				if err != nil {
					return cf.explain(err)
				}
				upTo := map[int32]int64{}
				what := "every record"
				switch {
				case redriven:
					what = "the records redriven (group " + group + ")"
					committed, err := adm.FetchOffsetsForTopics(ctx, group, topic)
					if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
						return cf.explain(err)
					}
					for p, r := range b {
						upTo[p] = r[0]
						if c, ok := committed.Lookup(topic, p); ok && c.Err == nil && c.At >= 0 {
							at := c.At
							if k := parseKept(c.Metadata); k >= 0 {
								at = min(at, k) // a skipped or refused record stays
							}
							upTo[p] = clampOffset(at, r[0], r[1])
						}
					}
				case !beforeT.IsZero():
					what = "the records older than " + beforeT.Format(time.RFC3339)
					after, err := adm.ListOffsetsAfterMilli(ctx, beforeT.UnixMilli(), topic)
					if err != nil {
						return cf.explain(err)
					}
					for p, r := range b {
						upTo[p] = r[0]
						if l, ok := after.Lookup(topic, p); ok && l.Err == nil {
							if l.Offset < 0 { // none at or after the time
								upTo[p] = r[1]
							} else {
								upTo[p] = clampOffset(l.Offset, r[0], r[1])
							}
						}
					}
				default:
					for p, r := range b {
						upTo[p] = r[1]
					}
				}
				var n int64
				var offs kadm.Offsets
				for p, r := range b {
					if upTo[p] > r[0] {
						n += upTo[p] - r[0]
						offs.Add(kadm.Offset{Topic: topic, Partition: p, At: upTo[p], LeaderEpoch: -1})
					}
				}
				out := cmd.OutOrStdout()
				if n == 0 {
					if cf.json {
						return writeJSON(out, purgeResult{Topic: topic, Partitions: []purgePartition{}})
					}
					_, err := fmt.Fprintf(out, "Nothing to purge in %s.\n", topic)
					return err
				}
				if !yes {
					if !stdinIsTerminal(cmd.InOrStdin()) {
						return errors.New("refusing to purge without confirmation: stdin is not a terminal (pass --yes)")
					}
					if !confirm(cmd, fmt.Sprintf("Delete %s of %s (%d records)?", what, topic, n)) {
						return errors.New("aborted: nothing was deleted")
					}
				}
				resps, err := adm.DeleteRecords(ctx, offs)
				if err != nil && len(resps) == 0 {
					return cf.explain(err)
				}
				res := purgeResult{Topic: topic, Partitions: []purgePartition{}}
				var errs []error
				for _, p := range b.partitions() {
					r := b[p]
					if upTo[p] <= r[0] {
						continue
					}
					pp := purgePartition{Partition: p, OldStart: r[0], NewStart: r[0]}
					d, ok := resps.Lookup(topic, p)
					switch {
					case !ok:
						pp.Error = "not answered"
						errs = append(errs, fmt.Errorf("partition %d: not answered", p))
					case d.Err != nil:
						pp.Error = kerrName(d.Err)
						errs = append(errs, fmt.Errorf("partition %d: %w", p, d.Err))
					default:
						pp.NewStart = d.LowWatermark
						res.Removed += max(d.LowWatermark-r[0], 0)
					}
					res.Partitions = append(res.Partitions, pp)
				}
				if cf.json {
					err = writeJSON(out, res)
				} else {
					_, err = fmt.Fprintf(out, "Purged %d records from %s (%d partitions).\n", res.Removed, topic, len(res.Partitions))
				}
				return errors.Join(append([]error{err}, errs...)...)
			})
		},
	}
	fs := cmd.Flags()
	fs.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	fs.BoolVar(&redriven, "redriven", false, "delete only up to the redrive group's committed offsets (what `dlq redrive` has handled)")
	fs.StringVar(&before, "before", "", "delete only the records before the first one parked at or after this time (a duration ago, 72h, or YYYY-MM-DDTHH:MM:SS[Z])")
	fs.StringVar(&prefix, "prefix", berthmsg.DefaultDLQTopicNamePrefix, "DLQ topic name prefix; a topic without it must have "+berthmsg.TopicConfigDLQGroupEnable+"=true")
	fs.StringVar(&group, "group", "", "with --redriven: the redrive group (default "+redriveGroupPrefix+"DLQ-TOPIC)")
	return cmd
}

// requireDLQTopic refuses to purge a topic that is not a DLQ topic.
func requireDLQTopic(ctx context.Context, adm *kadm.Client, topic, prefix string) error {
	if prefix != "" && strings.HasPrefix(topic, prefix) {
		return nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		for _, rc := range rcs {
			if rc.Err != nil {
				return fmt.Errorf("topic %q: %w", topic, rc.Err)
			}
			for _, c := range rc.Configs {
				if c.Key == berthmsg.TopicConfigDLQGroupEnable && strings.EqualFold(c.MaybeValue(), "true") {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("topic %q is not a dead-letter topic: its name lacks the prefix %q and it does not have %s=true (pass --prefix to change the prefix)", topic, prefix, berthmsg.TopicConfigDLQGroupEnable)
}
