package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestCommandsGiveUpOnAHeldLock: while another session holds an ACCESS
// EXCLUSIVE lock on hookbox's tables (a migration, VACUUM FULL, a
// forgotten LOCK TABLE), every command that reads or changes the database
// gives up at --db-timeout (or HOOKBOX_DB_TIMEOUT) with a message saying
// that the database did not answer in that time because of a lock, and
// what to do. They waited, silent, until killed; and Ctrl-C then said
// "store unavailable".
func TestCommandsGiveUpOnAHeldLock(t *testing.T) {
	dbURL := pgtest.URL(t)
	mustCLI(t, "migrate", "--db", dbURL)
	pgtest.HoldLock(t, dbURL)

	const ceiling = 60 * time.Second // each gives up after 0.9 s
	check := func(args []string, err error, took time.Duration) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "did not answer within 1s") || !strings.Contains(err.Error(), "lock another session holds") ||
			!strings.Contains(err.Error(), "--db-timeout") {
			t.Errorf("%s under a held lock: %v, want the timeout and the lock named", strings.Join(args, " "), err)
		}
		if took > ceiling {
			t.Errorf("%s took %v", strings.Join(args, " "), took)
		}
	}
	type result struct {
		args []string
		err  error
		took time.Duration
	}
	results := make(chan result, len(dbCommands))
	for _, args := range dbCommands {
		go func() {
			start := time.Now()
			_, _, err := runCLI(t, append(args, "--db", dbURL, "--db-timeout", "1s")...)
			results <- result{args, err, time.Since(start)}
		}()
	}
	timeout := time.After(ceiling)
	for range dbCommands {
		select {
		case r := <-results:
			check(r.args, r.err, r.took)
		case <-timeout:
			t.Fatalf("commands still waiting for the lock after %v", ceiling)
		}
	}

	t.Setenv("HOOKBOX_DB_TIMEOUT", "1s")
	start := time.Now()
	_, _, err := runCLI(t, "events", "list", "--db", dbURL)
	check([]string{"events list (HOOKBOX_DB_TIMEOUT)"}, err, time.Since(start))

	// Interrupted while it waits: the message says so, not "store
	// unavailable".
	t.Setenv("HOOKBOX_DB_TIMEOUT", "")
	app := fmt.Sprint("hbtest_", time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetArgs([]string{"events", "list", "--db", dbURL + "&application_name=" + app})
		done <- root.ExecuteContext(ctx)
	}()
	c, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	await(t, "events list waiting for the lock", func() bool {
		var n int
		err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n)
		return err == nil && n > 0
	})
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "interrupted") || strings.Contains(err.Error(), "unavailable") ||
			!errors.Is(err, context.Canceled) {
			t.Errorf("events list interrupted while waiting for a lock: %v, want it to say it was interrupted", err)
		}
	case <-time.After(ceiling):
		t.Fatal("events list did not stop when interrupted")
	}
}

// TestDBTimeoutFlag: --db-timeout and HOOKBOX_DB_TIMEOUT take a duration,
// 0 for no limit; anything else is refused, naming where it came from.
func TestDBTimeoutFlag(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	mustCLI(t, "migrate", "--db", dbURL)
	mustCLI(t, "events", "list", "--db", dbURL, "--db-timeout", "0")
	mustCLI(t, "events", "list", "--db", dbURL, "--db-timeout", "2m")
	for _, v := range []string{"30", "-1s", "soon"} {
		if _, _, err := runCLI(t, "events", "list", "--db", dbURL, "--db-timeout", v); err == nil || !strings.Contains(err.Error(), "--db-timeout: want a duration") {
			t.Errorf("--db-timeout %s: %v", v, err)
		}
	}
	t.Setenv("HOOKBOX_DB_TIMEOUT", "soon")
	if _, _, err := runCLI(t, "events", "list", "--db", dbURL); err == nil || !strings.Contains(err.Error(), "HOOKBOX_DB_TIMEOUT: want a duration") {
		t.Errorf("HOOKBOX_DB_TIMEOUT=soon: %v", err)
	}
}
