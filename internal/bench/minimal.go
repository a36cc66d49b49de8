package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/hookbox/hookbox/groupcommit"
	"github.com/hookbox/hookbox/verify"
)

// The minimal receiver is the yardstick hookbox's ingest is measured
// against: the least a receiver with hookbox's promise must do. It reads
// the body (up to 1 MiB), checks the signature with the same verifier
// hookbox uses, commits one narrow row under UNIQUE (source, delivery_id)
// with concurrent deliveries sharing a transaction (SQLite synchronous
// FULL, or a PostgreSQL commit), and answers 202 only after the commit.
// It keeps no headers, no event type, no queue state, logs nothing and
// serves one source: an upper bound for hookbox on the same machine.

// minimalRow is one verified delivery waiting for its commit.
type minimalRow struct {
	id   string
	body []byte
}

// minimalStore commits batches of rows.
type minimalStore interface {
	insert(ctx context.Context, rows []minimalRow) error
	close()
}

// newMinimal returns the handler of the minimal receiver on the store, and
// a function that stops it.
func newMinimal(v verify.Verifier, st minimalStore) (http.Handler, func()) {
	c := groupcommit.New(func(ctx context.Context, rows []minimalRow) ([]struct{}, error) {
		if err := st.insert(ctx, rows); err != nil {
			return nil, err
		}
		return make([]struct{}, len(rows)), nil
	}, groupcommit.Options{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		res, err := v.Verify(verify.Request{Header: r.Header, Body: body})
		if err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if _, err := c.Submit(r.Context(), minimalRow{id: res.DeliveryID, body: body}); err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"duplicate":false}` + "\n"))
	})
	return h, func() { c.Close(); st.close() }
}

// minimalSQLite is the minimal receiver's SQLite store: WAL, synchronous
// FULL, one writer connection, one multi-row INSERT OR IGNORE per batch.
type minimalSQLite struct{ db *sql.DB }

func openMinimalSQLite(ctx context.Context, path string) (*minimalSQLite, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	_, err = db.ExecContext(ctx, `CREATE TABLE received (
        id INTEGER PRIMARY KEY, source TEXT NOT NULL, delivery_id TEXT NOT NULL, payload BLOB NOT NULL,
        received_at INTEGER NOT NULL, UNIQUE (source, delivery_id))`)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &minimalSQLite{db: db}, nil
}

func (m *minimalSQLite) insert(ctx context.Context, rows []minimalRow) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := time.Now().UnixMilli()
	for len(rows) > 0 {
		n := min(len(rows), 256) // 4 parameters a row, under SQLite's limit
		q := `INSERT OR IGNORE INTO received (source, delivery_id, payload, received_at) VALUES ` +
			strings.TrimSuffix(strings.Repeat("('bench', ?, ?, ?),", n), ",")
		args := make([]any, 0, 3*n)
		for _, r := range rows[:n] {
			args = append(args, r.id, r.body, now)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return tx.Commit()
}

func (m *minimalSQLite) close() { m.db.Close() }

// minimalPostgres is the minimal receiver's PostgreSQL store: one unnest
// INSERT … ON CONFLICT DO NOTHING per batch, committed synchronously.
type minimalPostgres struct{ pool *pgxpool.Pool }

func openMinimalPostgres(ctx context.Context, url string) (*minimalPostgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on" // a 202 after a durable commit, as hookbox
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	_, err = pool.Exec(ctx, `CREATE TABLE received (
        id bigserial PRIMARY KEY, source text NOT NULL, delivery_id text NOT NULL, payload bytea NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now(), UNIQUE (source, delivery_id))`)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &minimalPostgres{pool: pool}, nil
}

func (m *minimalPostgres) insert(ctx context.Context, rows []minimalRow) error {
	ids := make([]string, len(rows))
	bodies := make([][]byte, len(rows))
	for i, r := range rows {
		ids[i], bodies[i] = r.id, r.body
	}
	_, err := m.pool.Exec(ctx, `INSERT INTO received (source, delivery_id, payload)
        SELECT 'bench', i, b FROM unnest($1::text[], $2::bytea[]) AS t(i, b) ON CONFLICT DO NOTHING`, ids, bodies)
	return err
}

func (m *minimalPostgres) close() { m.pool.Close() }

// openMinimalStore opens the store of target minimal-sqlite (at path) or
// minimal-postgres (at url).
func openMinimalStore(ctx context.Context, name, path, url string) (minimalStore, error) {
	switch name {
	case "minimal-sqlite":
		return openMinimalSQLite(ctx, path)
	case "minimal-postgres":
		return openMinimalPostgres(ctx, url)
	}
	return nil, fmt.Errorf("not a minimal target: %s", name)
}
