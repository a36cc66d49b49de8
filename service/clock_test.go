package service

import (
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestClockOffDatabaseWarned: a service whose host's clock is 90 s behind
// the PostgreSQL server's warns at start, saying by how much, and one
// whose clock agrees does not.
func TestClockOffDatabaseWarned(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ahead time.Duration
		warn  bool
	}{{"behind", 90 * time.Second, true}, {"agrees", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := startOps(t, pgtest.ClockURL(t, tc.ahead), opsConfig, nil)
			// "listening" is logged after the check.
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(h.logs.String(), `"msg":"listening"`) {
				if time.Now().After(deadline) {
					t.Fatalf("no \"listening\" within 20 s: %s", h.logs.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			logs := h.logs.String()
			warned := strings.Contains(logs, "clock differs from the database server's")
			if warned != tc.warn {
				t.Errorf("warned %v, want %v: %s", warned, tc.warn, logs)
			}
			if tc.warn && !strings.Contains(logs, `"database_ahead_by":"1m30`) {
				t.Errorf("the warning does not say the server is 1m30s ahead: %s", logs)
			}
		})
	}
}
