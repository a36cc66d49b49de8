package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Statements are prepared on the writer connection ahead of time: modernc
// SQLite parses and plans a statement on every prepare, which costs about
// as much as running it, and a statement cannot be prepared on the writer
// from inside a transaction that holds it.

// chunkSizes are the row counts with a prepared statement; a batch is cut
// into chunks of these sizes, largest first, so a handful of statements
// serve every batch size.
var chunkSizes = []int{128, 64, 32, 16, 8, 4, 2, 1}

// chunked is one statement prepared for every size in chunkSizes.
type chunked map[int]*sql.Stmt

// prepareChunked prepares build(n) for every chunk size.
func prepareChunked(ctx context.Context, db *sql.DB, build func(n int) string) (chunked, error) {
	c := chunked{}
	for _, n := range chunkSizes {
		st, err := db.PrepareContext(ctx, build(n))
		if err != nil {
			return nil, fmt.Errorf("sqlite: prepare statement for %d rows: %w", n, err)
		}
		c[n] = st
	}
	return c, nil
}

// next returns the largest chunk size that fits n, and its statement bound
// to tx.
func (c chunked) next(ctx context.Context, tx *sql.Tx, n int) (int, *sql.Stmt) {
	size := 1
	for _, s := range chunkSizes {
		if s <= n {
			size = s
			break
		}
	}
	return size, tx.StmtContext(ctx, c[size])
}

// rowsOf repeats a parenthesised row of k placeholders n times.
func rowsOf(n, k int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", k), ",") + ")"
	return strings.TrimSuffix(strings.Repeat(row+",", n), ",")
}

// stmtCache keeps statements whose text is built at run time (claims
// depend on the sources asked for). It is bounded: past maxCached texts,
// statements are prepared per use.
type stmtCache struct {
	mu    sync.Mutex
	db    *sql.DB
	stmts map[string]*sql.Stmt
}

const maxCached = 64

// get returns a prepared statement for q, or nil when the cache is full.
// It must not be called inside a writer transaction.
//
// The lock is not held while preparing, which waits for the writer: a
// transaction holding the writer may call lookup meanwhile.
func (c *stmtCache) get(ctx context.Context, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.stmts[q]
	full := len(c.stmts) >= maxCached
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	if full {
		return nil, nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[q]; ok {
		st.Close() // prepared meanwhile by another caller
		return prev, nil
	}
	if c.stmts == nil {
		c.stmts = map[string]*sql.Stmt{}
	}
	c.stmts[q] = st
	return st, nil
}

// lookup returns the cached statement for q, or nil: it never prepares,
// so it may be called inside a writer transaction.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[q]
}

// query runs q in tx through the cached statement st, or unprepared if
// there is none.
func query(ctx context.Context, tx *sql.Tx, st *sql.Stmt, q string, args ...any) (*sql.Rows, error) {
	if st == nil {
		return tx.QueryContext(ctx, q, args...)
	}
	return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
}

// closeRows closes rows after a loop over rows.Next and returns the error
// that ended the loop, else Close's. Close alone is not enough: when Next
// stops on an error (an interrupted statement, a cancelled context) it
// closes the rows itself, and a later Close then returns nil; only Err
// still has that error. A caller that checked Close alone would take the
// rows it read so far for all of them.
func closeRows(rows *sql.Rows) error {
	return errors.Join(rows.Err(), rows.Close())
}
