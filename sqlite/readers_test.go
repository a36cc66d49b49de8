package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/worker"
)

// holdReaders takes every connection of s's read pool, as long reads
// (console pages, exports, Stats on a big file) would, until release.
func holdReaders(t *testing.T, s *Store) (release func()) {
	t.Helper()
	var conns []*sql.Conn
	for range s.reader.Stats().MaxOpenConnections {
		c, err := s.reader.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	var once atomic.Bool
	release = func() {
		if once.Swap(true) {
			return
		}
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// TestLargeClaimNotPastItsLease: a claim whose payloads are read after its
// commit, on a reader, while long reads hold every reader, gives up the
// read halfway through its leases: it never hands out an event whose lease
// has ended, which another claimer may take. It waited for a reader for
// as long as it took, and returned the event with its lease over.
func TestLargeClaimNotPastItsLease(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	d := hookbox.Delivery{Source: "big", DeliveryID: "1", Header: map[string][]string{}, Payload: make([]byte, 100<<10)}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{d}); err != nil {
		t.Fatal(err)
	}
	// Released after 10 s at the latest, so that without the bound the
	// claim returns, late, rather than hangs the test.
	time.AfterFunc(10*time.Second, holdReaders(t, s))
	evs, err := s.Claim(ctx, hookbox.ClaimParams{Owner: "o", Limit: 10, Lease: time.Second, Sources: []string{"big"}})
	returned := time.Now()
	for _, e := range evs {
		if !e.NextAttemptAt.After(returned) {
			t.Errorf("event %d handed out with its lease ended %v before the claim returned", e.ID, returned.Sub(e.NextAttemptAt))
		}
	}
	if len(evs) == 0 && !errors.Is(err, hookbox.ErrUnavailable) {
		t.Errorf("a claim that could not read its payloads returned no event and %v; want ErrUnavailable", err)
	}
	// An event it could not read is given its attempt back, pending
	// again, not left leased to nobody with an attempt spent (read on
	// the writer: the readers are still held).
	if len(evs) == 0 {
		if status, spent := onWriter(t, s, "big"); status != "pending" || spent != 0 {
			t.Errorf("the event whose payload could not be read: %s, %d attempts spent; want pending, its attempt given back", status, spent)
		}
	}
}

// onWriter reads the status of source's one event, and the attempts it
// has spent (attempts less those given back), on the writer: with the
// readers held, only it answers.
func onWriter(t *testing.T, s *Store, source string) (status string, spent int) {
	t.Helper()
	var attempts, base int
	if err := s.writer.QueryRowContext(context.Background(), `SELECT status, attempts, attempt_base FROM events WHERE source = ?`, source).
		Scan(&status, &attempts, &base); err != nil {
		t.Fatal(err)
	}
	return status, attempts - base
}

// TestDeliveryWhileReadersBusy: with every reader held by long reads, a
// pool of several targets still delivers. Before each round it asks on a
// reader which queues have events due; the question now gives up after a
// bound and the round claims every queue. It waited, and nothing was
// delivered until a reader came free.
//
// A claim's own reads after its commit wait for a reader no longer than
// that either (claimReader): a claim by key that came back short looks
// for where the next one starts (keyCursor), and a claim of an event
// whose payload is too large for its transaction reads it (readLarge).
// The one waited for as long as the long reads held every reader, the
// other for half the lease (30 s by default), and the event, given back
// due in a second, was claimed first again: the pool's one claiming loop
// waited with them, and no other target's event was delivered.
//
// The cases run in parallel, each on a file of its own: each spends most
// of its time waiting out readerWait and the pool's bound on the
// question, not on the cores.
func TestDeliveryWhileReadersBusy(t *testing.T) {
	for _, c := range []struct {
		name           string
		ordered, large bool
	}{
		{name: "plain"},
		{name: "beside an ordered target", ordered: true},
		{name: "beside a large payload", large: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := openTemp(t)
			ctx := context.Background()
			p := worker.New(s, worker.Options{PollInterval: 50 * time.Millisecond})
			delivered := make(chan struct{}, 1)
			for _, src := range []string{"a", "b", "c"} {
				p.Route(src, worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
					if ev.Source != "a" {
						return nil
					}
					select {
					case delivered <- struct{}{}:
					default:
					}
					return nil
				}))
			}
			if c.ordered {
				p.SetControls("c", worker.Controls{ByKey: true})
			}
			if c.large {
				// Due first, so claimed with a's event or before it.
				d := hookbox.Delivery{Source: "b", DeliveryID: "1", Header: map[string][]string{}, Payload: make([]byte, 100<<10)}
				if _, err := s.Ingest(ctx, []hookbox.Delivery{d}); err != nil {
					t.Fatal(err)
				}
			}
			release := holdReaders(t, s)
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				release()
				p.Stop(context.Background())
			})
			d := hookbox.Delivery{Source: "a", DeliveryID: "1", Header: map[string][]string{}, Payload: []byte("{}")}
			if _, err := s.Ingest(ctx, []hookbox.Delivery{d}); err != nil {
				t.Fatal(err)
			}
			p.Notify()
			select {
			case <-delivered:
			case <-time.After(20 * time.Second):
				t.Fatal("nothing delivered in 20 s while long reads held every reader")
			}
		})
	}
}

