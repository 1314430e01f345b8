package cli

// `berth dlq redrive`: parked jobs produced back to their source topic
// (or --to) at --rate, resumable through the offsets of the redrive
// group, which are committed only past acknowledged records (dlq.go has
// the command's overview).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/pkg/berthmsg"
)

// ---- redrive ----

type redriveOptions struct {
	to                   string
	rate                 float64
	dryRun               bool
	reason, since, until string
	maxRedrives          int64
	fromStart            bool
	group                string
}

// redriveRefusal is a record the loop guard (or a missing target) kept
// in the DLQ.
type redriveRefusal struct {
	Partition    int32  `json:"partition"`
	Offset       int64  `json:"offset"`
	SourceTopic  string `json:"source_topic"`
	RedriveCount int64  `json:"redrive_count"`
	Why          string `json:"why"`
}

// redriveMove is a record redriven (or, with --dry-run, that would be).
type redriveMove struct {
	Partition    int32   `json:"partition"`
	Offset       int64   `json:"offset"`
	To           string  `json:"to"`
	Key          *string `json:"key"`
	RedriveCount int64   `json:"redrive_count"` // after the redrive
}

type redriveResult struct {
	Topic       string           `json:"topic"`
	Group       string           `json:"group"`
	DryRun      bool             `json:"dry_run"`
	Total       int64            `json:"total"` // records in the range read
	Moved       int64            `json:"moved"` // with --dry-run: would move
	Skipped     int64            `json:"skipped"`
	Refused     int64            `json:"refused"`   // by the loop guard
	NoTarget    int64            `json:"no_target"` // no source topic header, or the target topic does not exist
	Failed      int64            `json:"failed"`
	Interrupted bool             `json:"interrupted"`
	ElapsedMs   int64            `json:"elapsed_ms"`
	Committed   map[int32]int64  `json:"committed,omitempty"` // the redrive group's offsets at the end
	Refusals    []redriveRefusal `json:"refusals"`
	Moves       []redriveMove    `json:"moves,omitempty"` // --dry-run only
	Error       string           `json:"error,omitempty"`
}

func newDLQRedriveCmd(cf *clientFlags) *cobra.Command {
	var o redriveOptions
	cmd := &cobra.Command{
		Use:   "redrive DLQ-TOPIC",
		Short: "Produce parked jobs back to their source topic at a bounded rate; resumable, never loses a job",
		Example: `  berth dlq redrive dlq.shipments --dry-run
  berth dlq redrive dlq.shipments --rate 50 --reason delivery-limit --since 1h
  berth dlq redrive dlq.shipments --to shipments-retry --max-redrives 5`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			f, err := parseDLQFilter(o.reason, o.since, o.until, time.Now())
			if err != nil {
				return err
			}
			switch {
			case o.rate <= 0:
				return fmt.Errorf("--rate %g: must be positive (records per second)", o.rate)
			case o.maxRedrives < 1:
				return fmt.Errorf("--max-redrives %d: must be at least 1", o.maxRedrives)
			}
			if o.group == "" {
				o.group = redriveGroupPrefix + topic
			}
			cf.clientID = "berth-dlq-redrive" // the audit trail's io.berth.dlq.redrive (handler.ClientIDDLQRedrive)
			return withDLQAdmin(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
				res, err := redrive(ctx, cf, adm, topic, o, f, cmd.ErrOrStderr())
				if res == nil {
					return cf.explain(err)
				}
				out := cmd.OutOrStdout()
				var perr error
				if cf.json {
					if err != nil {
						res.Error = err.Error()
					}
					perr = writeJSON(out, res)
				} else {
					perr = printRedrive(out, res)
				}
				return errors.Join(cf.explain(err), perr)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.to, "to", "", "produce to this topic instead of each job's source topic ("+berthmsg.HeaderDLQTopic+")")
	fs.Float64Var(&o.rate, "rate", 100, "records produced per second at most")
	fs.BoolVar(&o.dryRun, "dry-run", false, "list what would be moved; produce and commit nothing")
	fs.StringVar(&o.reason, "reason", "", "only jobs parked for this reason: rejected or delivery-limit")
	fs.StringVar(&o.since, "since", "", "only jobs parked at or after this time (a duration ago, 2h, or YYYY-MM-DDTHH:MM:SS[Z])")
	fs.StringVar(&o.until, "until", "", "only jobs parked before this time (as --since)")
	fs.Int64Var(&o.maxRedrives, "max-redrives", 3, "loop guard: refuse jobs already redriven this many times (they stay in the DLQ)")
	fs.BoolVar(&o.fromStart, "from-start", false, "start at the DLQ's first record instead of where the last redrive stopped")
	fs.StringVar(&o.group, "group", "", "consumer group holding the redrive's progress (default "+redriveGroupPrefix+"DLQ-TOPIC)")
	return cmd
}

// redriveProgress tracks, per DLQ partition, the records handed on in
// offset order and which are finished (produced and acknowledged, or
// skipped), so the committable offset is the end of the finished prefix.
type redriveProgress struct {
	mu      sync.Mutex
	pending map[int32][]*redriveSlot
	next    map[int32]int64 // the offset to commit: everything before it is finished
	kept    map[int32]int64 // the first offset not moved (skipped or refused), if any
	dirty   bool
	failed  error
}

// keptMetadata is the commit metadata saying that records from offset
// on (up to the committed offset) may not have been moved.
func keptMetadata(offset int64) string { return "kept=" + strconv.FormatInt(offset, 10) }

// parseKept reads keptMetadata; -1 when there is none.
func parseKept(md string) int64 {
	if v, ok := strings.CutPrefix(md, "kept="); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}

// keep records that the record at offset stays in the DLQ unmoved.
func (p *redriveProgress) keep(partition int32, offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k, ok := p.kept[partition]; !ok || offset < k {
		p.kept[partition] = offset
	}
}

type redriveSlot struct {
	offset int64
	done   bool
}

func (p *redriveProgress) add(partition int32, offset int64, done bool) *redriveSlot {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &redriveSlot{offset: offset, done: done}
	p.pending[partition] = append(p.pending[partition], s)
	p.advance(partition)
	return s
}

func (p *redriveProgress) finish(partition int32, s *redriveSlot, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.failed == nil {
			p.failed = err
		}
		return // never past a record that was not produced
	}
	s.done = true
	p.advance(partition)
}

