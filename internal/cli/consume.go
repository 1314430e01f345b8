package cli

// `berth consume TOPIC`: a console consumer in the manner of
// kafka-console-consumer.sh. Without --group it reads the topic (or one
// partition with --partition) directly; with --group it joins a consumer
// group and commits exactly the records it printed.

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { clientCommands = append(clientCommands, newConsumeCmd) }

type consumeOptions struct {
	fromBeginning bool
	offset        string
	partition     int32
	group         string
	maxMessages   int64
	idle          time.Duration
	format        string
	isolation     string
	print         printOptions
}

// printOptions choose the fields of --format text output.
type printOptions struct {
	key, headers, offset, timestamp bool
}

func newConsumeCmd() *cobra.Command {
	var o consumeOptions
	var cf *clientFlags
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records from a topic",
		Long: `Print records from TOPIC, one per line, as kafka-console-consumer does.

Without --group the topic's partitions (or the one given by --partition) are
read directly and nothing is committed. With --group the consumer joins the
group, and the offsets of the records it printed are committed.

It runs until Ctrl-C, --max-messages records, or --timeout-idle without a
record. --format json prints one object per line:
  {"topic":..,"partition":..,"offset":..,"timestamp":<ms>,"key":..,"value":..,"headers":{..}}
Keys and values that are not UTF-8 are base64, flagged by "key_encoding" /
"value_encoding": "base64". 'berth produce --format json' reads this shape.`,
		Example: `  berth consume orders --from-beginning --max-messages 10
  berth consume orders --partition 0 --offset 42 --print-offset --print-key
  berth consume orders --group billing --timeout-idle 5s --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsume(cmd, cf, &o, args[0])
		},
	}
	cf = addClientFlags(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&o.fromBeginning, "from-beginning", false, "start at the earliest offset (same as --offset earliest)")
	fs.StringVar(&o.offset, "offset", "", "where to start: earliest, latest (the default) or an offset number; with --group, used only where the group has no commit")
	fs.Int32VarP(&o.partition, "partition", "p", -1, "read only this partition (-1: all partitions)")
	fs.StringVarP(&o.group, "group", "g", "", "consume as a member of this consumer group, committing printed records")
	fs.Int64VarP(&o.maxMessages, "max-messages", "n", 0, "exit after this many records (0: no limit)")
	fs.DurationVar(&o.idle, "timeout-idle", 0, "exit after no record for this long (0: wait until Ctrl-C)")
	fs.StringVar(&o.format, "format", "text", "output format: text or json (--json is the same as --format json)")
	fs.StringVar(&o.isolation, "isolation", "read_uncommitted", "read_committed (skip aborted and open transactions) or read_uncommitted")
	fs.BoolVar(&o.print.key, "print-key", false, "text: print the key before the value")
	fs.BoolVar(&o.print.headers, "print-headers", false, "text: print headers as k:v,k:v before the key and value")
	fs.BoolVar(&o.print.offset, "print-offset", false, "text: print Partition:P and Offset:O before the record")
	fs.BoolVar(&o.print.timestamp, "print-timestamp", false, "text: print CreateTime:MS (or LogAppendTime:MS) first")
	return cmd
}

// startOffset resolves --from-beginning and --offset.
func startOffset(fromBeginning bool, s string) (kgo.Offset, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if fromBeginning {
		if s != "" && s != "earliest" && s != "beginning" {
			return kgo.Offset{}, fmt.Errorf("--from-beginning and --offset %s disagree: give one", s)
		}
		return kgo.NewOffset().AtStart(), nil
	}
	switch s {
	case "", "latest", "end":
		return kgo.NewOffset().AtEnd(), nil
	case "earliest", "beginning":
		return kgo.NewOffset().AtStart(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return kgo.Offset{}, fmt.Errorf("--offset %q: want earliest, latest or an offset number (0 or more)", s)
	}
	return kgo.NewOffset().At(n), nil
}

// parseIsolation maps --isolation to kgo's isolation level.
func parseIsolation(s string) (kgo.IsolationLevel, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "read_uncommitted", "uncommitted", "":
		return kgo.ReadUncommitted(), nil
	case "read_committed", "committed":
		return kgo.ReadCommitted(), nil
	}
	return kgo.IsolationLevel{}, fmt.Errorf("--isolation %q: want read_committed or read_uncommitted", s)
}

func runConsume(cmd *cobra.Command, cf *clientFlags, o *consumeOptions, topic string) error {
	if err := cf.resolve(cmd); err != nil {
		return err
	}
	if cf.json {
		o.format = "json"
	}
	if o.format != "text" && o.format != "json" {
		return fmt.Errorf("--format %q: want text or json", o.format)
	}
	if o.partition < -1 {
		return fmt.Errorf("--partition %d: want a partition number, or -1 for all", o.partition)
	}
	if o.partition >= 0 && o.group != "" {
		return errors.New("--partition reads one partition directly and cannot be combined with --group")
	}
	if o.maxMessages < 0 {
		return fmt.Errorf("--max-messages %d: must be 0 (no limit) or more", o.maxMessages)
	}
	if o.idle < 0 {
		return fmt.Errorf("--timeout-idle %s: must be 0 (none) or more", o.idle)
	}
	start, err := startOffset(o.fromBeginning, o.offset)
	if err != nil {
		return err
	}
	iso, err := parseIsolation(o.isolation)
	if err != nil {
		return err
	}

	opts := []kgo.Opt{kgo.FetchIsolationLevel(iso)}
	switch {
	case o.partition >= 0:
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {o.partition: start}}))
	case o.group != "":
		opts = append(opts,
			kgo.ConsumerGroup(o.group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeStartOffset(start),
			kgo.AutoCommitMarks(), // commit what was printed, not what was fetched
		)
	default:
		opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeStartOffset(start))
	}

	ctx := cmd.Context()
	cl, err := cf.connect(ctx, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := checkTopic(ctx, cf, cl, topic, o.partition); err != nil {
		return err
	}
	if o.group != "" {
		if err := cf.requireGroups(ctx, cl, o.group); err != nil {
			return err
		}
	}

	out := bufio.NewWriter(cmd.OutOrStdout())
	count, loopErr := consumeLoop(ctx, cl, o, func(r *kgo.Record) error {
		var err error
		if o.format == "json" {
			err = writeJSONLine(out, newJSONOutRecord(r))
		} else {
			_, err = out.WriteString(formatRecordText(r, o.print) + "\n")
		}
		return err
	}, out.Flush, cmd.ErrOrStderr())
	if err := out.Flush(); err != nil && loopErr == nil {
		loopErr = err
	}

	if o.group != "" {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cf.timeout)
		defer cancel()
		if err := cl.CommitMarkedOffsets(cctx); err != nil {
			loopErr = errors.Join(loopErr, fmt.Errorf("committing offsets for group %s: %w", o.group, cf.explain(err)))
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Processed a total of %d messages\n", count)
	return loopErr
}

// checkTopic fails early, with advice, for a topic or partition that does
// not exist (a consumer would otherwise wait for it silently).
func checkTopic(ctx context.Context, cf *clientFlags, cl *kgo.Client, topic string, partition int32) error {
	tds, err := kadm.NewClient(cl).ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return cf.explain(err)
	}
	td, ok := tds[topic]
	if !ok {
		return topicErr(cf, topic, kerr.UnknownTopicOrPartition, "")
	}
	if td.Err != nil {
		return topicErr(cf, topic, td.Err, "")
	}
	if partition >= int32(len(td.Partitions)) {
		return fmt.Errorf("topic %q has %d partitions (0-%d): --partition %d does not exist", topic, len(td.Partitions), len(td.Partitions)-1, partition)
	}
	return nil
}

// consumeLoop polls until ctx is done (a clean exit), max messages, or idle
// timeout, calling emit for each record and flush after each poll. It
// returns the number of records emitted.
func consumeLoop(ctx context.Context, cl *kgo.Client, o *consumeOptions, emit func(*kgo.Record) error, flush func() error, errOut io.Writer) (int64, error) {
	var count int64
	warned := make(map[string]bool)
	for o.maxMessages == 0 || count < o.maxMessages {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if o.idle > 0 {
			pctx, cancel = context.WithTimeout(ctx, o.idle)
		}
		want := -1
		if o.maxMessages > 0 {
			want = int(o.maxMessages - count)
		}
		fetches := cl.PollRecords(pctx, want)
		idled := pctx.Err() != nil
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return count, nil
		}
		var fatal error
		fetches.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			var ke *kerr.Error
			if errors.As(err, &ke) && !ke.Retriable && fatal == nil {
				fatal = fmt.Errorf("topic %q partition %d: %w", t, p, kafkaError{err: err, ke: ke})
				return
			}
			if msg := err.Error(); !warned[msg] {
				warned[msg] = true
				if t == "" { // not about a partition: a group session error
					fmt.Fprintf(errOut, "warning: %v\n", err)
				} else {
					fmt.Fprintf(errOut, "warning: topic %q partition %d: %v\n", t, p, err)
				}
			}
		})
		if fatal != nil {
			return count, fatal
		}
		n := 0
		for r := range fetches.RecordsAll() {
			if err := emit(r); err != nil {
				return count, err
			}
			cl.MarkCommitRecords(r)
			count++
			n++
		}
		if err := flush(); err != nil {
			return count, err
		}
		if n == 0 && idled {
			return count, nil
		}
	}
	return count, nil
}

// formatRecordText renders a record as kafka-console-consumer's default
// formatter does: optional fields first, tab-separated, "null" for none.
func formatRecordText(r *kgo.Record, p printOptions) string {
	var b strings.Builder
	sep := func() {
		if b.Len() > 0 {
			b.WriteByte('\t')
		}
	}
	if p.timestamp {
		kind := "CreateTime"
		if r.Attrs.TimestampType() == 1 {
			kind = "LogAppendTime"
		}
		fmt.Fprintf(&b, "%s:%d", kind, r.Timestamp.UnixMilli())
	}
	if p.offset {
		sep()
		fmt.Fprintf(&b, "Partition:%d\tOffset:%d", r.Partition, r.Offset)
	}
	if p.headers {
		sep()
		if len(r.Headers) == 0 {
			b.WriteString("NO_HEADERS")
		}
		for i, h := range r.Headers {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(h.Key)
			b.WriteByte(':')
			b.WriteString(nullOr(h.Value))
		}
	}
	if p.key {
		sep()
		b.WriteString(nullOr(r.Key))
	}
	sep()
	b.WriteString(nullOr(r.Value))
	return b.String()
}

func nullOr(b []byte) string {
	if b == nil {
		return "null"
	}
	return string(b)
}

// jsonOutRecord is one line of `berth consume --format json`.
type jsonOutRecord struct {
	Topic         string             `json:"topic"`
	Partition     int32              `json:"partition"`
	Offset        int64              `json:"offset"`
	Timestamp     int64              `json:"timestamp"` // milliseconds since the epoch
	Key           *string            `json:"key"`
	Value         *string            `json:"value"`
	Headers       map[string]*string `json:"headers"`
	KeyEncoding   string             `json:"key_encoding,omitempty"`
	ValueEncoding string             `json:"value_encoding,omitempty"`
}

func newJSONOutRecord(r *kgo.Record) jsonOutRecord {
	j := jsonOutRecord{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp.UnixMilli(),
		Headers:   make(map[string]*string, len(r.Headers)),
	}
	j.Key, j.KeyEncoding = jsonBytes(r.Key)
	j.Value, j.ValueEncoding = jsonBytes(r.Value)
	for _, h := range r.Headers {
		if h.Value == nil {
			j.Headers[h.Key] = nil
			continue
		}
		v := string(h.Value)
		j.Headers[h.Key] = &v
	}
	return j
}

// jsonBytes renders bytes for JSON output: nil as null, UTF-8 as a string,
// anything else as base64 with encoding "base64".
func jsonBytes(b []byte) (*string, string) {
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
