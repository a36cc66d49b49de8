package postgres_test

import (
	"context"
	"testing"

	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestNotifySkipsOnlyItsOwnFlush: the NOTIFY that wakes other processes
// commits without waiting for its WAL flush, and that setting ends with
// its own transaction: the pooled connection it ran on still commits
// synchronously, so an ingest that takes it next is flushed before it is
// acknowledged.
func TestNotifySkipsOnlyItsOwnFlush(t *testing.T) {
	s := open(t, pgtest.URL(t))
	ctx := context.Background()
	c, err := s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	show := func() string {
		var v string
		if err := c.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := show(); v != "on" {
		t.Fatalf("a store connection commits with synchronous_commit %q, want on", v)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, postgres.NotifySQL); err != nil {
		t.Fatal(err)
	}
	var inTx string
	if err := tx.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&inTx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if inTx != "off" {
		t.Fatalf("the notify's transaction commits with synchronous_commit %q, want off", inTx)
	}
	if _, err := c.Exec(ctx, postgres.NotifySQL); err != nil {
		t.Fatal(err)
	}
	if v := show(); v != "on" {
		t.Fatalf("after a notify, the connection commits with synchronous_commit %q, want on (the notify's setting leaked)", v)
	}
}
