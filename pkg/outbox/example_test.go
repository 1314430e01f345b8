package outbox_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/pkg/outbox"
)

// An order service adds its event in the order's transaction; a relay
// publishes it. (Not run: it needs a broker on 127.0.0.1:9092.)
func Example() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:orders.db?"+outbox.SQLiteOptions)
	if err != nil {
		log.Fatal(err)
	}
	ob, _ := outbox.New(outbox.Config{Dialect: outbox.SQLite})
	if err := ob.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}

	tx, _ := db.BeginTx(ctx, nil)
	_, _ = tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES (?, ?)`, "HC-2048", 59.90)
	_, _ = ob.Add(ctx, tx, outbox.Message{Topic: "orders", Key: []byte("order:HC-2048"), Value: []byte(`{"id":"HC-2048","total":59.90}`)})
	if err := tx.Commit(); err != nil { // the order and its event, or neither
		log.Fatal(err)
	}

	relay, err := ob.NewRelay(db, outbox.RelayOptions{Producer: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")}})
	if err != nil {
		log.Fatal(err)
	}
	defer relay.Close()
	_ = relay.Run(ctx) // until ctx is done
}
