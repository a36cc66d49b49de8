package postgres_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestIngestRollbackOnADeadNetwork: an ingest transaction that is open
// when the network to the server starts dropping every packet is rolled
// back within an ingest step's time, not when the network comes back. The
// receiver rolls back the transaction filling behind a failed commit, and
// the deliveries queued behind it wait for that rollback: a rollback that
// waited for the server's answer held senders until the outage ended
// (RELIABILITY.md, open point 5).
func TestIngestRollbackOnADeadNetwork(t *testing.T) {
	t.Parallel()
	proxy, viaProxy := faults.URLProxyFor(t, pgtest.URL(t))
	s := open(t, viaProxy)
	ctx := context.Background()

	tx, err := s.BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Add(ctx, []hookbox.Delivery{storetest.Delivery("s", "in-the-hole")}); err != nil {
		t.Fatal(err)
	}
	proxy.BlackHole()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- tx.Rollback() }()
	const within = 2 * time.Second // the bound is 0.5 s
	select {
	case <-done:
	case <-time.After(within):
		t.Errorf("Rollback still waiting %v into the black hole, want it back within %v", time.Since(start).Round(time.Millisecond), within)
		proxy.Restore()
		<-done
	}
	proxy.Restore()

	// The store recovers on fresh connections, and the rolled-back
	// delivery was not kept.
	rs, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "in-the-hole")})
	if err != nil {
		t.Fatalf("ingest after the black hole: %v", err)
	}
	if rs[0].Duplicate {
		t.Error("the delivery of the rolled-back transaction was stored")
	}
}

// TestIdleIngestReleasesItsKeys: an ingest transaction whose connection
// falls silent after inserting a delivery (here it is simply left open, as
// the server sees a connection a firewall dropped: idle in a transaction)
// holds that delivery's key only until the server ends it
// (idle_in_transaction_session_timeout, 10 s for a store whose ingest
// sends little, more as it may send more): a sender retrying the delivery
// gets it stored then, instead of a 503 for each retry until the server's
// keepalive noticed (two hours by default). The store here sets the limit
// to 2 s (Options.IngestIdle), so the test does not wait 10 s for it.
func TestIdleIngestReleasesItsKeys(t *testing.T) {
	t.Parallel()
	if got := postgres.IngestIdle(80 << 20); got != 20*time.Second {
		t.Errorf("idle limit for 80 MiB at 8 MiB/s: %v, want 20s", got)
	}
	s, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{IngestBytes: 1, IngestIdle: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	held, err := s.BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Rollback() }) // before the store closes, which waits for it
	d := storetest.Delivery("s", "held-by-a-silent-connection")
	if _, err := held.Add(ctx, []hookbox.Delivery{d}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for tries := 1; ; tries++ {
		rs, err := s.Ingest(ctx, []hookbox.Delivery{d})
		if err == nil {
			if rs[0].Duplicate {
				t.Errorf("stored as a duplicate of the uncommitted insert")
			}
			t.Logf("stored on try %d, %v after the insert was left idle", tries, time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the retried delivery still cannot be stored after %v: %v", time.Since(start), err)
		}
		time.Sleep(250 * time.Millisecond) // a sender's retry
	}
	if err := held.Commit(ctx); err == nil {
		t.Errorf("the idle transaction committed after the server was to end it")
	}
}

// TestConnectionsHaveAUserTimeout: the store's connections carry
// TCP_USER_TIMEOUT (60 s), so that one the network drops silently is closed
// by the kernel whatever waits on it (a transaction of Go handlers, an
// Apply, the listener), not after TCP's retries of about 15 minutes, and
// probe an idle peer every 5 s, so that a lost probe or two does not close
// a healthy one. The proxies of the other tests cannot show the kernel's
// part (their own kernel acknowledges every byte), so this checks the
// settings.
func TestConnectionsHaveAUserTimeout(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_USER_TIMEOUT is Linux's")
	}
	t.Parallel()
	s := open(t, pgtest.URL(t))
	user, interval, err := s.ConnSocketTimes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if user != 60*time.Second || interval != 5*time.Second {
		t.Errorf("TCP_USER_TIMEOUT = %v, keepalive interval %v; want 60s and 5s", user, interval)
	}
}

// TestServerProbesIdleClients: the server probes a silent client of the
// store's sessions after a minute, every 10 s, six times, so a backend
// whose client a firewall dropped silently ends in about two minutes with
// the locks of its open transaction, not after the system's default two
// hours. As above, only the settings can be checked here.
func TestServerProbesIdleClients(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.URL(t))
	var idle, interval, count string
	if err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT
			(SELECT setting FROM pg_settings WHERE name = 'tcp_keepalives_idle'),
			(SELECT setting FROM pg_settings WHERE name = 'tcp_keepalives_interval'),
			(SELECT setting FROM pg_settings WHERE name = 'tcp_keepalives_count')`).Scan(&idle, &interval, &count)
	}); err != nil {
		t.Fatal(err)
	}
	if idle != "60" || interval != "10" || count != "6" {
		t.Errorf("server keepalive idle %s s, interval %s s, count %s; want 60, 10, 6", idle, interval, count)
	}
}

// TestCloseBoundedInABlackHole: Close returns, with an error, while a
// connection is still in use and the network to the server drops every
// packet; it waited for that connection for as long as the outage lasted
// (and, in a stop during one, 17 s for pgx's cancel request), which with
// the worker's own waits took serve's stop past systemd's 60 s.
func TestCloseBoundedInABlackHole(t *testing.T) {
	t.Parallel()
	proxy, viaProxy := faults.URLProxyFor(t, pgtest.URL(t))
	s := open(t, viaProxy)
	ctx := context.Background()
	tx, err := s.BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Add(ctx, []hookbox.Delivery{storetest.Delivery("s", "held")}); err != nil {
		t.Fatal(err)
	}
	proxy.BlackHole()
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, postgres.ErrConnectionsLeft) {
			t.Errorf("Close with a connection in use in a black hole: %v, want ErrConnectionsLeft", err)
		}
	case <-time.After(60 * time.Second):
		t.Error("Close still waiting after a minute for a connection in use, in a black hole")
	}
	proxy.Restore()
	tx.Rollback()
}