// advance moves next over the finished prefix (p.mu held).
func (p *redriveProgress) advance(partition int32) {
	q := p.pending[partition]
	i := 0
	for i < len(q) && q[i].done {
		p.next[partition] = q[i].offset + 1
		p.dirty = true
		i++
	}
	p.pending[partition] = q[i:]
}

func (p *redriveProgress) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// snapshot returns the offsets to commit, with their metadata, and
// whether they moved since the last snapshot.
func (p *redriveProgress) snapshot() (kadm.Offsets, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	moved := p.dirty
	p.dirty = false
	var offs kadm.Offsets
	for part, o := range p.next {
		md := ""
		if k, ok := p.kept[part]; ok && k < o {
			md = keptMetadata(k)
		}
		offs.Add(kadm.Offset{Partition: part, At: o, LeaderEpoch: -1, Metadata: md})
	}
	return offs, moved
}

// commitProgress commits offsets (of topic) as the redrive group's.
func commitProgress(ctx context.Context, adm *kadm.Client, group, topic string, offsets kadm.Offsets) error {
	var offs kadm.Offsets
	offsets.Each(func(o kadm.Offset) {
		o.Topic = topic
		offs.Add(o)
	})
	resps, err := adm.CommitOffsets(ctx, group, offs)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("committing the redrive's progress (group %s): %w", group, err)
	}
	return nil
}

