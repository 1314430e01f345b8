package outbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RelayOptions tune a Relay.
type RelayOptions struct {
	// ID names the relay in the shard table and its log lines (default
	// hostname-pid-random).
	ID string
	// Producer are the kgo options of the relay's producer: seed brokers,
	// TLS, SASL. The relay adds acks=all and idempotence (kgo's
	// defaults, forced) and a delivery timeout below Lease.
	Producer []kgo.Opt
	// BatchSize is the most rows published per round (default 500).
	BatchSize int
	// ShardsPerRound is the most shards one round claims (default a
	// quarter of the shards, at least 1): with several relays each takes
	// some, so they publish in parallel.
	ShardsPerRound int
	// Idle is how long Run waits before looking again when a round found
	// nothing to send (default 50 ms): the latency added to a quiet
	// outbox.
	Idle time.Duration
	// Lease bounds a round: on SQLite the relay's claim on its shards
	// lasts this long (default 30 s); on both, a publish not acknowledged
	// within half of it is given up and retried in a later round.
	Lease time.Duration
	// KeepSent is how long sent rows are kept before Run deletes them
	// (default 24 h; negative: never).
	KeepSent time.Duration
	// Logger gets a line per failed round and per state change (default
	// slog.Default()).
	Logger *slog.Logger
}

// Relay publishes an outbox's unsent rows.
type Relay struct {
	ob   *Outbox
	db   *sql.DB
	cl   *kgo.Client
	opts RelayOptions
	t    string // the outbox table
	log  *slog.Logger

	published atomic.Int64
	errs      atomic.Int64
	rounds    atomic.Int64
	lastPrune time.Time
}

