package target_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/worker"
)

// TestMain lets the test binary be an exec command's supervisor, as
// hookbox's binary is (target.ExecSupervisor): tests run commands under
// one unless they say otherwise (eachMode).
func TestMain(m *testing.M) {
	target.ExecSupervisor()
	os.Exit(m.Run())
}

// quick retries fast, so that retry paths finish within a test.
var quick = worker.Policy{MaxAttempts: 5, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Timeout: 5 * time.Second}

// rig is a real SQLite store with a worker pool over it.
type rig struct {
	t    *testing.T
	s    dbtest.Store
	pool *worker.Pool
}

// newRig routes each source to its target with its policy and starts the
// pool; it stops when the test ends.
func newRig(t *testing.T, routes map[string]worker.Target, pol worker.Policy) *rig {
	t.Helper()
	return newRigAt(t, dbtest.SQLiteURL(t), routes, pol)
}

// newRigAt is newRig on the database at dbURL (see dbtest.Each).
func newRigAt(t *testing.T, dbURL string, routes map[string]worker.Target, pol worker.Policy) *rig {
	t.Helper()
	s := dbtest.Open(t, dbURL)
	p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond})
	for src, tg := range routes {
		p.Route(src, tg)
		p.SetPolicy(src, pol)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Stop(ctx)
	})
	return &rig{t: t, s: s, pool: p}
}

// ingest stores ds and wakes the pool; it returns the event ids.
func (r *rig) ingest(ds ...hookbox.Delivery) []int64 {
	r.t.Helper()
	for i := range ds {
		if ds[i].ReceivedAt.IsZero() {
			ds[i].ReceivedAt = time.Now()
		}
	}
	rs, err := r.s.Ingest(context.Background(), ds)
	if err != nil {
		r.t.Fatal(err)
	}
	ids := make([]int64, len(rs))
	for i, rc := range rs {
		if rc.Duplicate {
			r.t.Fatalf("delivery %d stored as a duplicate", i)
		}
		ids[i] = rc.ID
	}
	r.pool.Notify()
	return ids
}

// wait polls until event id is done or dead (bounded) and returns it.
func (r *rig) wait(id int64) hookbox.Event {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		e, err := r.s.Event(context.Background(), id)
		if err != nil {
			r.t.Fatal(err)
		}
		if e.Status == hookbox.StatusDone || e.Status == hookbox.StatusDead {
			return e
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("event %d still %s after 30s (attempts %d, last error %q)", id, e.Status, e.Attempts, e.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// want waits for event id to finish and checks its status and attempts.
func (r *rig) want(id int64, status hookbox.Status, attempts int) hookbox.Event {
	r.t.Helper()
	e := r.wait(id)
	if e.Status != status || e.Attempts != attempts {
		r.t.Fatalf("event %d: %s after %d attempts, want %s after %d (last error %q)",
			id, e.Status, e.Attempts, status, attempts, e.LastError)
	}
	return e
}

// attempts returns the recorded attempts of event id.
func (r *rig) attempts(id int64) []hookbox.Attempt {
	r.t.Helper()
	as, err := r.s.Attempts(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return as
}
