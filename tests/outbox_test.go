package tests

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
	"github.com/berthmq/berth/internal/testpg"
	"github.com/berthmq/berth/pkg/event"
	"github.com/berthmq/berth/pkg/inbox"
	"github.com/berthmq/berth/pkg/outbox"
)

// outboxDB is a database the outbox tests run on.
type outboxDB struct {
	name    string
	dialect outbox.Dialect
	open    func(t testing.TB) *sql.DB
}

var outboxDBs = []outboxDB{
	{"sqlite", outbox.SQLite, func(t testing.TB) *sql.DB {
		return openDB(t, "sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?"+outbox.SQLiteOptions)
	}},
	{"postgres", outbox.Postgres, func(t testing.TB) *sql.DB {
		return openDB(t, "pgx", testpg.Start(t).DSN)
	}},
}

func openDB(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	return db
}

// orderEvent is what the writers put in the outbox: the key's sequence.
func orderEvent(key string, seq int) outbox.Message {
	return outbox.Message{Topic: "orders", Key: []byte(key), Value: []byte(key + "#" + strconv.Itoa(seq))}
}

// The outbox end to end on each database: writers add events in their
// transactions (one rolled back), two relays publish them, every event
// arrives, in order per key, and an inbox turns the deliveries (twice
// over) into one effect each.
func TestOutboxRelay(t *testing.T) {
	for _, d := range outboxDBs {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			n := tc.Start(t)
			ctx := ctxT(t, 120*time.Second)
			if _, err := tc.Admin(t, n.Addr()).CreateTopic(ctx, 4, 1, nil, "orders"); err != nil {
				t.Fatal(err)
			}
			ob, err := outbox.New(outbox.Config{Dialect: d.dialect, Shards: 8})
			if err != nil {
				t.Fatal(err)
			}
			if err := ob.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, seq INTEGER NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			// Two relays, started before the writers: they publish while
			// rows come in.
			rctx, stop := context.WithCancel(ctx)
			var relays []*outbox.Relay
			var wg sync.WaitGroup
			for i := range 2 {
				r, err := ob.NewRelay(db, outbox.RelayOptions{ID: fmt.Sprintf("relay-%d", i), Idle: 10 * time.Millisecond,
					ShardsPerRound: 3, BatchSize: 100, Producer: []kgo.Opt{kgo.SeedBrokers(n.Addr())}})
				if err != nil {
					t.Fatal(err)
				}
				relays = append(relays, r)
				wg.Add(1)
				go func() { defer wg.Done(); r.Run(rctx) }()
			}
			defer func() {
				stop()
				wg.Wait()
				for _, r := range relays {
					r.Close()
				}
			}()

			// Four writers, each owning five keys (so a key's transactions
			// are serialized, as an order service's are by its order row),
			// 30 events per key: 600 events.
			const writers, keysEach, perKey = 4, 5, 30
			errs := make(chan error, writers)
			for w := range writers {
				go func() {
					errs <- func() error {
						for seq := range perKey {
							for k := range keysEach {
								key := fmt.Sprintf("order:%d-%d", w, k)
								tx, err := db.BeginTx(ctx, nil)
								if err != nil {
									return err
								}
								if _, err := tx.ExecContext(ctx, upsertOrder(d.dialect), key, seq); err != nil {
									tx.Rollback()
									return err
								}
								if _, err := ob.Add(ctx, tx, orderEvent(key, seq)); err != nil {
									tx.Rollback()
									return err
								}
								if err := tx.Commit(); err != nil {
									return err
								}
							}
						}
						// A rolled-back transaction's event never exists.
						tx, err := db.BeginTx(ctx, nil)
						if err != nil {
							return err
						}
						if _, err := ob.Add(ctx, tx, outbox.Message{Topic: "orders", Key: []byte("ghost"), Value: []byte("ghost#0")}); err != nil {
							return err
						}
						return tx.Rollback()
					}()
				}()
			}
			for range writers {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			const total = writers * keysEach * perKey
			poll.Until(t, 60*time.Second, func() error {
				st, err := relays[0].Stats(ctx)
				if err != nil {
					return err
				}
				if st.Unsent != 0 {
					return fmt.Errorf("%d rows unsent, the oldest %v old", st.Unsent, st.OldestUnsent)
				}
				return nil
			})
			// A relay counts its rows after its transaction commits: the
			// last round's may show in the table before in its count.
			poll.Until(t, 10*time.Second, func() error {
				published := int64(0)
				for _, r := range relays {
					st, err := r.Stats(ctx)
					if err != nil {
						return err
					}
					published += st.Published
				}
				if published != total {
					return fmt.Errorf("relays marked %d rows sent, want %d", published, total)
				}
				return nil
			})
			recs := consumeN(t, n.Addr(), "orders", total)
			checkOrderEvents(t, recs, writers*keysEach, perKey)
			// Sent rows go once older than the window; unsent ones never.
			if pruned, err := relays[0].Prune(ctx, time.Hour); err != nil || pruned != 0 {
				t.Fatalf("Prune(1h) right after sending: %d, %v", pruned, err)
			}
			if pruned, err := relays[0].Prune(ctx, -time.Second); err != nil || pruned != total {
				t.Fatalf("Prune of every sent row: %d, %v; want %d", pruned, err, total)
			}

			// The inbox: every record delivered twice, one email each.
			ib, err := inbox.New(inbox.Config{Dialect: d.dialect})
			if err != nil {
				t.Fatal(err)
			}
			if err := ib.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `CREATE TABLE emails (body TEXT NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			insert := `INSERT INTO emails (body) VALUES (?)`
			if d.dialect == outbox.Postgres {
				insert = `INSERT INTO emails (body) VALUES ($1)`
			}
			ran := 0
			for range 2 {
				for _, r := range recs {
					did, err := ib.Process(ctx, db, "email-notifier", r, func(tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, insert, string(r.Value))
						return err
					})
					if err != nil {
						t.Fatal(err)
					}
					if did {
						ran++
					}
				}
			}
			var emails int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM emails`).Scan(&emails); err != nil {
				t.Fatal(err)
			}
			if emails != total || ran != total {
				t.Fatalf("%d emails (%d effects run) for %d events delivered twice, want %d", emails, ran, total, total)
			}
		})
	}
}