// NewRelay returns a relay of o's rows in db with its own producer.
func (o *Outbox) NewRelay(db *sql.DB, opts RelayOptions) (*Relay, error) {
	if opts.ID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		opts.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 500
	}
	if opts.ShardsPerRound <= 0 {
		opts.ShardsPerRound = max(1, o.cfg.Shards/4)
	}
	if opts.Idle <= 0 {
		opts.Idle = 50 * time.Millisecond
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.KeepSent == 0 {
		opts.KeepSent = 24 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	kopts := append(append([]kgo.Opt{}, opts.Producer...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(opts.Lease/2),
		kgo.MaxBufferedRecords(max(10000, 2*opts.BatchSize)),
	)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("outbox: relay producer: %w", err)
	}
	return &Relay{ob: o, db: db, cl: cl, opts: opts, t: o.cfg.Table,
		log: opts.Logger.With("outbox", o.cfg.Table, "relay", opts.ID)}, nil
}

// Close closes the relay's producer.
func (r *Relay) Close() { r.cl.Close() }

// Run relays until ctx is done, pruning sent rows as it goes. A failed
// round (the database or the brokers unreachable) is logged and retried
// with a growing pause (up to 5 s); Run returns only ctx's error.
func (r *Relay) Run(ctx context.Context) error {
	backoff := time.Duration(0)
	for {
		n, err := r.RelayOnce(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := time.Duration(0)
		switch {
		case err != nil:
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			wait = backoff
			r.log.Warn("outbox relay round failed; retrying", "err", err, "retry_in", wait)
		case n == 0:
			backoff = 0
			wait = r.opts.Idle
		default:
			backoff = 0
		}
		if err == nil {
			r.maybePrune(ctx) // once a minute, busy or not
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
	}
}

// row is one outbox row being relayed.
type row struct {
	id    int64
	shard int
	rec   *kgo.Record
}

// RelayOnce runs one round: it claims shards with unsent rows, publishes
// up to BatchSize of their rows in order and marks the acknowledged ones
// sent. It returns how many it marked.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	r.rounds.Add(1)
	if r.ob.cfg.Dialect == Postgres {
		return r.roundLocked(ctx)
	}
	return r.roundLeased(ctx)
}

// roundLocked is a PostgreSQL round: one transaction holds the claimed
// shards' rows locked (FOR UPDATE SKIP LOCKED: other relays take other
// shards) from the claim to the marks.
func (r *Relay) roundLocked(ctx context.Context) (int, error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("outbox: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	shards, err := queryInts(ctx, tx, fmt.Sprintf(`SELECT shard FROM %[1]s_shards s
WHERE EXISTS (SELECT 1 FROM %[1]s o WHERE o.shard = s.shard AND o.sent_ms IS NULL)
ORDER BY random() LIMIT $1 FOR UPDATE SKIP LOCKED`, r.t), r.opts.ShardsPerRound)
	if err != nil || len(shards) == 0 {
		return 0, err
	}
	rows, err := r.readRows(ctx, tx, shards)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	sent, perr := r.publish(ctx, rows)
	if len(sent) > 0 {
		if err := r.markSent(ctx, tx, sent, ""); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("outbox: commit: %w", err)
	}
	r.published.Add(int64(len(sent)))
	return len(sent), perr
}

// roundLeased is a SQLite round: the relay leases shards (a row update,
// atomic in SQLite), publishes outside any transaction, then marks the
// rows sent and gives the leases back in one transaction that checks the
// leases are still its own.
func (r *Relay) roundLeased(ctx context.Context) (int, error) {
	now := time.Now()
	until := now.Add(r.opts.Lease).UnixMilli()
	_, err := r.db.ExecContext(ctx, fmt.Sprintf(`UPDATE %[1]s_shards SET owner = ?, lease_until_ms = ?
WHERE shard IN (SELECT shard FROM %[1]s_shards
	WHERE (owner IS NULL OR owner = ? OR lease_until_ms < ?)
	AND EXISTS (SELECT 1 FROM %[1]s o WHERE o.shard = %[1]s_shards.shard AND o.sent_ms IS NULL)
	ORDER BY random() LIMIT ?)`, r.t), r.opts.ID, until, r.opts.ID, now.UnixMilli(), r.opts.ShardsPerRound)
	if err != nil {
		return 0, fmt.Errorf("outbox: lease shards: %w", err)
	}
	shards, err := queryInts(ctx, r.db, fmt.Sprintf(`SELECT shard FROM %s_shards WHERE owner = ? AND lease_until_ms = ?`, r.t), r.opts.ID, until)
	if err != nil || len(shards) == 0 {
		return 0, err
	}
	release := func(ex Execer) error {
		_, err := ex.ExecContext(ctx, fmt.Sprintf(`UPDATE %s_shards SET owner = NULL, lease_until_ms = NULL WHERE owner = ? AND shard IN (%s)`,
			r.t, SQLite.list(2, len(shards))), append([]any{r.opts.ID}, ints(shards)...)...)
		return err
	}
	rows, err := r.readRows(ctx, r.db, shards)
	if err != nil || len(rows) == 0 {
		_ = release(r.db)
		return 0, err
	}
	pctx, cancel := context.WithDeadline(ctx, time.UnixMilli(until).Add(-r.opts.Lease/4))
	sent, perr := r.publish(pctx, rows)
	cancel()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("outbox: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if len(sent) > 0 {
		if err := r.markSent(ctx, tx, sent, r.opts.ID); err != nil {
			return 0, err
		}
	}
	if err := release(tx); err != nil {
		return 0, fmt.Errorf("outbox: release shards: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("outbox: commit: %w", err)
	}
	r.published.Add(int64(len(sent)))
	return len(sent), perr
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readRows reads the oldest unsent rows of shards, up to BatchSize in
// all, in one statement of one ordered index walk per shard (the union of
// a query per shard: each reads the (shard, id) index of unsent rows from
// its start); a shard's rows come in id order, and rows of different
// shards need no order between them.
func (r *Relay) readRows(ctx context.Context, q querier, shards []int) ([]row, error) {
	d := r.ob.cfg.Dialect
	per := max(1, r.opts.BatchSize/len(shards))
	parts := make([]string, len(shards))
	for i := range shards {
		parts[i] = fmt.Sprintf(`SELECT * FROM (SELECT id, shard, topic, msg_key, msg_value, headers FROM %s
WHERE sent_ms IS NULL AND shard = %s ORDER BY id LIMIT %d) s%d`, r.t, d.Placeholder(i+1), per, i)
	}
	rs, err := q.QueryContext(ctx, strings.Join(parts, "\nUNION ALL\n"), ints(shards)...)
	if err != nil {
		return nil, fmt.Errorf("outbox: read rows: %w", err)
	}
	var out []row
	defer rs.Close()
	for rs.Next() {
		var (
			x          row
			topic      string
			key, value []byte
			headers    []byte
		)
		if err := rs.Scan(&x.id, &x.shard, &topic, &key, &value, &headers); err != nil {
			return nil, fmt.Errorf("outbox: read rows: %w", err)
		}
		hs, err := decodeHeaders(headers)
		if err != nil {
			return nil, fmt.Errorf("outbox: row %d: %w", x.id, err)
		}
		x.rec = &kgo.Record{Topic: topic, Key: key, Value: value, Headers: hs}
		out = append(out, x)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read rows: %w", err)
	}
	// A union's order is not promised: put the rows in id order (which
	// is each shard's order).
	slices.SortFunc(out, func(a, b row) int { return cmp.Compare(a.id, b.id) })
	return out, nil
}

// publish produces rows in order and returns the ids to mark sent: in each
// shard, the rows before its first failure (a later row of a shard whose
// earlier row failed is published again later, after it, so a key's order
// holds; the copy already delivered is a duplicate).
func (r *Relay) publish(ctx context.Context, rows []row) ([]int64, error) {
	recs := make([]*kgo.Record, len(rows))
	for i := range rows {
		recs[i] = rows[i].rec
	}
	res := r.cl.ProduceSync(ctx, recs...)
	failed := map[int]bool{}
	var sent []int64
	var first error
	for i, x := range rows {
		if err := res[i].Err; err != nil {
			failed[x.shard] = true
			r.errs.Add(1)
			if first == nil {
				first = fmt.Errorf("outbox: publish row %d to %s: %w", x.id, x.rec.Topic, err)
			}
			continue
		}
		if !failed[x.shard] {
			sent = append(sent, x.id)
		}
	}
	return sent, first
}

// markSent marks ids sent; with owner (SQLite) only while owner still
// holds the rows' shards.
func (r *Relay) markSent(ctx context.Context, tx *sql.Tx, ids []int64, owner string) error {
	d := r.ob.cfg.Dialect
	now := time.Now().UnixMilli()
	if d == Postgres { // one array parameter
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE %s SET sent_ms = $1 WHERE id = ANY($2)`, r.t), now, ids); err != nil {
			return fmt.Errorf("outbox: mark sent: %w", err)
		}
		return nil
	}
	for len(ids) > 0 {
		n := min(len(ids), 500)
		args := []any{now}
		for _, id := range ids[:n] {
			args = append(args, id)
		}
		q := fmt.Sprintf(`UPDATE %s SET sent_ms = %s WHERE id IN (%s)`, r.t, d.Placeholder(1), d.list(2, n))
		if owner != "" {
			q += fmt.Sprintf(` AND EXISTS (SELECT 1 FROM %[1]s_shards s WHERE s.shard = %[1]s.shard AND s.owner = %[2]s AND s.lease_until_ms >= %[3]s)`,
				r.t, d.Placeholder(n+2), d.Placeholder(n+3))
			args = append(args, owner, now)
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("outbox: mark sent: %w", err)
		}
		if got, err := res.RowsAffected(); err == nil && got < int64(n) && owner != "" {
			r.log.Warn("outbox relay lost its lease while publishing: rows stay unsent and are published again (duplicates)",
				"rows", int64(n)-got)
		}
		ids = ids[n:]
	}
	return nil
}

