package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/ui"
	"github.com/hookbox/hookbox/verify"
)

// csrfRE finds a form's CSRF token on a page.
var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestConsoleRecheckStoppedPartWay: a re-check confirmed in the console
// whose second page fails (a re-check stores 100 deliveries to a page;
// here the database refuses to mark one of the second page admitted)
// shows how many deliveries were admitted (every event stored), that the
// rest were not re-checked and that re-checking again is safe, with a
// button that does; it admits only those left unmarked, as already
// stored. Before, the page was a bare "re-check failed; see the server
// log.", as if nothing had been stored.
func TestConsoleRecheckStoppedPartWay(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	st := dbtest.Open(t, dbURL)
	ctx := context.Background()
	cfg := verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"gh-recheck-secret-0123"}}
	v, err := verify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kept := storetest.SignedRejections(t, st, cfg, "gh", 150)
	sources := map[string]rejected.Source{"gh": {Verifier: v}}
	srv := server.New(server.Config{})
	ui.Register(srv, ui.Config{Token: token, Store: st, Sources: []string{"gh"},
		Recheck: func(ctx context.Context, p rejected.RecheckParams) (rejected.RecheckResult, error) {
			return rejected.Recheck(ctx, st, sources, p)
		}})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c := browser(t)
	login(t, c, hs.URL)
	_, page := fetch(t, c, "GET", hs.URL+"/ui/rejected", nil)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no re-check form on the rejected page:\n%s", page)
	}

	lift := dbtest.Refuse(t, dbURL, "UPDATE", "rejected_deliveries", kept[125].ID)
	resp, page := fetch(t, c, "POST", hs.URL+"/ui/rejected/recheck", url.Values{"csrf": {m[1]}, "admit": {"1"}})
	lift()
	evs, err := st.Events(ctx, hookbox.Filter{Source: "gh", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"The re-check stopped part-way", fmt.Sprintf("The %d deliveries admitted below were stored", len(evs)),
		"The rest were not re-checked", "Re-checking again is safe"} {
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(page, want) || len(evs) != 150 {
			t.Errorf("re-check: %d, %d events stored; the page lacks %q:\n%s", resp.StatusCode, len(evs), want, page)
		}
	}
	m = csrfRE.FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, "Re-check again") {
		t.Fatalf("no form to re-check again on the stopped page:\n%s", page)
	}
	resp, page = fetch(t, c, "POST", hs.URL+"/ui/rejected/recheck", url.Values{"csrf": {m[1]}, "admit": {"1"}})
	evs, _ = st.Events(ctx, hookbox.Filter{Source: "gh", Limit: 1000})
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Admitted (25)") || len(evs) != 150 {
		t.Errorf("re-checking again: %d, %d events stored; want 200, the 25 left unmarked admitted, none stored twice:\n%s", resp.StatusCode, len(evs), page)
	}
}
