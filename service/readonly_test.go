package service_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestPostgresReadOnly: while the database is read-only (a standby after
// a failover, or default_transaction_read_only set by a DBA), every
// delivery is answered 503 with Retry-After, never 2xx, and /readyz is
// 503 saying that the database is read-only, also before any delivery
// has failed (before, it answered ready until one had, then said only
// that commits fail). Once the database is writable again, without a
// restart, /readyz is ready and deliveries are stored.
func TestPostgresReadOnly(t *testing.T) {
	name, dbURL := pgtest.Database(t)
	h := start(t, dbURL)
	if r := do(t, h.signed("polar", "before", []byte(`{}`))); r.status != http.StatusAccepted {
		t.Fatalf("before: %+v", r)
	}
	pgtest.AdminExec(t, "ALTER DATABASE "+name+" SET default_transaction_read_only = on")
	pgtest.AdminExec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)

	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(h.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// A terminated session may answer the first probes as unreachable.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := readyz()
		if code == http.StatusServiceUnavailable && strings.Contains(body, "read-only") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz on a read-only database: %d %s; want 503 saying it is read-only", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range 5 {
		r := do(t, h.signed("polar", "during-"+string(rune('a'+i)), []byte(`{}`)))
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Fatalf("a delivery on a read-only database: %+v; want 503 with Retry-After", r)
		}
	}

	pgtest.AdminExec(t, "ALTER DATABASE "+name+" RESET default_transaction_read_only")
	deadline = time.Now().Add(30 * time.Second)
	for {
		r := do(t, h.signed("polar", "after", []byte(`{}`)))
		if r.status == http.StatusAccepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a delivery once the database is writable again: %+v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, body := readyz()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz once the database is writable again: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
