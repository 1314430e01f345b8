package cli

// `berth produce TOPIC`: a console producer in the manner of
// kafka-console-producer.sh. Each input line (stdin, or each --value) is one
// record; --key-separator splits a key off the front of the line as Kafka's
// parse.key/key.separator do, and --format json reads
// {"key":..,"value":..,"headers":{..},"partition":..} objects, the same shape
// `berth consume --format json` writes, so the two can be piped together.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { clientCommands = append(clientCommands, newProduceCmd) }

// maxInputLine bounds one input line (one record) read from stdin.
const maxInputLine = 16 << 20

// ---- flag values shared with bench ----

// parseAcks maps --acks to kgo's Acks.
func parseAcks(s string) (kgo.Acks, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	case "1", "leader":
		return kgo.LeaderAck(), nil
	case "0", "none":
		return kgo.NoAck(), nil
	}
	return kgo.Acks{}, fmt.Errorf("--acks %q: want all, 1 or 0", s)
}

// acksOpts returns the producer options for --acks: kgo's idempotent producer
// requires acks=all, so acks 1 and 0 turn idempotence off.
func acksOpts(s string) ([]kgo.Opt, error) {
	acks, err := parseAcks(s)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.RequiredAcks(acks)}
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	return opts, nil
}

// parseCompression maps --compression to a kgo codec.
func parseCompression(s string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("--compression %q: want none, gzip, snappy, lz4 or zstd", s)
}

// parseHeaders maps repeated --header k=v flags to record headers, in order.
func parseHeaders(kvs []string) ([]kgo.RecordHeader, error) {
	var hs []kgo.RecordHeader
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--header %q: want key=value", kv)
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return hs, nil
}

// ---- input parsing ----

// recordParser turns one input line into a record.
type recordParser struct {
	format    string // "text" or "json"
	keySep    string // text: split key from value at the first occurrence; "" = no key
	headers   []kgo.RecordHeader
	partition int32 // -1: let the partitioner choose
}

// parsedRecord is a record plus whether its partition was chosen by the
// input (--partition, or "partition" in a JSON line) rather than the
// partitioner.
type parsedRecord struct {
	rec    *kgo.Record
	pinned bool
}

func (p *recordParser) parse(line string) (parsedRecord, error) {
	line = strings.TrimSuffix(line, "\r")
	rec := &kgo.Record{Partition: p.partition}
	pinned := p.partition >= 0
	switch p.format {
	case "json":
		var in jsonRecord
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			return parsedRecord{}, fmt.Errorf("not a JSON record object: %w", err)
		}
		var err error
		if rec.Key, err = decodeJSONBytes(in.Key, in.KeyEncoding, "key"); err != nil {
			return parsedRecord{}, err
		}
		if rec.Value, err = decodeJSONBytes(in.Value, in.ValueEncoding, "value"); err != nil {
			return parsedRecord{}, err
		}
		rec.Headers = slices.Clone(p.headers)
		keys := make([]string, 0, len(in.Headers))
		for k := range in.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, err := decodeJSONBytes(in.Headers[k], "", "header "+k)
			if err != nil {
				return parsedRecord{}, err
			}
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: v})
		}
		if in.Partition != nil {
			if *in.Partition < 0 {
				return parsedRecord{}, fmt.Errorf("partition %d: must be 0 or more", *in.Partition)
			}
			rec.Partition, pinned = *in.Partition, true
		}
	default:
		value := line
		if p.keySep != "" {
			k, v, ok := strings.Cut(line, p.keySep)
			if !ok {
				return parsedRecord{}, fmt.Errorf("no key separator %q in the line (--key-separator)", p.keySep)
			}
			rec.Key, value = []byte(k), v
		}
		rec.Value = []byte(value)
		rec.Headers = slices.Clone(p.headers)
	}
	return parsedRecord{rec: rec, pinned: pinned}, nil
}

// jsonRecord is the JSON line format read by produce and written by consume.
// Key, value and header values are JSON strings (or null); any other JSON
// value is taken as its raw text. An encoding of "base64" means the string
// is base64 of the bytes (consume writes that for bytes that are not UTF-8).
type jsonRecord struct {
	Key           json.RawMessage            `json:"key"`
	Value         json.RawMessage            `json:"value"`
	Headers       map[string]json.RawMessage `json:"headers"`
	Partition     *int32                     `json:"partition"`
	KeyEncoding   string                     `json:"key_encoding"`
	ValueEncoding string                     `json:"value_encoding"`
}

// decodeJSONBytes decodes one key, value or header value of a JSON line.
func decodeJSONBytes(raw json.RawMessage, encoding, what string) ([]byte, error) {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" {
		return nil, nil
	}
	if trimmed[0] != '"' {
		if encoding != "" {
			return nil, fmt.Errorf("%s: %s encoding needs a JSON string", what, encoding)
		}
		return []byte(trimmed), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	switch encoding {
	case "":
		if s == "" {
			return []byte{}, nil
		}
		return []byte(s), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%s: bad base64: %w", what, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%s: unknown encoding %q (want base64)", what, encoding)
}

