package outbox

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/berthmq/berth/pkg/event"
)

func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?"+SQLiteOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Rows added in a transaction exist only if it commits; each carries its
// event id, its key's shard and the headers given, in order.
func TestAddInTransaction(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t)
	ob, err := New(Config{Dialect: SQLite, Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // Migrate is idempotent
		if err := ob.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	tx, _ := db.BeginTx(ctx, nil)
	if _, err := ob.Add(ctx, tx, Message{Topic: "orders", Key: []byte("order:1"), Value: []byte("rolled back")}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()

	tx, _ = db.BeginTx(ctx, nil)
	ids, err := ob.Add(ctx, tx,
		Message{Topic: "orders", Key: []byte("order:HC-2048"), Value: []byte("placed"), EventID: "evt-1",
			Headers: []kgo.RecordHeader{{Key: event.HeaderContentType, Value: []byte(event.JSON)}}},
		Message{Topic: "orders", Key: []byte("order:HC-2048"), Value: []byte("paid")},
		Message{Topic: "audit", Value: []byte("no key")},
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if ids[0] != "evt-1" || len(ids[1]) != 36 || ids[1] == ids[2] {
		t.Fatalf("event ids %q", ids)
	}
	if _, err := ob.Add(ctx, db, Message{Value: []byte("x")}); err == nil {
		t.Fatal("a message without a topic was added")
	}
	rows, err := db.Query(`SELECT id, shard, topic, msg_key, msg_value, headers FROM berth_outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id int64
		var shard int
		var topic string
		var key, value, hs []byte
		if err := rows.Scan(&id, &shard, &topic, &key, &value, &hs); err != nil {
			t.Fatal(err)
		}
		h, err := decodeHeaders(hs)
		if err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Headers: h}
		eid, _ := event.ID(r)
		if want := ob.shardOf(key); shard != want {
			t.Errorf("row %d in shard %d, want %d", id, shard, want)
		}
		if key == nil && shard != 0 {
			t.Errorf("a keyless row in shard %d", shard)
		}
		got = append(got, string(value)+"/"+eid)
		if string(value) == "placed" {
			if ct, _ := event.ContentType(r); ct != event.JSON {
				t.Errorf("content-type header lost: %v", h)
			}
		}
	}
	want := []string{"placed/evt-1", "paid/" + ids[1], "no key/" + ids[2]}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("rows %q, want %q", got, want)
	}
}

func TestConfigChecked(t *testing.T) {
	for _, c := range []Config{{Table: "Orders"}, {Table: "x; DROP TABLE y"}, {Shards: 5000}, {Dialect: 7}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	ob, err := New(Config{})
	if err != nil || ob.Config().Table != "berth_outbox" || ob.Config().Shards != 16 {
		t.Fatalf("defaults: %+v %v", ob.Config(), err)
	}
}
