package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestLateCancelMissesTheNextStatement: a statement interrupted by its
// context sends the server a cancel request, which the server may act on
// after the statement has ended. The connection is not lent again, so the
// request cannot cancel another caller's statement. Before, the pool lent
// the connection to the next caller, whose statement failed with
// "canceling statement due to user request" (57014): one CI run saw a
// worker's finish fail so.
func TestLateCancelMissesTheNextStatement(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	const late = 500 * time.Millisecond
	u.Host = pgtest.LateCanceller(t, u.Host, late)
	s := open(t, u.String())
	ctx := context.Background()

	c, err := s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Conn().PgConn().PID()
	// The caller gives up 50 ms in; the statement ends on its own at
	// 300 ms, before its cancel request reaches the server (at 550 ms).
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	c.Exec(sctx, `SELECT pg_sleep(0.3)`)
	cancel()
	c.Release()

	// The next caller's statement runs across the moment the request
	// arrives.
	c, err = s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := c.Exec(ctx, `SELECT pg_sleep($1::float8)`, (2 * late).Seconds()); err != nil {
		t.Fatalf("the next statement, on backend %d after %d was interrupted: %v", c.Conn().PgConn().PID(), pid, err)
	}
	if got := c.Conn().PgConn().PID(); got == pid {
		t.Errorf("the next caller was lent the interrupted connection (backend %d)", pid)
	}
}
