package ui

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
)

// TestUncertainPageBounded: with more uncertain sends of a kind than the
// page shows, the uncertain page lists the newest uncertainShown of them
// (and every send of a kind with fewer) and says there are more, instead
// of reading and rendering every one.
func TestUncertainPageBounded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		var keys []string
		for i := range uncertainShown + 1 {
			keys = append(keys, fmt.Sprint("order-", i))
		}
		ids := storetest.SeedSends(t, st, hookbox.StatusDead, time.Now(), "smtp said no", "email", keys...)
		storetest.SeedSends(t, st, hookbox.StatusDead, time.Now(), "sms said no", "sms", "text-1")
		srv := server.New(server.Config{})
		Register(srv, Config{Token: "uncertain-page-token-0123456789", Store: st})
		ts := httptest.NewServer(srv)
		defer ts.Close()
		req, err := http.NewRequest("GET", ts.URL+"/ui/uncertain", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer uncertain-page-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /ui/uncertain = %d, %v", resp.StatusCode, err)
		}
		page := string(b)
		rows := strings.Count(page, `<td class="num"><a href="/ui/events/`)
		if rows != uncertainShown+1 {
			t.Errorf("the page lists %d sends, want the newest %d of email and the one of sms", rows, uncertainShown)
		}
		if strings.Contains(page, fmt.Sprintf(`href="/ui/events/%d"`, ids[0])) {
			t.Errorf("the page lists email's oldest send, %d", ids[0])
		}
		if !strings.Contains(page, fmt.Sprintf(`href="/ui/events/%d"`, ids[len(ids)-1])) || !strings.Contains(page, "text-1") {
			t.Errorf("the page lacks email's newest send or sms's")
		}
		if !strings.Contains(page, "more uncertain sends than shown") {
			t.Errorf("the page does not say there are more")
		}
	})
}
