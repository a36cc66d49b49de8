package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/metrics"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// The tests here move the database's clock (pgtest.ClockURL): this
// process is a host whose clock is off the server's, and rows a host whose
// clock is right would stamp are written with the server's own clock.
// A database clock behind is this host ahead, and the other way round.

const day = 24 * time.Hour

// skews are the two hosts of the tests: ahead of the database's clock by
// ahead (negative: behind it).
var skews = []struct {
	name  string
	ahead time.Duration
}{{"host ahead", 31 * day}, {"host behind", -31 * day}}

// sql runs a statement on one of the store's connections.
func sql(t *testing.T, s *postgres.Store, q string, args ...any) {
	t.Helper()
	conn, err := s.AcquireConn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// dbAge reads how long before the database's clock now a time column of
// a row was stamped (negative: after it).
func dbAge(t *testing.T, s *postgres.Store, q string, args ...any) time.Duration {
	t.Helper()
	conn, err := s.AcquireConn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var us int64
	if err := conn.QueryRow(context.Background(), `SELECT (extract(epoch FROM now() - (`+q+`)) * 1000000)::bigint`, args...).Scan(&us); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return time.Duration(us) * time.Microsecond
}

// TestRetentionByDatabaseClock: hosts whose clocks disagree share the
// database, and retention is on (30 days). Done events finished a second
// ago by the hosts whose clocks are right (a second before the database's
// clock) are neither purged nor cleared by a host 31 days ahead: its
// retention tick purged and cleared every one of them as they finished,
// the dedupe memory and the payloads of the whole cluster. Events
// finished 40 days ago by the database's clock go, as they should, also
// when the host running retention is 31 days behind (it kept them).
func TestRetentionByDatabaseClock(t *testing.T) {
	for _, sk := range skews {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, pgtest.ClockURL(t, -sk.ahead))
			ctx := context.Background()
			var fresh, old []hookbox.Delivery
			for i := range 5 {
				fresh = append(fresh, storetest.Delivery("fresh", fmt.Sprint("f", i)))
				old = append(old, storetest.Delivery("old", fmt.Sprint("o", i)))
			}
			freshIDs := storetest.Seed(t, s, hookbox.StatusDone, time.Now(), "", fresh...)
			oldIDs := storetest.Seed(t, s, hookbox.StatusDone, time.Now(), "", old...)
			// As the hosts whose clocks are right finished them.
			sql(t, s, `UPDATE queue SET updated_at = now() - interval '1 second' WHERE id = ANY ($1)`, freshIDs)
			sql(t, s, `UPDATE queue SET updated_at = now() - interval '40 days' WHERE id = ANY ($1)`, oldIDs)

			// What serve's retention tick runs, with retention_days and
			// payload_retention_days 30.
			before, err := hookbox.DaysAgo(time.Now(), 30)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := s.Purge(ctx, hookbox.PurgeParams{Before: before, DryRun: true}); err != nil || res != (hookbox.PurgeResult{Done: 5}) {
				t.Errorf("dry purge: %+v, %v; want the 5 events finished 40 days ago", res, err)
			}
			if n, err := s.ClearPayloads(ctx, before); err != nil || n != 5 {
				t.Errorf("ClearPayloads: %d, %v; want the 5 payloads of the events finished 40 days ago", n, err)
			}
			for _, id := range freshIDs {
				if e, err := s.Event(ctx, id); err != nil || e.PayloadCleared {
					t.Errorf("event %d, finished a second ago: payload cleared %v, %v", id, e.PayloadCleared, err)
				}
			}
			res, err := s.Purge(ctx, hookbox.PurgeParams{Before: before, BatchSize: 2})
			if err != nil || res != (hookbox.PurgeResult{Done: 5}) {
				t.Errorf("purge: %+v, %v; want the 5 events finished 40 days ago", res, err)
			}
			for _, id := range freshIDs {
				if _, err := s.Event(ctx, id); err != nil {
					t.Errorf("event %d, finished a second ago, was purged: %v", id, err)
				}
			}
			for _, id := range oldIDs {
				if _, err := s.Event(ctx, id); err == nil {
					t.Errorf("event %d, finished 40 days ago, outlived the purge", id)
				}
			}
		})
	}
}

