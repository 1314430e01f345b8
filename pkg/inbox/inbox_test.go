package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/berthmq/berth/pkg/event"
	"github.com/berthmq/berth/pkg/inbox"
	"github.com/berthmq/berth/pkg/outbox"
)

func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?"+outbox.SQLiteOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A redelivered event changes nothing; a failed effect records nothing,
// so the next delivery runs it; consumers are independent; pruning
// forgets old ids.
func TestProcessOnce(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t)
	ib, err := inbox.New(inbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	if err := ib.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE emails (order_id TEXT)`); err != nil {
		t.Fatal(err)
	}
	rec := event.New("orders", []byte("order:HC-2048"), []byte("HC-2048"))
	send := func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO emails VALUES (?)`, "HC-2048")
		return err
	}
	boom := errors.New("smtp down")
	if ran, err := ib.Process(ctx, db, "email-notifier", rec, func(tx *sql.Tx) error { send(tx); return boom }); ran || !errors.Is(err, boom) {
		t.Fatalf("failing effect: ran=%v err=%v", ran, err)
	}
	for i, want := range []bool{true, false, false} {
		ran, err := ib.Process(ctx, db, "email-notifier", rec, send)
		if err != nil || ran != want {
			t.Fatalf("delivery %d: ran=%v err=%v, want ran=%v", i, ran, err, want)
		}
	}
	if ran, err := ib.Process(ctx, db, "sales-analytics", rec, func(*sql.Tx) error { return nil }); !ran || err != nil {
		t.Fatalf("another consumer: ran=%v err=%v", ran, err)
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM emails`).Scan(&n)
	if n != 1 {
		t.Fatalf("%d email rows, want 1", n)
	}
	id, _ := event.ID(rec)
	if seen, err := ib.Seen(ctx, db, "email-notifier", id); !seen || err != nil {
		t.Fatalf("Seen: %v %v", seen, err)
	}
	// Without an event id: the record's position.
	bare := &kgo.Record{Topic: "t", Partition: 3, Offset: 42}
	if got := inbox.EventID(bare); got != "t/3@42" {
		t.Fatalf("EventID of a bare record: %q", got)
	}
	if n, err := ib.Prune(ctx, db, -time.Second); err != nil || n != 2 {
		t.Fatalf("Prune: %d %v, want 2 rows", n, err)
	}
	if ran, _ := ib.Process(ctx, db, "email-notifier", rec, send); !ran {
		t.Fatal("after pruning, the id is forgotten")
	}
}
