package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/berthmq/berth/pkg/inbox"
	"github.com/berthmq/berth/pkg/outbox"
)

// store is HarborCart's database: SQLite (a file) by default, PostgreSQL
// with --postgres.
type store struct {
	db      *sql.DB
	dialect outbox.Dialect
	ob      *outbox.Outbox
	ib      *inbox.Inbox
}

func openStore(path, postgres string) (*store, error) {
	s := &store{}
	var err error
	if postgres != "" {
		s.dialect = outbox.Postgres
		s.db, err = sql.Open("pgx", postgres)
	} else {
		s.dialect = outbox.SQLite
		s.db, err = sql.Open("sqlite", "file:"+path+"?"+outbox.SQLiteOptions)
	}
	if err != nil {
		return nil, err
	}
	if err := s.db.Ping(); err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if s.ob, err = outbox.New(outbox.Config{Dialect: s.dialect}); err != nil {
		return nil, err
	}
	if s.ib, err = inbox.New(inbox.Config{Dialect: s.dialect}); err != nil {
		return nil, err
	}
	return s, nil
}

// q rewrites ? placeholders as $n for PostgreSQL.
func (s *store) q(query string) string {
	if s.dialect != outbox.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// migrate creates the business tables, the outbox and the inbox.
func (s *store) migrate(ctx context.Context) error {
	for _, stmt := range []string{
		`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL, total_cents BIGINT NOT NULL, created_ms BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS emails (order_id TEXT NOT NULL, sent_ms BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS revenue (day TEXT NOT NULL, order_id TEXT NOT NULL, cents BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS fraud_flags (order_id TEXT NOT NULL, reason TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS shipments (order_id TEXT NOT NULL, worker TEXT NOT NULL, shipped_ms BIGINT NOT NULL)`,
	} {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
	}
	if err := s.ob.Migrate(ctx, s.db); err != nil {
		return err
	}
	return s.ib.Migrate(ctx, s.db)
}