// maybePrune deletes rows sent more than KeepSent ago, once a minute.
func (r *Relay) maybePrune(ctx context.Context) {
	if r.opts.KeepSent < 0 || time.Since(r.lastPrune) < time.Minute {
		return
	}
	r.lastPrune = time.Now()
	if n, err := r.Prune(ctx, r.opts.KeepSent); err != nil {
		if ctx.Err() == nil {
			r.log.Warn("outbox prune failed", "err", err)
		}
	} else if n > 0 {
		r.log.Debug("outbox pruned", "rows", n)
	}
}

// Prune deletes the rows sent more than keep ago and returns how many.
func (r *Relay) Prune(ctx context.Context, keep time.Duration) (int64, error) {
	d := r.ob.cfg.Dialect
	res, err := r.db.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE sent_ms IS NOT NULL AND sent_ms < %s`, r.t, d.Placeholder(1)),
		time.Now().Add(-keep).UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("outbox: prune: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// Stats is an outbox's state, as the relay's metrics report it.
type Stats struct {
	Unsent        int64         // rows not yet published
	OldestUnsent  time.Duration // age of the oldest unsent row; 0 with none
	Published     int64         // rows this relay marked sent
	PublishErrors int64         // records this relay failed to publish
}

// Stats queries the outbox for its unsent rows and adds this relay's
// counters.
func (r *Relay) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Published: r.published.Load(), PublishErrors: r.errs.Load()}
	var oldest sql.NullInt64
	err := r.db.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*), min(created_ms) FROM %s WHERE sent_ms IS NULL`, r.t)).Scan(&st.Unsent, &oldest)
	if err != nil {
		return st, fmt.Errorf("outbox: stats: %w", err)
	}
	if oldest.Valid {
		st.OldestUnsent = max(0, time.Since(time.UnixMilli(oldest.Int64)))
	}
	return st, nil
}

func queryInts(ctx context.Context, q querier, query string, args ...any) ([]int, error) {
	rs, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("outbox: claim shards: %w", err)
	}
	defer rs.Close()
	var out []int
	for rs.Next() {
		var v int
		if err := rs.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rs.Err()
}

func ints(v []int) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}
