// Package inbox makes a consumer's effects happen once per event, however
// often the event is delivered: Kafka delivers at least once (a consumer
// restarted before committing its offset, a work-queue job whose lease ran
// out, an outbox relay that published twice), so a consumer that writes to
// a database records each event id it handled in the same transaction as
// the effect, and skips ids it has seen.
//
//	ok, err := ib.Process(ctx, db, "email-notifier", rec, func(tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, `INSERT INTO emails ...`)
//		return err
//	})
//	// then commit the offset (kgo) or return nil (pkg/worker accepts the job)
//
// The event id is the record's event-id header (pkg/event), which an
// outbox relay and Berth's retry and dead-letter topics keep on every
// copy. Offsets must be committed (or jobs accepted) only after the
// transaction commits: a crash in between redelivers the event, and the
// inbox skips it.
//
// What it does not cover: an effect outside the database (an HTTP call, an
// e-mail sent by a provider) is not part of the transaction; give that call
// the event id as its idempotency key. Ids older than the inbox's pruning
// window are forgotten: a redelivery later than that is handled again, so
// keep the window longer than the longest redelivery (the topic's retention
// for a consumer that may replay).
package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/pkg/event"
	"github.com/berthmq/berth/pkg/outbox"
)

// Config names an inbox's table.
type Config struct {
	// Dialect is the database: outbox.SQLite or outbox.Postgres.
	Dialect outbox.Dialect
	// Table is the inbox table (default berth_inbox). Lower-case letters,
	// digits and underscores.
	Table string
}

// Inbox records the events each consumer handled.
type Inbox struct {
	cfg Config
}

// New returns the inbox cfg describes.
func New(cfg Config) (*Inbox, error) {
	if cfg.Table == "" {
		cfg.Table = "berth_inbox"
	}
	if !outbox.ValidTableName(cfg.Table) {
		return nil, fmt.Errorf("inbox: table name %q: use lower-case letters, digits and underscores", cfg.Table)
	}
	if cfg.Dialect != outbox.SQLite && cfg.Dialect != outbox.Postgres {
		return nil, fmt.Errorf("inbox: unknown dialect %v", cfg.Dialect)
	}
	return &Inbox{cfg: cfg}, nil
}

// Migrate creates the inbox table if it does not exist.
func (ib *Inbox) Migrate(ctx context.Context, db *sql.DB) error {
	for _, stmt := range []string{
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	consumer TEXT NOT NULL,
	event_id TEXT NOT NULL,
	seen_ms BIGINT NOT NULL,
	PRIMARY KEY (consumer, event_id)
)`, ib.cfg.Table),
		fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s_seen ON %s (seen_ms)`, ib.cfg.Table, ib.cfg.Table),
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("inbox: migrate: %w", err)
		}
	}
	return nil
}

func (ib *Inbox) ph(i int) string { return ib.cfg.Dialect.Placeholder(i) }

// Handle runs fn in tx unless consumer already handled eventID: it first
// records (consumer, eventID) in tx; if the pair is there (a committed
// transaction handled the event) it skips fn and returns false. The
// caller commits tx. A concurrent Handle of the same event in another
// transaction waits for that one (PostgreSQL) or for the database's
// write lock (SQLite), then skips.
func (ib *Inbox) Handle(ctx context.Context, tx *sql.Tx, consumer, eventID string, fn func(tx *sql.Tx) error) (bool, error) {
	if consumer == "" || eventID == "" {
		return false, errors.New("inbox: a consumer and an event id are needed")
	}
	res, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (consumer, event_id, seen_ms) VALUES (%s, %s, %s) ON CONFLICT (consumer, event_id) DO NOTHING`,
		ib.cfg.Table, ib.ph(1), ib.ph(2), ib.ph(3)), consumer, eventID, time.Now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("inbox: record %s: %w", eventID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("inbox: record %s: %w", eventID, err)
	}
	if n == 0 {
		return false, nil // seen
	}
	if err := fn(tx); err != nil {
		return false, err
	}
	return true, nil
}

// Process handles r once for consumer in a transaction of its own on db:
// it begins one, calls Handle with r's event id, and commits (rolling back
// when fn fails). It reports whether fn ran. A record without an
// event-id header is identified by its topic, partition and offset, which
// catches redeliveries of that record but not copies of the event in other
// records.
func (ib *Inbox) Process(ctx context.Context, db *sql.DB, consumer string, r *kgo.Record, fn func(tx *sql.Tx) error) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("inbox: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	ran, err := ib.Handle(ctx, tx, consumer, EventID(r), fn)
	if err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("inbox: commit: %w", err)
	}
	return ran, nil
}

// EventID is the id Process uses for r: its event-id header, or
// "<topic>/<partition>@<offset>" without one.
func EventID(r *kgo.Record) string {
	if id, ok := event.ID(r); ok && id != "" {
		return id
	}
	return r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "@" + strconv.FormatInt(r.Offset, 10)
}

// Seen reports whether consumer has handled eventID.
func (ib *Inbox) Seen(ctx context.Context, db *sql.DB, consumer, eventID string) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE consumer = %s AND event_id = %s`, ib.cfg.Table, ib.ph(1), ib.ph(2)),
		consumer, eventID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("inbox: %w", err)
	}
	return n > 0, nil
}

// Prune forgets the events recorded more than window ago, for every
// consumer, and returns how many. Keep window longer than any redelivery.
func (ib *Inbox) Prune(ctx context.Context, db *sql.DB, window time.Duration) (int64, error) {
	res, err := db.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE seen_ms < %s`, ib.cfg.Table, ib.ph(1)), time.Now().Add(-window).UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("inbox: prune: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
