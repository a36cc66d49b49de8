package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
)

// TestAdminReplayRate: POST /admin/replay takes rate, the pace of
// `replay --rate`: a value that is not a whole number from 0 is a 400
// that replays nothing; without it a replay larger than the default pace
// spreads its due times (hookbox.ReplayParams.ReplayWait); rate=0 makes
// every event due at once; rate=N paces at N a second.
func TestAdminReplayRate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		ids := make([]string, hookbox.DefaultReplayRate+50)
		for i := range ids {
			ids[i] = fmt.Sprint("r", i)
		}
		for _, bad := range []string{"-1", "fast", "1.5"} {
			code, b := h.call("POST", "/admin/replay?status=dead&source=paced&rate="+bad)
			if code != 400 || !strings.Contains(string(b), "rate") {
				t.Errorf("rate=%s: %d %s, want 400 naming rate", bad, code, b)
			}
		}
		for _, bad := range []string{"-1", "many", "1099511627777", "99999999999999999999"} {
			code, b := h.call("POST", "/admin/replay?status=dead&source=paced&pace_after="+bad)
			if code != 400 || !strings.Contains(string(b), "pace_after") {
				t.Errorf("pace_after=%s: %d %s, want 400 naming pace_after", bad, code, b)
			}
		}
		for _, c := range []struct {
			source, rate string
			p            hookbox.ReplayParams
		}{
			{"paced", "", hookbox.ReplayParams{}},
			{"at-once", "&rate=0", hookbox.ReplayParams{Rate: hookbox.ReplayAtOnce}},
			{"fast", "&rate=1000", hookbox.ReplayParams{Rate: 1000}},
		} {
			dead := seed(t, h.st, c.source, "order.paid", hookbox.StatusDead, time.Now(), ids...)
			slices.Sort(dead)
			var rep server.ReplayReply
			h.json("POST", "/admin/replay?status=dead&source="+c.source+c.rate, 200, &rep)
			if !slices.Equal(rep.Replayed, dead) {
				t.Fatalf("%s: replayed %d, want %d", c.source, len(rep.Replayed), len(dead))
			}
			first, err := h.st.Event(context.Background(), dead[0])
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range dead {
				e, err := h.st.Event(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := e.NextAttemptAt.Sub(first.NextAttemptAt), c.p.ReplayWait(i); got < want-time.Millisecond || got > want+time.Millisecond {
					t.Fatalf("%s: the %dth replayed is due %v after the first, want %v", c.source, i, got, want)
				}
			}
		}
	})
}
