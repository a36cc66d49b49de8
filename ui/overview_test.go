package ui_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/verify"
)

// TestOverviewHandshakesNotRefused: a sender's verified URL check (Slack's
// url_verification), answered 200 and not stored, counts as received on
// the overview and not as refused. It counted under Refused*, which sent
// an operator looking for a failure that was not there (the minute's
// summary line had been fixed for the same reason).
func TestOverviewHandshakesNotRefused(t *testing.T) {
	srv := e2e.Start(t, `
admin_token: "`+token+`"
admin_listen: "127.0.0.1:0"
sources:
  - name: slack
    provider: slack
    secrets: ["overview-slack-signing-secret-0123456789"]
    store_only: true
`, dbtest.SQLiteURL(t), nil)
	body := []byte(`{"type":"url_verification","challenge":"abc123","token":"x"}`)
	h, err := verify.Sign(srv.Source("slack").Verify(), body, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if r := srv.Post("slack", h, body); r.Status != http.StatusOK {
			t.Fatalf("handshake: %+v, want 200", r)
		}
	}
	if r := srv.Post("slack", http.Header{"X-Slack-Signature": {"v0=00"}, "X-Slack-Request-Timestamp": {h.Get("X-Slack-Request-Timestamp")}}, body); r.Status != http.StatusUnauthorized {
		t.Fatalf("bad signature: %+v, want 401", r)
	}
	a := &app{t: t, admin: srv.Admin}
	st, page, _ := a.get("/ui/")
	if st != http.StatusOK {
		t.Fatalf("overview: %d", st)
	}
	i := strings.Index(page, `source=slack">slack</a>`)
	if i < 0 {
		t.Fatalf("no slack row on the overview:\n%s", page)
	}
	row := page[i:]
	row = row[:strings.Index(row, "</tr>")]
	var nums []string
	for _, m := range regexp.MustCompile(`<td class="num">([^<]*)`).FindAllStringSubmatch(row, -1) {
		nums = append(nums, m[1])
	}
	// Stored 1h, Rejected 1h, Received*, Dupes*, Refused*, Pending, …
	if len(nums) < 5 || nums[2] != "4" || nums[3] != "0" || nums[4] != "1" {
		t.Errorf("slack row after 3 handshakes and 1 bad signature: %v; want received 4, dupes 0, refused 1", nums)
	}
}

// TestOverviewOldestDueOnDatabaseClock: the overview's "Oldest due" is
// how long the event has waited by the database's clock, the one claims
// judge by. At a host 10 minutes ahead of the PostgreSQL server an event
// stored a moment ago read as due for 10 minutes (now minus its due time,
// by two clocks).
func TestOverviewOldestDueOnDatabaseClock(t *testing.T) {
	srv := e2e.Start(t, `
admin_token: "`+token+`"
admin_listen: "127.0.0.1:0"
sources:
  - name: kept
    scheme: none
    store_only: true
`, pgtest.ClockURL(t, -10*time.Minute), nil)
	// Nothing in this process works "stray": its event stays pending.
	d := hookbox.Delivery{Source: "stray", DeliveryID: "1", Payload: []byte(`{}`), ReceivedAt: time.Now()}
	if _, err := srv.Svc.Store.Ingest(context.Background(), []hookbox.Delivery{d}); err != nil {
		t.Fatal(err)
	}
	a := &app{t: t, admin: srv.Admin}
	st, page, _ := a.get("/ui/")
	if st != http.StatusOK {
		t.Fatalf("overview: %d", st)
	}
	i := strings.Index(page, `source=stray">stray</a>`)
	if i < 0 {
		t.Fatalf("no stray row on the overview:\n%s", page)
	}
	row := page[i:]
	row = row[:strings.Index(row, "</tr>")]
	cells := regexp.MustCompile(`<td>([^<]*)</td>`).FindAllStringSubmatch(row, -1)
	if len(cells) == 0 {
		t.Fatalf("no oldest due cell in the stray row: %s", row)
	}
	waited, err := time.ParseDuration(cells[len(cells)-1][1])
	if err != nil || waited > 20*time.Second {
		t.Errorf("oldest due of an event stored a moment ago: %q, want about 0s", cells[len(cells)-1][1])
	}
}
