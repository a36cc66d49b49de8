package ui_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestConsoleStoreDownIs503: with the database unreachable, every page
// that reads the store answers 503 (try again), as the admin API does,
// never a 500 that reads as a bug in hookbox.
func TestConsoleStoreDownIs503(t *testing.T) {
	dbURL := pgtest.URL(t)
	proxy, viaProxy := faults.URLProxyFor(t, dbURL)
	sink, failing := newSink(t)
	a := startApp(t, viaProxy, sink, rightSecret, failing)
	if code := a.send(rightSecret, "msg_down_1", []byte(`{"type":"x"}`)); code != http.StatusAccepted {
		t.Fatalf("send = %d, want 202", code)
	}
	ev := a.eventByDelivery("msg_down_1", hookbox.StatusDone)
	proxy.Cut()
	for _, path := range []string{"/ui/", "/ui/events", "/ui/events/" + strconv.FormatInt(ev.ID, 10), "/ui/dead", "/ui/rejected", "/ui/uncertain"} {
		if code, body, h := a.get(path); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Errorf("GET %s with the database down = %d, Retry-After %q; want 503 with a Retry-After\n%.300s", path, code, h.Get("Retry-After"), body)
		}
	}
}