// ---- partitioning ----

// pinKey marks, in a record's Context, a record whose Partition field was
// chosen by the input.
type pinKey struct{}

// pinnedPartitioner honours the Partition of pinned records and lets inner
// partition the rest. It forwards kgo's optional partitioner interfaces, so
// the default (adaptive, sticky) behaviour is kept for unpinned records.
type pinnedPartitioner struct{ inner kgo.Partitioner }

func (p pinnedPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	return &pinnedTopicPartitioner{inner: p.inner.ForTopic(t)}
}

type pinnedTopicPartitioner struct{ inner kgo.TopicPartitioner }

func isPinned(r *kgo.Record) bool { return r.Context != nil && r.Context.Value(pinKey{}) != nil }

// RequiresConsistency is true for pinned records so n counts every
// partition, not only the writable ones, and the index is the partition.
func (p *pinnedTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return isPinned(r) || p.inner.RequiresConsistency(r)
}

func (p *pinnedTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if isPinned(r) {
		return int(r.Partition)
	}
	return p.inner.Partition(r, n)
}

func (p *pinnedTopicPartitioner) PartitionByBackup(r *kgo.Record, n int, it kgo.TopicBackupIter) int {
	if isPinned(r) {
		return int(r.Partition)
	}
	if b, ok := p.inner.(kgo.TopicBackupPartitioner); ok {
		return b.PartitionByBackup(r, n, it)
	}
	return p.inner.Partition(r, n)
}

func (p *pinnedTopicPartitioner) OnNewBatch() {
	if nb, ok := p.inner.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}

// defaultPartitioner is kgo's default partitioner, spelled out so it can be
// wrapped by pinnedPartitioner.
func defaultPartitioner() kgo.Partitioner {
	return kgo.UniformBytesPartitioner(64<<10, true, true, nil)
}

// ---- command ----

type produceOptions struct {
	keySep      string
	headers     []string
	partition   int32
	acks        string
	compression string
	format      string
	values      []string
}

// produceResult is one line of `berth produce --json` output.
type produceResult struct {
	Record    int64  `json:"record"` // 1-based position in the input
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Error     string `json:"error,omitempty"`
}

// produceSummary counts what happened; printed at the end.
type produceSummary struct {
	Topic    string `json:"topic"`
	Records  int64  `json:"records"`
	Produced int64  `json:"produced"`
	Errors   int64  `json:"errors"`
}

