package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// AcquireConn lends a test one of the store's own connections, with the
// statements hookbox prepared on it.
func (s *Store) AcquireConn(ctx context.Context) (*pgxpool.Conn, error) {
	return s.pool.Acquire(ctx)
}
