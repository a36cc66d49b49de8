package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/verify"
)

// stoppedRecheck is the body of a re-check that failed part-way.
type stoppedRecheck struct {
	Error         string               `json:"error"`
	Stopped       bool                 `json:"stopped"`
	Admitted      []rejected.Admission `json:"admitted"`
	AdmittedCount int                  `json:"admitted_count"`
	Rerun         string               `json:"rerun"`
}

// startRecheckAdmin starts an admin API whose re-check verifies the "gh" source
// against the store at dbURL, and the store itself.
func startRecheckAdmin(t *testing.T, dbURL string, v verify.Verifier) (url string, st dbtest.Store) {
	t.Helper()
	st = dbtest.Open(t, dbURL)
	srv := server.New(server.Config{})
	sources := map[string]rejected.Source{"gh": {Verifier: v}}
	server.RegisterAdmin(srv, server.AdminConfig{Token: adminToken, Store: st,
		Recheck: func(ctx context.Context, p rejected.RecheckParams) (rejected.RecheckResult, error) {
			return rejected.Recheck(ctx, st, sources, p)
		}})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts.URL, st
}

// TestAdminRecheckStoppedPartWay: a re-check of 150 deliveries that now
// pass stores them 100 to a page; when the second page fails, the answer
// is 503 with Retry-After when the database went away (PostgreSQL behind
// a faults.Proxy cut while the mark of a rejection of the second page
// waits for a row lock the test holds) and 500 when the database refused
// it (SQLite, a trigger), each time with the deliveries admitted, counted
// (admitted_count equals the events stored), and that running it again
// is safe; run again, it admits the rest and stores nothing twice. Before,
// both were a bare error: what had been stored was lost.
func TestAdminRecheckStoppedPartWay(t *testing.T) {
	const path = "/admin/rejected/recheck"
	cfg := verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"gh-recheck-secret-0123"}}
	v, err := verify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// seedRejected logs 150 deliveries that pass and returns the id of the
	// 26th of the second page (a re-check reads the newest first).
	seedRejected := func(t *testing.T, st dbtest.Store) int64 {
		return storetest.SignedRejections(t, st, cfg, "gh", 150)[125].ID
	}
	// check reads the stopped re-check's answer; after is an admin API on
	// the same database, and its store, that counts and runs it again.
	check := func(t *testing.T, after string, st dbtest.Store, r reply, wantCode int) {
		t.Helper()
		var rep stoppedRecheck
		if err := json.Unmarshal(r.body, &rep); err != nil || r.code != wantCode {
			t.Fatalf("POST %s = %d %s (%v), want %d with what was admitted", path, r.code, r.body, err, wantCode)
		}
		evs, err := st.Events(context.Background(), hookbox.Filter{Source: "gh", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Stopped || rep.AdmittedCount == 0 || rep.AdmittedCount != len(evs) || len(rep.Admitted) != len(evs) {
			t.Errorf("stopped %v, admitted_count %d, %d in admitted; %d events stored; want the count of those stored, more than none",
				rep.Stopped, rep.AdmittedCount, len(rep.Admitted), len(evs))
		}
		if !strings.Contains(rep.Error, "stopped part-way") || !strings.Contains(rep.Rerun, "safe") {
			t.Errorf("error %q, rerun %q: want that it stopped part-way and that running it again is safe", rep.Error, rep.Rerun)
		}
		if wantCode == http.StatusServiceUnavailable && r.retryAfter == "" {
			t.Error("a 503 without Retry-After")
		}
		again := post(after + path)
		var rest stoppedRecheck
		if err := json.Unmarshal(again.body, &rest); err != nil || again.code != http.StatusOK || rest.Stopped {
			t.Fatalf("running it again = %d %s (%v), want 200", again.code, again.body, err)
		}
		if evs, _ := st.Events(context.Background(), hookbox.Filter{Source: "gh", Limit: 1000}); len(evs) != 150 {
			t.Errorf("%d events stored after running it again, want 150, none twice", len(evs))
		}
	}

	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dbURL := pgtest.URL(t)
		proxy, viaProxy := faults.URLProxyFor(t, dbURL)
		url, st := startRecheckAdmin(t, viaProxy, v)
		held := seedRejected(t, st)
		r := postCutWhenBlocked(t, dbURL, proxy, url+path, `SELECT pg_backend_pid() FROM rejected_deliveries WHERE id = $1 FOR UPDATE`, held, "re-check")
		after, direct := startRecheckAdmin(t, dbURL, v)
		check(t, after, direct, r, http.StatusServiceUnavailable)
	})

	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dbURL := dbtest.SQLiteURL(t)
		url, st := startRecheckAdmin(t, dbURL, v)
		refused := seedRejected(t, st)
		lift := dbtest.Refuse(t, dbURL, "UPDATE", "rejected_deliveries", refused)
		r := post(url + path)
		if r.err != nil {
			t.Fatal(r.err)
		}
		lift()
		check(t, url, st, r, http.StatusInternalServerError)
	})
}
