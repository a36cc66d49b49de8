package server

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/groupcommit"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/verify"
)

// TestLeftDeliveriesStayInTheBudget: a delivery whose handler stopped
// waiting for its commit (StoreWait passed, 503; a sender that leaves is
// the same) stays queued in the group commit, body and all, and its bytes
// stay counted in the body budget until the committer lets go of it. With
// the store stalled (another connection holds SQLite's write lock), the
// deliveries the committer holds therefore never carry more than the
// budget's bytes: once it is spent, the next are answered 503 busy before
// they reach the store. Without that, each handler gave its bytes back as
// it answered and every delivery sent was queued, however many.
func TestLeftDeliveriesStayInTheBudget(t *testing.T) {
	path := strings.TrimPrefix(dbtest.SQLiteURL(t), "sqlite:")
	ctx := context.Background()
	// The store waits for the lock for longer than the test runs, so the
	// stall does not end (and free the committer) while deliveries come.
	st, err := sqlite.Open(ctx, path, sqlite.Options{BusyTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// What the committer holds: deliveries submitted, less those of the
	// batches it finished (OnBatch comes as a batch ends, just before its
	// callers are answered and its Holds let go).
	var submitted, finished, most atomic.Int64
	c := groupcommit.NewPipelined(func(ctx context.Context) (groupcommit.Txn[hookbox.Delivery, hookbox.Receipt], error) {
		return st.BeginIngest(ctx)
	}, groupcommit.Options{OnBatch: func(size int, _ time.Duration, _ error) { finished.Add(int64(size)) }})
	defer c.Close()

	v, err := verify.New(verify.Config{Scheme: verify.SchemeNone, IDHeader: "X-Id"})
	if err != nil {
		t.Fatal(err)
	}
	const body, budget = 64 << 10, 512 << 10
	srv := New(Config{Sources: []Source{{Name: "a", Verifier: v}}, MaxBodyBytes: body, MaxInflightBodyBytes: budget,
		StoreWait: 50 * time.Millisecond,
		Ingest: func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
			held := submitted.Add(1) - finished.Load()
			for m := most.Load(); held > m && !most.CompareAndSwap(m, held); m = most.Load() {
			}
			return c.Submit(ctx, d)
		}})
	ts := httptest.NewServer(srv)
	defer ts.Close()

	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(100)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var unlock sync.Once
	letGo := func() { unlock.Do(func() { conn.ExecContext(ctx, "ROLLBACK") }) }
	defer letGo()

	post := func(id string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/webhooks/a", strings.NewReader(strings.Repeat("x", body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		reply, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(reply)
	}
	const n = 4 * budget / body // four times what the budget holds
	busy := 0
	for i := range n {
		status, reply := post(fmt.Sprint("left-", i))
		if status != http.StatusServiceUnavailable {
			t.Fatalf("delivery %d while the store is locked: %d %s, want 503", i, status, reply)
		}
		if strings.Contains(reply, "too many deliveries in flight") {
			busy++
		}
	}
	t.Logf("%d deliveries of %d bytes against a budget of %d with the store locked: %d answered busy, the committer held at most %d",
		n, body, budget, busy, most.Load())
	if m := most.Load(); m*body > budget {
		t.Errorf("the committer held %d deliveries of %d bytes at once, %d bytes against a budget of %d", m, body, m*body, budget)
	}
	if busy == 0 {
		t.Errorf("no delivery answered busy: the budget was never spent by %d bodies of %d bytes against %d", n, body, budget)
	}

	// Once the store commits again, every byte is given back, and only
	// once (a second release would leave the count below zero).
	letGo()
	for deadline := time.Now().Add(30 * time.Second); srv.budget.inUse() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still counted once the store commits again, want 0", srv.budget.inUse())
		}
	}
}