// TestFinishedRowsStampedByDatabaseClock: updated_at, which retention
// judges finished rows by, is written on the database's clock whoever
// writes it: a worker's finish (it wrote its host's clock, so a host
// behind made its rows look old to every other host's purge, and a host
// ahead kept its own past the window), and an event finished as it is
// stored (a store_only source's, stamped with the receiving host's
// clock). The attempt's own record keeps the worker's times.
func TestFinishedRowsStampedByDatabaseClock(t *testing.T) {
	for _, sk := range skews {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, pgtest.ClockURL(t, -sk.ahead))
			ctx := context.Background()
			finished := time.Now().Add(-time.Minute) // a minute ago, by this host's clock
			done := storetest.Seed(t, s, hookbox.StatusDone, finished, "", storetest.Delivery("d", "1"))[0]
			dead := storetest.Seed(t, s, hookbox.StatusDead, finished, "failed", storetest.Delivery("x", "1"))[0]
			stored := storetest.Delivery("so", "1")
			stored.FanOut = true // no route: finished as it is stored
			rs, err := s.Ingest(ctx, []hookbox.Delivery{stored})
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range []struct {
				id   int64
				what string
				want time.Duration
			}{{done, "done a minute ago", time.Minute}, {dead, "dead a minute ago", time.Minute}, {rs[0].ID, "stored now", 0}} {
				age := dbAge(t, s, `SELECT updated_at FROM queue WHERE id = $1`, row.id)
				if d := age - row.want; d < -10*time.Second || d > 10*time.Second {
					t.Errorf("event %s: updated_at %v before the database's clock, want about %v", row.what, age, row.want)
				}
			}
			as, err := s.Attempts(ctx, dead)
			if err != nil || len(as) != 1 || !as[0].FinishedAt.Equal(finished.Truncate(time.Microsecond)) {
				t.Errorf("attempts of the dead event: %+v, %v; want one finished at %v, the worker's time", as, err, finished)
			}
		})
	}
}

// TestRejectedTrimByDatabaseClock: the rejected log keeps a day
// (max_age); a host two days ahead trimming it deleted the refusals the
// other hosts logged a second before, and no longer does. A refusal
// logged 25 hours ago by the database's clock goes.
func TestRejectedTrimByDatabaseClock(t *testing.T) {
	t.Parallel()
	const ahead = 2 * day
	s := open(t, pgtest.ClockURL(t, -ahead))
	ctx := context.Background()
	rej := func(at time.Time) hookbox.Rejection {
		return hookbox.Rejection{Source: "r", ReceivedAt: at, RemoteAddr: "192.0.2.1", Status: 401, Reason: "bad signature"}
	}
	dbNow := time.Now().Add(-ahead) // the other hosts' clock
	if _, err := s.AddRejections(ctx, []hookbox.Rejection{rej(dbNow.Add(-time.Second)), rej(dbNow.Add(-25 * time.Hour))}, hookbox.RejectionBounds{}); err != nil {
		t.Fatal(err)
	}
	n, err := s.AddRejections(ctx, nil, hookbox.RejectionBounds{Since: time.Now().Add(-day)})
	if err != nil || n != 1 {
		t.Errorf("trim by a host two days ahead deleted %d, %v; want the refusal logged 25 hours ago", n, err)
	}
	if rs, err := s.Rejections(ctx, hookbox.RejectionFilter{}); err != nil || len(rs) != 1 || !rs[0].ReceivedAt.Equal(dbNow.Add(-time.Second).Truncate(time.Microsecond)) {
		t.Errorf("rejections left: %+v, %v; want the one logged a second ago", rs, err)
	}
}