func newProduceCmd() *cobra.Command {
	var o produceOptions
	var cf *clientFlags
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Write records read from stdin (one per line) or from --value flags",
		Long: `Write records to TOPIC, one per input line, as kafka-console-producer does.

Lines come from stdin, or from each --value flag when any is given. With
--key-separator, the text before the first separator is the key. With
--format json, each line is {"key":..,"value":..,"headers":{..},"partition":..}
(every field optional; null key or value means none), the shape that
'berth consume --format json' writes.

At the end a summary (records, errors) is printed; with --json, one result
per record (partition, offset or error) is printed instead, and the summary
goes to stderr. The exit status is 1 if any record failed.`,
		Example: `  echo hello | berth produce orders
  printf 'k1:v1\nk2:v2\n' | berth produce orders --key-separator :
  berth produce orders --value a --value b --header source=cli --acks 1
  berth consume orders --format json --timeout-idle 2s | berth produce orders-copy --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProduce(cmd, cf, &o, args[0])
		},
	}
	cf = addClientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.keySep, "key-separator", "", "split each text line into key and value at the first occurrence of this string")
	fs.StringArrayVarP(&o.headers, "header", "H", nil, "header key=value added to every record (repeatable)")
	fs.Int32VarP(&o.partition, "partition", "p", -1, "write every record to this partition (-1: the partitioner chooses, by key hash when there is a key)")
	fs.StringVar(&o.acks, "acks", "all", "acknowledgements to wait for: all (idempotent), 1 or 0")
	fs.StringVar(&o.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	fs.StringVar(&o.format, "format", "text", "input format: text or json")
	fs.StringArrayVar(&o.values, "value", nil, "a record to write instead of reading stdin (repeatable; parsed like an input line)")
	return cmd
}

func runProduce(cmd *cobra.Command, cf *clientFlags, o *produceOptions, topic string) error {
	if err := cf.resolve(cmd); err != nil {
		return err
	}
	if o.format != "text" && o.format != "json" {
		return fmt.Errorf("--format %q: want text or json", o.format)
	}
	if o.format == "json" && o.keySep != "" {
		return errors.New("--key-separator applies to --format text; JSON lines carry their own key")
	}
	if o.partition < -1 {
		return fmt.Errorf("--partition %d: want a partition number, or -1", o.partition)
	}
	headers, err := parseHeaders(o.headers)
	if err != nil {
		return err
	}
	codec, err := parseCompression(o.compression)
	if err != nil {
		return err
	}
	opts, err := acksOpts(o.acks)
	if err != nil {
		return err
	}
	opts = append(opts,
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordDeliveryTimeout(max(cf.timeout, time.Second)), // kgo requires at least 1s
	)
	switch {
	case o.partition >= 0:
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	case o.format == "json":
		opts = append(opts, kgo.RecordPartitioner(pinnedPartitioner{defaultPartitioner()}))
	}

	ctx := cmd.Context()
	cl, err := cf.connect(ctx, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Fail before reading any input if the topic or partition is missing.
	if err := checkTopic(ctx, cf, cl, topic, o.partition); err != nil {
		return err
	}

	parser := &recordParser{format: o.format, keySep: o.keySep, headers: headers, partition: o.partition}
	rep := &produceReporter{cf: cf, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), sum: produceSummary{Topic: topic}}

	// Records are produced with a context that SIGINT does not cancel:
	// Ctrl-C stops reading input, and what was read is still delivered.
	produceCtx := context.WithoutCancel(ctx)
	pinCtx := context.WithValue(produceCtx, pinKey{}, true)

	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		defer close(lines)
		readErr <- readInput(ctx, cmd.InOrStdin(), o.values, lines)
	}()

	var n int64
read:
	for {
		select {
		case <-ctx.Done():
			break read
		case line, ok := <-lines:
			if !ok {
				break read
			}
			n++
			pr, err := parser.parse(line)
			if err != nil {
				rep.failed(n, topic, -1, fmt.Errorf("line %d: %w", n, err))
				continue
			}
			if pr.pinned {
				pr.rec.Context = pinCtx
			}
			seq := n
			cl.Produce(produceCtx, pr.rec, func(r *kgo.Record, err error) { rep.done(seq, r, err) })
		}
	}
	var inErr error
	if ctx.Err() == nil {
		inErr = <-readErr
	}

	fctx, cancel := context.WithTimeout(produceCtx, 2*cf.timeout)
	defer cancel()
	flushErr := cl.Flush(fctx)
	cl.Close() // fails anything still buffered, so every promise has run
	if flushErr != nil {
		flushErr = fmt.Errorf("waiting for acknowledgements: %w", cf.explain(flushErr))
	}

	sumErr := rep.finish()
	return errors.Join(inErr, flushErr, sumErr)
}

// readInput sends each --value, or else each stdin line, to lines.
func readInput(ctx context.Context, in io.Reader, values []string, lines chan<- string) error {
	send := func(s string) bool {
		select {
		case lines <- s:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if len(values) > 0 {
		for _, v := range values {
			if !send(v) {
				return nil
			}
		}
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxInputLine)
	for sc.Scan() {
		if !send(sc.Text()) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("reading stdin: a line is longer than %d MiB", maxInputLine>>20)
		}
		return fmt.Errorf("reading stdin: %w", err)
	}
	return nil
}

// produceReporter collects per-record outcomes. kgo calls promises serially,
// but parse errors are reported from the reading goroutine, hence the mutex.
type produceReporter struct {
	cf     *clientFlags
	out    io.Writer
	errOut io.Writer

	mu       sync.Mutex
	sum      produceSummary
	printed  int   // error lines printed in human mode
	firstErr error // first record error, for the exit status
}

// maxErrorLines is how many record errors human output shows.
const maxErrorLines = 10

func (r *produceReporter) done(seq int64, rec *kgo.Record, err error) {
	if err != nil {
		r.failed(seq, rec.Topic, rec.Partition, fmt.Errorf("record %d: %w", seq, r.cf.explain(err)))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum.Records++
	r.sum.Produced++
	if r.cf.json {
		writeJSONLine(r.out, produceResult{Record: seq, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset})
	}
}

func (r *produceReporter) failed(seq int64, topic string, partition int32, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum.Records++
	r.sum.Errors++
	if r.firstErr == nil {
		r.firstErr = err
	}
	if r.cf.json {
		writeJSONLine(r.out, produceResult{Record: seq, Topic: topic, Partition: partition, Offset: -1, Error: err.Error()})
		return
	}
	if r.printed < maxErrorLines {
		fmt.Fprintln(r.errOut, "error:", err)
	}
	r.printed++
}

// finish prints the summary and returns an error if any record failed.
func (r *produceReporter) finish() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sum
	w := r.out
	if r.cf.json {
		w = r.errOut
	}
	if r.printed > maxErrorLines {
		fmt.Fprintf(r.errOut, "... and %d more errors\n", r.printed-maxErrorLines)
	}
	fmt.Fprintf(w, "Produced %d of %d records to %s (%d errors).\n", s.Produced, s.Records, s.Topic, s.Errors)
	switch {
	case s.Errors == 0:
		return nil
	case r.cf.json: // the errors are in the JSON results
		return fmt.Errorf("%d of %d records failed; the first: %w", s.Errors, s.Records, r.firstErr)
	default: // the errors were printed above
		return fmt.Errorf("%d of %d records failed", s.Errors, s.Records)
	}
}