// redrive runs one redrive. A nil result means nothing was started; a
// result with an error is what happened before the error.
func redrive(ctx context.Context, cf *clientFlags, adm *kadm.Client, topic string, o redriveOptions, f dlqFilter, progressOut io.Writer) (*redriveResult, error) {
	b, err := topicBounds(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	if o.to != "" {
		tds, err := adm.ListTopics(ctx, o.to)
		if err != nil {
			return nil, err
		}
		if td, ok := tds[o.to]; !ok || td.Err != nil {
			return nil, fmt.Errorf("--to %q: %w", o.to, kerr.UnknownTopicOrPartition)
		}
	}
	// Where to start: the redrive group's commits, within the log.
	rng := dlqBounds{}
	var committed kadm.OffsetResponses
	if !o.fromStart {
		if committed, err = adm.FetchOffsetsForTopics(ctx, o.group, topic); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("reading the redrive's progress (group %s): %w", o.group, err)
		}
	}
	res := &redriveResult{Topic: topic, Group: o.group, DryRun: o.dryRun, Refusals: []redriveRefusal{}}
	prog := &redriveProgress{pending: map[int32][]*redriveSlot{}, next: map[int32]int64{}, kept: map[int32]int64{}}
	for p, r := range b {
		from := r[0]
		if c, ok := committed.Lookup(topic, p); ok && c.Err == nil && c.At >= 0 {
			from = clampOffset(c.At, r[0], r[1])
			if k := parseKept(c.Metadata); k >= 0 && k >= r[0] {
				prog.kept[p] = k
			}
		}
		rng[p] = [2]int64{from, r[1]}
		res.Total += r[1] - from
	}
	if len(prog.kept) > 0 {
		ps := slices.Sorted(maps.Keys(prog.kept))
		var at []string
		for _, p := range ps {
			at = append(at, fmt.Sprintf("%d@%d", p, prog.kept[p]))
		}
		fmt.Fprintf(progressOut, "note: earlier redrives skipped or refused records (from partition@offset %s on) that this run does not read again; redrive them with --from-start (and --reason/--since/--until)\n", strings.Join(at, ", "))
	}

	var (
		prod     *kgo.Client
		handled  atomic.Int64
		moved    atomic.Int64
		failed   atomic.Int64
		targets  = map[string]bool{} // topic -> exists
		interval = time.Duration(float64(time.Second) / o.rate)
		start    = time.Now()
		next     = start
	)
	if o.to != "" {
		targets[o.to] = true
	}
	if !o.dryRun {
		if prod, err = cf.connect(ctx,
			kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent: kgo's default
			kgo.RecordDeliveryTimeout(cf.timeout),
			kgo.ProducerLinger(0),
		); err != nil {
			return nil, err
		}
		defer prod.Close()
	}

	// Progress on stderr, and commits, about once a second.
	stopTicker := make(chan struct{})
	tickerDone := make(chan struct{})
	var commitErr atomic.Pointer[error]
	go func() {
		defer close(tickerDone)
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stopTicker:
				return
			case <-tk.C:
			}
			done := handled.Load()
			el := time.Since(start).Seconds()
			rate := float64(done) / max(el, 1e-9)
			eta := "-"
			if rate > 0 && res.Total > done {
				eta = (time.Duration(float64(res.Total-done)/rate) * time.Second).Round(time.Second).String()
			}
			fmt.Fprintf(progressOut, "%s: %d/%d records handled, %d moved, %s records/s, ETA %s\n", topic, done, res.Total, moved.Load(), formatRate(rate), eta)
			if offs, ok := prog.snapshot(); ok && !o.dryRun {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cf.timeout)
				if err := commitProgress(cctx, adm, o.group, topic, offs); err != nil {
					commitErr.Store(&err)
				}
				cancel()
			}
		}
	}()

	scanErr := scanRange(ctx, cf, topic, rng, cf.timeout, func(r *kgo.Record) bool {
		if prog.err() != nil {
			return false
		}
		j := decodeDLQ(r, time.Now())
		target := o.to
		if target == "" {
			target = j.SourceTopic
		}
		refuse := func(guard bool, why string) {
			if guard {
				res.Refused++
			} else {
				res.NoTarget++
			}
			res.Refusals = append(res.Refusals, redriveRefusal{Partition: r.Partition, Offset: r.Offset, SourceTopic: j.SourceTopic, RedriveCount: j.RedriveCount, Why: why})
			prog.keep(r.Partition, r.Offset)
			prog.add(r.Partition, r.Offset, true)
		}
		switch {
		case !f.match(j):
			res.Skipped++
			prog.keep(r.Partition, r.Offset)
			prog.add(r.Partition, r.Offset, true)
		case j.RedriveCount >= o.maxRedrives:
			refuse(true, fmt.Sprintf("redriven %d times already (--max-redrives %d)", j.RedriveCount, o.maxRedrives))
		case target == "":
			refuse(false, "no "+berthmsg.HeaderDLQTopic+" header (give --to)")
		default:
			exists, known := targets[target]
			if !known {
				tds, err := adm.ListTopics(ctx, target)
				td, ok := tds[target]
				exists = err == nil && ok && td.Err == nil
				if err == nil {
					targets[target] = exists
				}
			}
			if !exists {
				refuse(false, "topic "+target+" does not exist (give --to)")
				break
			}
			// Pace: the n-th record is produced no sooner than start + (n-1)/rate.
			if d := time.Until(next); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return false
				case <-t.C:
				}
			}
			next = next.Add(interval)
			if now := time.Now(); next.Before(now.Add(-interval)) {
				next = now // no burst after a slow stretch
			}
			if o.dryRun {
				moved.Add(1)
				res.Moves = append(res.Moves, redriveMove{Partition: r.Partition, Offset: r.Offset, To: target, Key: j.Key, RedriveCount: j.RedriveCount + 1})
				break
			}
			slot := prog.add(r.Partition, r.Offset, false)
			part := r.Partition
			// Not cancelled with the run: an interruption stops reading,
			// and what was handed to the producer is still acknowledged
			// and committed (else it stays uncommitted and is redriven
			// again by the next run).
			prod.Produce(context.WithoutCancel(ctx), redriveRecord(r, target, j.RedriveCount), func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
				} else {
					moved.Add(1)
				}
				prog.finish(part, slot, err)
			})
		}
		handled.Add(1)
		return true
	})
	if prod != nil {
		// Wait for the acknowledgements of what was produced (they can
		// still arrive after an interruption).
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cf.timeout)
		_ = prod.Flush(fctx)
		cancel()
	}
	close(stopTicker)
	<-tickerDone
	var errs []error
	if !o.dryRun {
		if offs, _ := prog.snapshot(); len(offs) > 0 {
			// Always the last word, even if a periodic commit failed.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cf.timeout)
			if err := commitProgress(cctx, adm, o.group, topic, offs); err != nil {
				errs = append(errs, err)
			} else {
				commitErr.Store(nil)
			}
			cancel()
			res.Committed = map[int32]int64{}
			offs.Each(func(o kadm.Offset) { res.Committed[o.Partition] = o.At })
		}
	}
	res.Moved, res.Failed = moved.Load(), failed.Load()
	res.ElapsedMs = time.Since(start).Milliseconds()
	if ctx.Err() != nil {
		res.Interrupted = true
		errs = append(errs, fmt.Errorf("redrive interrupted after %d of %d records; run it again to continue where it stopped", handled.Load(), res.Total))
	} else if scanErr != nil {
		errs = append(errs, scanErr)
	}
	if err := prog.err(); err != nil {
		errs = append(errs, fmt.Errorf("producing: %w (the failed record and those after it stay uncommitted; run again to retry)", err))
	}
	if p := commitErr.Load(); p != nil {
		errs = append(errs, *p)
	}
	return res, errors.Join(errs...)
}