// TestSessionSweepByDatabaseClock: console sessions last 12 hours. A
// login at a host 13 hours ahead swept the session another host had just
// started, logging its operator out at every process; the sweep now
// judges expiries on the database's clock. It still forgets a session
// expired by that clock.
func TestSessionSweepByDatabaseClock(t *testing.T) {
	const skew = 13 * time.Hour
	ctx := context.Background()
	s := open(t, pgtest.ClockURL(t, -skew))
	// Another host, whose clock is right, started one a moment ago; one
	// ended a minute ago.
	sql(t, s, `INSERT INTO sessions (id_sha256, expires_at) VALUES ($1, now() + interval '12 hours'), ($2, now() - interval '1 minute')`,
		hookbox.SessionKey("other"), hookbox.SessionKey("ended"))
	now := time.Now()
	if err := s.StartSession(ctx, hookbox.Session{ID: "mine", Expires: now.Add(12 * time.Hour), Now: now}); err != nil {
		t.Fatal(err)
	}
	conn, err := s.AcquireConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for id, want := range map[string]bool{"other": true, "ended": false, "mine": true} {
		var kept bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE id_sha256 = $1)`, hookbox.SessionKey(id)).Scan(&kept); err != nil {
			t.Fatal(err)
		}
		if kept != want {
			t.Errorf("after a login at a host 13 hours ahead, session %q kept %v, want %v", id, kept, want)
		}
	}
	if live, err := s.SessionLive(ctx, "other", now.Add(-skew)); err != nil || !live {
		t.Errorf("the other host's session, read by that host: live %v, %v", live, err)
	}
}

// TestOldestDueByDatabaseClock: what is due, and for how long, is read on
// the database's clock, the one claims judge by, in Stats (and so
// hookbox_oldest_due_seconds), the console's overview and a target's
// backlog. A host 10 minutes ahead read a fresh event as waiting 10
// minutes (HookboxBacklog fires past 5) and a retry due in 5 minutes as
// due; a host 10 minutes behind did not see an event due for 2 minutes,
// which claims were taking.
func TestOldestDueByDatabaseClock(t *testing.T) {
	const skew = 10 * time.Minute
	ctx := context.Background()
	// read says how long source's oldest due event has waited, by each
	// read-out, and whether it is due.
	type reading struct {
		stats, overview, backlog time.Duration
		due                      bool
	}
	read := func(t *testing.T, s *postgres.Store, source string) reading {
		t.Helper()
		now := time.Now()
		b, err := s.TargetBacklog(ctx, source, now)
		if err != nil {
			t.Fatal(err)
		}
		ov, err := s.Overview(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		var o hookbox.SourceOverview
		for _, x := range ov {
			if x.Source == source {
				o = x
			}
		}
		st, err := s.Stats(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		if !st.OldestDue.IsZero() != !b.OldestDue.IsZero() || !o.OldestDue.IsZero() != !b.OldestDue.IsZero() {
			t.Fatalf("read-outs disagree on whether %s has a due event: stats %+v, overview %+v, backlog %+v", source, st, o, b)
		}
		return reading{st.OldestDueAge, o.OldestDueAge, b.OldestDueAge, !b.OldestDue.IsZero()}
	}
	metric := func(t *testing.T, s *postgres.Store) float64 {
		t.Helper()
		m := metrics.New(nil)
		m.WatchStats(s.Stats, 0, nil)
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "hookbox_oldest_due_seconds" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no hookbox_oldest_due_seconds")
		return 0
	}
	// retry leaves an event of source pending, due at `at` by this host's
	// clock, as a worker's failed attempt would.
	retry := func(t *testing.T, s *postgres.Store, source string, at time.Time) {
		t.Helper()
		if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery(source, "1")}); err != nil {
			t.Fatal(err)
		}
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Sources: []string{source}})
		if err != nil || len(evs) != 1 {
			t.Fatalf("claim of %s: %v, %v", source, evs, err)
		}
		e := evs[0]
		errs, err := s.Finish(ctx, []hookbox.Outcome{{ID: e.ID, Owner: e.LeaseOwner, Attempt: e.Attempts,
			Status: hookbox.StatusPending, RetryAt: at, StartedAt: time.Now(), FinishedAt: time.Now()}})
		if err != nil || errs[0] != nil {
			t.Fatalf("finish: %v, %v", errs, err)
		}
	}
	near := func(d, want time.Duration) bool { return d >= want-20*time.Second && d <= want+20*time.Second }

	t.Run("host ahead", func(t *testing.T) {
		t.Parallel()
		s := open(t, pgtest.ClockURL(t, -skew))
		retry(t, s, "later", time.Now().Add(5*time.Minute))
		if r := read(t, s, "later"); r.due {
			t.Errorf("a retry due in 5 minutes by the database's clock reads as due: %+v", r)
		}
		if age := metric(t, s); age != 0 {
			t.Errorf("hookbox_oldest_due_seconds = %v with nothing due, want 0", age)
		}
		if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("fresh", "1")}); err != nil {
			t.Fatal(err)
		}
		if r := read(t, s, "fresh"); !r.due || !near(r.stats, 0) || !near(r.overview, 0) || !near(r.backlog, 0) {
			t.Errorf("an event stored a moment ago: %+v, want due for about 0 s", r)
		}
		if age := metric(t, s); age > 20 {
			t.Errorf("hookbox_oldest_due_seconds = %v for an event stored a moment ago, want about 0", age)
		}
	})
	t.Run("host behind", func(t *testing.T) {
		t.Parallel()
		s := open(t, pgtest.ClockURL(t, skew))
		retry(t, s, "waiting", time.Now().Add(-2*time.Minute))
		if r := read(t, s, "waiting"); !r.due || !near(r.stats, 2*time.Minute) || !near(r.overview, 2*time.Minute) || !near(r.backlog, 2*time.Minute) {
			t.Errorf("an event due 2 minutes ago by the database's clock: %+v, want due for about 2 minutes", r)
		}
		if age := metric(t, s); age < 100 || age > 140 {
			t.Errorf("hookbox_oldest_due_seconds = %v, want about 120", age)
		}
		evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, Sources: []string{"waiting"}})
		if err != nil || len(evs) != 1 {
			t.Errorf("a claim took %d events, %v; want the due one", len(evs), err)
		}
	})
}

// TestLeasePickedByDatabaseClock: a work transaction that leases an
// event it picked but did not run (a rescued event, run alone next) writes
// the lease's end as a distance on the server's clock, as claims do. From
// a host 90 s behind the server, a 12 s lease was written 78 s in the
// server's past: over at once, so another process could claim the event
// while it ran.
func TestLeasePickedByDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.ClockURL(t, 90*time.Second))
	rc, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("lp", "1")})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now() // before the work transaction, whose now() the lease starts from
	w, err := s.BeginWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Rollback()
	now := time.Now()
	if err := w.LeasePicked(ctx, []int64{rc[0].ID}, "rescuer", now.Add(12*time.Second), now); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The lease's end is 12 s after the server's now at LeasePicked, less
	// what has passed since (not a bound on that: written from this host's
	// clock it would end 78 s in the server's past).
	if left, passed := -dbAge(t, s, `SELECT next_attempt_at FROM queue WHERE id = $1`, rc[0].ID), time.Since(began); left < 11*time.Second-passed || left > 13*time.Second {
		t.Errorf("the lease ends %v after the server's now, %v after it was written: want 12 s less the time passed", left, passed)
	}
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "other", Limit: 10, Lease: time.Minute, Sources: []string{"lp"}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Errorf("another process claimed the event leased 12 s before: %+v", evs)
	}
	if age, passed := dbAge(t, s, `SELECT updated_at FROM queue WHERE id = $1`, rc[0].ID), time.Since(began); age < 0 || age > passed+time.Second {
		t.Errorf("updated_at is %v before the server's now, %v after it was written: want at most the time passed", age, passed)
	}
}
