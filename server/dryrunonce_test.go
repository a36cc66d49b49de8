package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/verify"
)

// TestRetireRecheckRefuseRepeatedDryRun: retire and re-check, like
// replay and purge (TestActionsRefuseRepeatedParams), must refuse a
// dry_run given twice rather than act on its first value:
// "dry_run=false&dry_run=true" (a client appending dry_run=true to
// preview) ended every pending delivery of the target as dead, and
// admitted every kept rejected delivery, for good.
func TestRetireRecheckRefuseRepeatedDryRun(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	t.Run("retire", func(t *testing.T) {
		h := startAdmin(t, dbURL, adminToken)
		ids := seed(t, h.st, "gone", "x", hookbox.StatusPending, time.Now().Add(-time.Hour), "r1", "r2")
		code, b := h.call("POST", "/admin/targets/gone/retire?dry_run=false&dry_run=true")
		if code != 400 || !strings.Contains(string(b), "dry_run: given 2 times") {
			t.Errorf("retire with dry_run twice = %d %s, want 400 naming dry_run", code, b)
		}
		for _, id := range ids {
			if st := h.status(id); st != hookbox.StatusPending {
				t.Errorf("event %d is %s after a retire asked to preview, want pending", id, st)
			}
		}
	})
	t.Run("recheck", func(t *testing.T) {
		cfg := verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"gh-recheck-secret-0123"}}
		v, err := verify.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		url, st := startRecheckAdmin(t, dbtest.SQLiteURL(t), v)
		storetest.SignedRejections(t, st, cfg, "gh", 2)
		r := post(url + "/admin/rejected/recheck?dry_run=false&dry_run=true")
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.code != 400 || !strings.Contains(string(r.body), "dry_run: given 2 times") {
			t.Errorf("recheck with dry_run twice = %d %s, want 400 naming dry_run", r.code, r.body)
		}
		evs, err := st.Events(context.Background(), hookbox.Filter{Source: "gh", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 0 {
			t.Errorf("%d events stored by a re-check asked to preview, want none", len(evs))
		}
	})
}
