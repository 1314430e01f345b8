package outbox

import (
	"fmt"
	"strconv"
	"strings"
)

// SQLiteOptions are the connection settings an outbox on SQLite wants,
// for modernc.org/sqlite's DSN ("file:app.db?" + SQLiteOptions): write
// transactions take the write lock at BEGIN (a read-then-write transaction
// otherwise fails with SQLITE_BUSY when two connections upgrade at once),
// waits for the lock instead of failing, WAL so readers do not block the
// writer, and a full fsync at every commit (an acknowledged order and its
// event survive a power cut).
const SQLiteOptions = "_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"

// Dialect is the SQL database an outbox lives in.
type Dialect int

const (
	// SQLite, through modernc.org/sqlite (driver name "sqlite") or any
	// driver that speaks SQLite's SQL. Relays share shards by leases.
	SQLite Dialect = iota
	// Postgres, through github.com/jackc/pgx/v5/stdlib (driver name
	// "pgx") or lib/pq. Relays share shards with FOR UPDATE SKIP LOCKED.
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// Placeholder returns the i-th (1-based) query parameter's placeholder:
// $i on PostgreSQL, ? on SQLite.
func (d Dialect) Placeholder(i int) string {
	if d == Postgres {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}

// list returns n placeholders from the from-th, comma-separated.
func (d Dialect) list(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.Placeholder(from + i))
	}
	return b.String()
}

// schema returns the statements that create the tables of an outbox
// whose table is t.
func (d Dialect) schema(t string) []string {
	// The dialects differ in the id column and the types' names. On
	// SQLite, AUTOINCREMENT keeps ids from being reused, so they keep the
	// order of insertion even after sent rows are pruned.
	id, bytes, long := "BIGSERIAL PRIMARY KEY", "BYTEA", "BIGINT"
	if d == SQLite {
		id, bytes, long = "INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB", "INTEGER"
	}
	return []string{
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s (
	id %[2]s,
	shard INTEGER NOT NULL,
	topic TEXT NOT NULL,
	msg_key %[3]s,
	msg_value %[3]s,
	headers %[3]s,
	created_ms %[4]s NOT NULL,
	sent_ms %[4]s
)`, t, id, bytes, long),
		fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %[1]s_unsent ON %[1]s (shard, id) WHERE sent_ms IS NULL`, t),
		fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %[1]s_sent ON %[1]s (sent_ms) WHERE sent_ms IS NOT NULL`, t),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s_shards (
	shard INTEGER PRIMARY KEY,
	owner TEXT,
	lease_until_ms %[2]s
)`, t, long),
	}
}

// ValidTableName reports whether t can name an outbox's (or an inbox's)
// table: lower-case letters, digits and underscores, a letter or
// underscore first, at most 48 characters, so it needs no quoting in
// either dialect.
func ValidTableName(t string) bool {
	if t == "" || len(t) > 48 {
		return false
	}
	for i, c := range t {
		switch {
		case c == '_', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
