package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

func open(t testing.TB, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) hookbox.Store {
		s, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestConcurrentOpenMigratesOnce starts several stores on one fresh schema
// at once, as several processes behind a load balancer would: all open, and
// the schema is migrated once.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	const n = 6
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = postgres.Open(context.Background(), url, postgres.Options{MaxConns: 2})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var applied int
	if err := conn.QueryRow(context.Background(),
		`SELECT count(*) FROM goose_db_version WHERE version_id > 0 AND is_applied`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != 1 {
		t.Errorf("migration 1 recorded %d times, want 1", applied)
	}
	// Two stores (two pools) racing on one key: one row, one new.
	var news int
	var mu sync.Mutex
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs, err := stores[i].Ingest(context.Background(), []hookbox.Delivery{storetest.Delivery("multi", "k")})
			if err != nil {
				t.Errorf("store %d: %v", i, err)
				return
			}
			if !rs[0].Duplicate {
				mu.Lock()
				news++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if news != 1 {
		t.Errorf("%d stores reported the key new, want 1", news)
	}
}

// TestReopenKeepsData: opening again runs no migration twice and keeps rows.
func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	rs, err := s.Ingest(context.Background(), []hookbox.Delivery{storetest.Delivery("p", "1")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, url)
	again, err := s2.Ingest(context.Background(), []hookbox.Delivery{storetest.Delivery("p", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if !again[0].Duplicate || again[0].ID != rs[0].ID {
		t.Errorf("after reopen = %+v, want duplicate of %d", again[0], rs[0].ID)
	}
}

// TestOverlappingBatchesInOppositeOrder: batches that share keys in opposite
// orders must neither deadlock nor fail.
func TestOverlappingBatchesInOppositeOrder(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.URL(t))
	const keys, rounds = 40, 20
	for r := range rounds {
		var fwd, rev []hookbox.Delivery
		for k := range keys {
			fwd = append(fwd, storetest.Delivery("o", fmt.Sprintf("%d-%d", r, k)))
			rev = append(rev, storetest.Delivery("o", fmt.Sprintf("%d-%d", r, keys-1-k)))
		}
		var wg sync.WaitGroup
		results := make([][]hookbox.Receipt, 4)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ds := fwd
				if i%2 == 1 {
					ds = rev
				}
				rs, err := s.Ingest(context.Background(), ds)
				if err != nil {
					t.Errorf("round %d batch %d: %v", r, i, err)
				}
				results[i] = rs
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		news := 0
		for _, rs := range results {
			for _, r := range rs {
				if !r.Duplicate {
					news++
				}
			}
		}
		if news != keys {
			t.Fatalf("round %d: %d new receipts, want %d", r, news, keys)
		}
	}
}

func TestEmptyBatchAndNilFields(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.URL(t))
	rs, err := s.Ingest(context.Background(), nil)
	if err != nil || len(rs) != 0 {
		t.Fatalf("Ingest(nil) = %v, %v", rs, err)
	}
	d := storetest.Delivery("n", "1")
	d.Header, d.Payload = nil, nil
	rs, err = s.Ingest(context.Background(), []hookbox.Delivery{d})
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Event(context.Background(), rs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Payload == nil || len(e.Payload) != 0 {
		t.Errorf("payload = %#v, want empty, not NULL", e.Payload)
	}
	if len(e.Header) != 0 {
		t.Errorf("headers = %v, want none", e.Header)
	}
	if !e.CreatedAt.Equal(d.ReceivedAt.Truncate(time.Microsecond)) || e.CreatedAt.Location() != time.UTC {
		t.Errorf("created_at = %v, want %v in UTC", e.CreatedAt, d.ReceivedAt)
	}
}

// TestInvalidTextIsNotUnavailable: text PostgreSQL cannot store is a
// problem of the input, not of the database; nothing of the batch is stored.
func TestInvalidTextIsNotUnavailable(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.URL(t))
	for _, id := range []string{"bad\xff", "nul\x00"} {
		_, err := s.Ingest(context.Background(), []hookbox.Delivery{
			storetest.Delivery("v", "fine"), storetest.Delivery("v", id)})
		if err == nil {
			t.Fatalf("Ingest of id %q succeeded", id)
		}
		if errors.Is(err, hookbox.ErrUnavailable) {
			t.Errorf("Ingest of id %q: %v matches ErrUnavailable", id, err)
		}
	}
	es, err := s.Events(context.Background(), hookbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 0 {
		t.Errorf("%d events stored from rejected batches", len(es))
	}
}

// TestUnreachableServer: a server that does not answer is ErrUnavailable,
// promptly.
func TestUnreachableServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = postgres.Open(ctx, "postgres://u:s3cret@"+addr+"/db?sslmode=disable", postgres.Options{})
	if !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("Open(unreachable) error = %v, want ErrUnavailable", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error shows the password: %v", err)
	}
}

func TestBadURLHidesPassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"postgres://user:s3cret@host:notaport/db",
		"postgres://user:s3cret@host/db?pool_max_conns=x",
		"host=h password=s3cret connect_timeout=x",
	} {
		_, err := postgres.Open(context.Background(), u, postgres.Options{})
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// BenchmarkIngest stores batches of 64 distinct deliveries of 1 KiB each.
func BenchmarkIngest(b *testing.B) {
	s := open(b, pgtest.URL(b))
	body := []byte(strings.Repeat("x", 1024))
	const batch = 64
	ds := make([]hookbox.Delivery, batch)
	b.ReportAllocs()
	b.SetBytes(batch * int64(len(body)))
	ctx := context.Background()
	n := 0
	for b.Loop() {
		for i := range ds {
			d := storetest.Delivery("bench", fmt.Sprintf("evt_%09d", n))
			d.Payload = body
			ds[i] = d
			n++
		}
		rs, err := s.Ingest(ctx, ds)
		if err != nil {
			b.Fatal(err)
		}
		if rs[batch-1].Duplicate {
			b.Fatal("fresh delivery reported duplicate")
		}
	}
}

// BenchmarkIngestDuplicates stores batches of 64 deliveries, half of them
// already stored: the path with the second statement.
func BenchmarkIngestDuplicates(b *testing.B) {
	s := open(b, pgtest.URL(b))
	body := []byte(strings.Repeat("x", 1024))
	const batch = 64
	ds := make([]hookbox.Delivery, batch)
	ctx := context.Background()
	n := 0
	for b.Loop() {
		for i := range ds {
			id := n + i
			if i%2 == 1 {
				id = n + i - 1 - batch // stored new by the previous batch
			}
			d := storetest.Delivery("bench", fmt.Sprintf("evt_%09d", id))
			d.Payload = body
			ds[i] = d
		}
		n += batch
		if _, err := s.Ingest(ctx, ds); err != nil {
			b.Fatal(err)
		}
	}
}
