package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/berthmq/berth/pkg/event"
	"github.com/berthmq/berth/pkg/inbox"
	"github.com/berthmq/berth/pkg/outbox"
)

// A consumer writes one row per order however often the order's event is
// delivered.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "inbox-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?"+outbox.SQLiteOptions)
	defer db.Close()
	ib, _ := inbox.New(inbox.Config{Dialect: outbox.SQLite})
	_ = ib.Migrate(ctx, db)
	_, _ = db.Exec(`CREATE TABLE emails (order_id TEXT)`)

	rec := event.New("orders", []byte("order:HC-2048"), []byte("HC-2048"))
	for range 3 { // delivered three times
		ran, err := ib.Process(ctx, db, "email-notifier", rec, func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO emails VALUES (?)`, string(rec.Value))
			return err
		})
		fmt.Println("handled:", ran, err)
		// Commit the record's offset here, after the transaction.
	}
	var n int
	_ = db.QueryRow(`SELECT count(*) FROM emails`).Scan(&n)
	fmt.Println("emails:", n)
	// Output:
	// handled: true <nil>
	// handled: false <nil>
	// handled: false <nil>
	// emails: 1
}
