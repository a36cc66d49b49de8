// Package rowscan reads result rows the same way for both stores: what
// database/sql's and pgx's rows have in common is enough for it.
package rowscan

import (
	"fmt"
	"net/http"

	"github.com/hookbox/hookbox"
)

// Rows is what *sql.Rows and pgx.Rows have in common, less Close (whose
// signatures differ): the caller closes.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// IDs reads a result of one bigint column.
func IDs(rows Rows) ([]int64, error) {
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Header decodes the stored headers of event id; empty or JSON null is an
// empty header.
func Header(id int64, b []byte) (http.Header, error) {
	if len(b) == 0 || string(b) == "null" {
		// No header was given (SQLite kept that as null before it kept
		// {}): read as an empty header on both stores.
		return http.Header{}, nil
	}
	h, err := hookbox.DecodeHeader(b)
	if err != nil {
		return nil, fmt.Errorf("decode headers of event %d: %w", id, err)
	}
	return h, nil
}

// Scanner is a row: *sql.Row, *sql.Rows, pgx.Row and pgx.Rows are.
type Scanner interface{ Scan(dest ...any) error }

// WithCleared scans one more column after the caller's: whether the
// payload is NULL (cleared by retention; an empty body is zero bytes).
type WithCleared struct {
	Row     Scanner
	Cleared *bool
}

// Scan scans the caller's columns and then the flag.
func (r WithCleared) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.Cleared)...) }