// TestPausedWhileReadersBusy: a pool that cannot read which queues are
// paused, because long reads hold every reader from its start on, works
// the other queues and not a paused one. The claim checks the pause
// itself, on the writer; before, the pool went by the set it had read,
// which at start was empty, and delivered the paused queue's event with
// the first.
func TestPausedWhileReadersBusy(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if err := s.PauseTarget(ctx, "held", "maintenance"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, []hookbox.Delivery{{Source: "held", DeliveryID: "1", Header: map[string][]string{}, Payload: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	var heldRan atomic.Bool
	delivered := make(chan struct{}, 1)
	p := worker.New(s, worker.Options{PollInterval: 50 * time.Millisecond})
	p.Route("held", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
		heldRan.Store(true)
		return nil
	}))
	p.Route("free", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
		delivered <- struct{}{}
		return nil
	}))
	release := holdReaders(t, s)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release()
		p.Stop(context.Background())
	})
	// Ingested after held's, so due after it: every claim round that
	// reaches free's event has had held's before it.
	if _, err := s.Ingest(ctx, []hookbox.Delivery{{Source: "free", DeliveryID: "1", Header: map[string][]string{}, Payload: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	p.Notify()
	select {
	case <-delivered:
	case <-time.After(20 * time.Second):
		t.Fatal("nothing delivered in 20 s while long reads held every reader")
	}
	if heldRan.Load() {
		t.Error("the paused queue's event was delivered while the pool could not read the pauses")
	}
	if status, spent := onWriter(t, s, "held"); status != "pending" || spent != 0 {
		t.Errorf("the paused queue's event: %s, %d attempts spent; want pending and unattempted", status, spent)
	}
}

// TestWorkerStoreBackLogged: a call of the pool's that failed (its read of
// the paused targets, which gives up after a second while long reads hold
// every reader) is logged, and once the call works again one line says
// so, as for its claims. Such a read's failure, a refresh of the pool's
// record, a lease extension and a claim that returned events with an
// error were logged, and their end never was: the last line an operator
// read said the store failed.
func TestWorkerStoreBackLogged(t *testing.T) {
	s := openTemp(t)
	logs := &syncbuf.Buffer{}
	p := worker.New(s, worker.Options{PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	p.Route("a", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error { return nil }))
	release := holdReaders(t, s)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release()
		p.Stop(context.Background())
	})
	logged := func(what, line string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(logs.String(), line) {
			if time.Now().After(deadline) {
				t.Fatalf("no line %s in 20 s:\n%s", what, logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	logged("saying the read failed", `msg="worker: read paused targets"`)
	release()
	logged("saying the store answers again", `msg="worker: read paused targets: the store answers again"`)
}
