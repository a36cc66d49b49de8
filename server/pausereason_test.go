package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestAdminPauseReasonGivenOnceAndBounded: a pause's reason, like a skip's,
// is refused when given twice (read by its first value, the pause keeps a
// reason the client did not mean) or longer than a skip's reason may be
// (it is stored and answered in every GET /admin/targets); nothing is
// paused either way.
func TestAdminPauseReasonGivenOnceAndBounded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		for _, c := range []struct{ what, path string }{
			{"reason given twice", "/admin/targets/shop/one/pause?reason=first&reason=second"},
			{"a 200 KB reason", "/admin/targets/shop/two/pause?reason=" + strings.Repeat("x", 200<<10)},
		} {
			if code, b := h.call("POST", c.path); code != http.StatusBadRequest {
				t.Errorf("pause with %s = %d %.200s, want 400", c.what, code, b)
			}
		}
		if ps, err := h.st.Paused(context.Background()); err != nil || len(ps) != 0 {
			for _, p := range ps {
				t.Errorf("paused %s with a reason of %d bytes (%.20q)", p.Name, len(p.Reason), p.Reason)
			}
		}
	})
}