func printRedrive(w io.Writer, res *redriveResult) error {
	if res.DryRun && len(res.Moves) > 0 {
		t := newTable(w, "partition", "offset", "to", "key", "redrive-count")
		for _, m := range res.Moves {
			key := "null"
			if m.Key != nil {
				key = firstLine(*m.Key, 24)
			}
			t.row(m.Partition, m.Offset, m.To, key, m.RedriveCount)
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if len(res.Refusals) > 0 {
		t := newTable(w, "refused-partition", "offset", "source", "redrive-count", "why")
		for _, r := range res.Refusals {
			t.row(r.Partition, r.Offset, dashIfEmpty(r.SourceTopic), r.RedriveCount, r.Why)
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	movedLabel := "moved"
	if res.DryRun {
		movedLabel = "would move"
	}
	t := newTable(w, "result", "records")
	t.row(movedLabel, res.Moved)
	t.row("skipped by filter", res.Skipped)
	t.row("refused by loop guard", res.Refused)
	if res.NoTarget > 0 {
		t.row("no target topic", res.NoTarget)
	}
	if res.Failed > 0 {
		t.row("failed", res.Failed)
	}
	t.row("total read", res.Total)
	if err := t.flush(); err != nil {
		return err
	}
	switch {
	case res.DryRun:
		_, err := fmt.Fprintln(w, "Dry run: nothing was produced or committed.")
		return err
	case res.Interrupted:
		_, err := fmt.Fprintf(w, "Interrupted after %s; progress is committed in group %s.\n", time.Duration(res.ElapsedMs)*time.Millisecond, res.Group)
		return err
	}
	_, err := fmt.Fprintf(w, "Redrove %d records from %s in %s (progress in group %s).\n", res.Moved, res.Topic, (time.Duration(res.ElapsedMs) * time.Millisecond).Round(time.Millisecond), res.Group)
	return err
}