func upsertOrder(d outbox.Dialect) string {
	if d == outbox.Postgres {
		return `INSERT INTO orders (id, seq) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET seq = excluded.seq`
	}
	return `INSERT INTO orders (id, seq) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET seq = excluded.seq`
}

// checkOrderEvents checks recs hold every key's events 0..perKey-1, each
// with one event id, the first copies in order per key, and no ghost.
func checkOrderEvents(t *testing.T, recs []*kgo.Record, keys, perKey int) {
	t.Helper()
	next := map[string]int{}
	ids := map[string]string{} // event id -> value
	dups := 0
	for _, r := range recs {
		id, ok := event.ID(r)
		if !ok {
			t.Fatalf("record %s without an event id", r.Value)
		}
		if v, seen := ids[id]; seen {
			if v != string(r.Value) {
				t.Fatalf("event id %s on %s and %s", id, v, r.Value)
			}
			dups++
			continue
		}
		ids[id] = string(r.Value)
		key, seqS, _ := strings.Cut(string(r.Value), "#")
		if key == "ghost" {
			t.Fatal("the event of a rolled-back transaction was published")
		}
		seq, _ := strconv.Atoi(seqS)
		if string(r.Key) != key || seq != next[key] {
			t.Fatalf("key %s: event %d arrived when %d was next (key order broken)", r.Key, seq, next[key])
		}
		next[key]++
	}
	if len(next) != keys {
		t.Fatalf("%d keys arrived, want %d", len(next), keys)
	}
	for k, n := range next {
		if n != perKey {
			t.Fatalf("key %s: %d events, want %d", k, n, perKey)
		}
	}
	t.Logf("%d records, %d distinct events, %d duplicates", len(recs), len(ids), dups)
}

// A relay whose database fails between publishing and marking rows sent
// (a trigger refuses the marks, as a crashed relay never makes them)
// leaves them unsent: they are published again, duplicates by design, and
// none is lost; the inbox makes one effect of each.
func TestOutboxRelayMarkFails(t *testing.T) {
	for _, d := range outboxDBs {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			n := tc.Start(t)
			ctx := ctxT(t, 60*time.Second)
			if _, err := tc.Admin(t, n.Addr()).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
				t.Fatal(err)
			}
			ob, err := outbox.New(outbox.Config{Dialect: d.dialect, Shards: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := ob.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			var faults []string
			switch d.dialect {
			case outbox.Postgres:
				faults = []string{
					`CREATE TABLE fault (on_ BOOLEAN NOT NULL)`,
					`INSERT INTO fault VALUES (true)`,
					`CREATE FUNCTION refuse_marks() RETURNS trigger AS $$
BEGIN
	IF (SELECT on_ FROM fault) THEN RAISE EXCEPTION 'injected: the database failed before the rows were marked'; END IF;
	RETURN NEW;
END $$ LANGUAGE plpgsql`,
					`CREATE TRIGGER refuse_marks BEFORE UPDATE ON berth_outbox FOR EACH ROW EXECUTE FUNCTION refuse_marks()`,
				}
			default:
				faults = []string{
					`CREATE TABLE fault (on_ INTEGER NOT NULL)`,
					`INSERT INTO fault VALUES (1)`,
					`CREATE TRIGGER refuse_marks BEFORE UPDATE ON berth_outbox WHEN (SELECT on_ FROM fault) = 1
BEGIN SELECT RAISE(ABORT, 'injected: the database failed before the rows were marked'); END`,
				}
			}
			for _, q := range faults {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			tx, _ := db.BeginTx(ctx, nil)
			for seq := range 20 {
				if _, err := ob.Add(ctx, tx, orderEvent("order:HC-2048", seq)); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r, err := ob.NewRelay(db, outbox.RelayOptions{BatchSize: 10, Producer: []kgo.Opt{kgo.SeedBrokers(n.Addr())}})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got, err := r.RelayOnce(ctx); err == nil || got != 0 || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("round with the marks refused: %d, %v", got, err)
			}
			if st, _ := r.Stats(ctx); st.Unsent != 20 {
				t.Fatalf("%d unsent after the failed round, want 20", st.Unsent)
			}
			off := `UPDATE fault SET on_ = 0`
			if d.dialect == outbox.Postgres {
				off = `UPDATE fault SET on_ = false`
			}
			if _, err := db.ExecContext(ctx, off); err != nil {
				t.Fatal(err)
			}
			sent := 0
			for sent < 20 {
				got, err := r.RelayOnce(ctx)
				if err != nil {
					t.Fatal(err)
				}
				sent += got
			}
			recs := consumeN(t, n.Addr(), "orders", 30) // 10 twice, 10 once
			checkOrderEvents(t, recs, 1, 20)
			if len(recs) != 30 {
				t.Fatalf("%d records, want 30 (the first round's 10 again)", len(recs))
			}
		})
	}
}
