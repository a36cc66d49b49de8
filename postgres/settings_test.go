package postgres_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestOddDatabaseDefaults: a database whose DBA set text formats and
// string rules unlike the server's defaults (a time zone 13¾ hours off
// UTC, DateStyle SQL with the day first, IntervalStyle sql_standard,
// bytea_output escape, standard_conforming_strings off, where a backslash
// in a string literal escapes) is opened, stored into, drained and read
// back exactly: times are read as the instants written, bodies byte for
// byte, headers as sent. Before, Open failed there: its check for a
// pooler used pgx's simple protocol, which pgx refuses while
// standard_conforming_strings is off.
func TestOddDatabaseDefaults(t *testing.T) {
	name, dbURL := pgtest.Database(t)
	for _, set := range []string{
		"timezone = 'Pacific/Chatham'", "datestyle = 'SQL, DMY'", "intervalstyle = 'sql_standard'",
		"bytea_output = 'escape'", "standard_conforming_strings = off",
	} {
		pgtest.AdminExec(t, "ALTER DATABASE "+name+" SET "+set)
	}
	s := open(t, dbURL)
	ctx := context.Background()
	body := []byte("{\"a\":\"\\\\x00 \\u00e9\"}\x00\xff\\")
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC) // day and month told apart
	d := storetest.Delivery("s", "1")
	d.Payload, d.ReceivedAt = body, at
	d.Header = map[string][]string{"X-Odd": {`a\b 'c'`}}
	rs, err := s.Ingest(ctx, []hookbox.Delivery{d})
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Event(ctx, rs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.Payload, body) || !e.CreatedAt.Equal(at) || e.Header.Get("X-Odd") != `a\b 'c'` {
		t.Errorf("read back payload %q created %v header %q; stored %q, %v, %q", e.Payload, e.CreatedAt, e.Header.Get("X-Odd"), body, at, `a\b 'c'`)
	}
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "o", Limit: 10, Lease: time.Minute, Sources: []string{"s"}})
	if err != nil || len(evs) != 1 || !bytes.Equal(evs[0].Payload, body) {
		t.Fatalf("claim: %v %v", evs, err)
	}
	started := time.Now().UTC().Truncate(time.Microsecond)
	finished := started.Add(1500 * time.Millisecond)
	if _, err := s.Finish(ctx, []hookbox.Outcome{{ID: e.ID, Owner: "o", Attempt: evs[0].Attempts, Status: hookbox.StatusPending,
		Error: `failed: \x`, RetryAt: finished.Add(time.Hour), StartedAt: started, FinishedAt: finished}}); err != nil {
		t.Fatal(err)
	}
	as, err := s.Attempts(ctx, e.ID)
	if err != nil || len(as) == 0 {
		t.Fatalf("attempts: %v %v", as, err)
	}
	last := as[len(as)-1]
	if !last.StartedAt.Equal(started) || !last.FinishedAt.Equal(finished) || last.Error != `failed: \x` {
		t.Errorf("attempt read back started %v finished %v error %q; wrote %v, %v, %q", last.StartedAt, last.FinishedAt, last.Error, started, finished, `failed: \x`)
	}
	list, err := s.Events(ctx, hookbox.Filter{Source: "s", Since: at.Add(-time.Second), Limit: 10})
	if err != nil || len(list) != 1 {
		t.Errorf("events since a second before: %d, %v; want 1", len(list), err)
	}
}
