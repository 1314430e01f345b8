package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/pkg/event"
)

// Config names an outbox's tables and how its rows are spread.
type Config struct {
	Dialect Dialect
	// Table is the outbox table (default berth_outbox); its shards live
	// in <Table>_shards. Lower-case letters, digits and underscores.
	Table string
	// Shards is how many groups the rows are spread over by a hash of
	// their key (default 16): the most relays that can publish at once.
	// Fixed once rows exist: a key's shard must not move while it has
	// unsent rows.
	Shards int
}

// Outbox adds events to an outbox in the caller's transactions and
// relays them (NewRelay).
type Outbox struct {
	cfg Config
}

// New returns the outbox cfg describes.
func New(cfg Config) (*Outbox, error) {
	if cfg.Table == "" {
		cfg.Table = "berth_outbox"
	}
	if cfg.Shards == 0 {
		cfg.Shards = 16
	}
	if !ValidTableName(cfg.Table) {
		return nil, fmt.Errorf("outbox: table name %q: use lower-case letters, digits and underscores", cfg.Table)
	}
	if cfg.Shards < 1 || cfg.Shards > 4096 {
		return nil, fmt.Errorf("outbox: %d shards: use 1 to 4096", cfg.Shards)
	}
	if cfg.Dialect != SQLite && cfg.Dialect != Postgres {
		return nil, fmt.Errorf("outbox: unknown dialect %v", cfg.Dialect)
	}
	return &Outbox{cfg: cfg}, nil
}

// Config returns the outbox's configuration, defaults filled.
func (o *Outbox) Config() Config { return o.cfg }

// Migrate creates the outbox's tables and indexes if they do not exist,
// and its shard rows.
func (o *Outbox) Migrate(ctx context.Context, db *sql.DB) error {
	for _, stmt := range o.cfg.Dialect.schema(o.cfg.Table) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("outbox: migrate: %w", err)
		}
	}
	insert := fmt.Sprintf(`INSERT INTO %s_shards (shard) VALUES (%s) ON CONFLICT (shard) DO NOTHING`, o.cfg.Table, o.cfg.Dialect.Placeholder(1))
	for s := range o.cfg.Shards {
		if _, err := db.ExecContext(ctx, insert, s); err != nil {
			return fmt.Errorf("outbox: migrate: shard %d: %w", s, err)
		}
	}
	return nil
}

// Message is one event to publish.
type Message struct {
	Topic   string
	Key     []byte // the record key: the partition and the order of its events
	Value   []byte
	Headers []kgo.RecordHeader
	// EventID is the event's id (the event-id header); empty: the header
	// already in Headers, or a new UUIDv7.
	EventID string
}

// Execer is what Add writes through: a *sql.Tx (the point: the business
// change's transaction), or a *sql.Conn or *sql.DB.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Add inserts msgs into the outbox through tx, in order, and returns
// their event ids. The events are published once tx commits; if it rolls
// back they never existed.
func (o *Outbox) Add(ctx context.Context, tx Execer, msgs ...Message) ([]string, error) {
	ids := make([]string, len(msgs))
	now := time.Now().UnixMilli()
	q := fmt.Sprintf(`INSERT INTO %s (shard, topic, msg_key, msg_value, headers, created_ms) VALUES (%s)`,
		o.cfg.Table, o.cfg.Dialect.list(1, 6))
	for i, m := range msgs {
		if m.Topic == "" {
			return nil, errors.New("outbox: a message without a topic")
		}
		r := &kgo.Record{Headers: m.Headers}
		if m.EventID != "" {
			event.Stamp(r, event.WithID(m.EventID))
		} else {
			event.Stamp(r)
		}
		ids[i], _ = event.ID(r)
		h, err := encodeHeaders(r.Headers)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, q, o.shardOf(m.Key), m.Topic, nullable(m.Key), nullable(m.Value), h, now); err != nil {
			return nil, fmt.Errorf("outbox: add: %w", err)
		}
	}
	return ids, nil
}

// shardOf is the shard of a key: FNV-1a of the key, modulo the shards;
// records without a key go to shard 0.
func (o *Outbox) shardOf(key []byte) int {
	if len(key) == 0 {
		return 0
	}
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % uint32(o.cfg.Shards))
}

func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// storedHeader is a header in the headers column (JSON, the value as
// base64), readable with the database's own tools.
type storedHeader struct {
	Key   string `json:"k"`
	Value []byte `json:"v"`
}

func encodeHeaders(hs []kgo.RecordHeader) ([]byte, error) {
	s := make([]storedHeader, len(hs))
	for i, h := range hs {
		s[i] = storedHeader{h.Key, h.Value}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("outbox: headers: %w", err)
	}
	return b, nil
}

func decodeHeaders(b []byte) ([]kgo.RecordHeader, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var s []storedHeader
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("outbox: headers: %w", err)
	}
	hs := make([]kgo.RecordHeader, len(s))
	for i, h := range s {
		hs[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return hs, nil
}
