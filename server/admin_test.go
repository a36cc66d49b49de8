package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
)

const adminToken = "adm_t0ken_that_must_never_leak_42"

// seed ingests one event per id of source and leaves it in status st,
// finished (or retried) at `at`. Pending events of source left by earlier
// calls would be claimed too, so seed the pending ones last.
func seed(t *testing.T, st dbtest.Store, source, typ string, status hookbox.Status, at time.Time, ids ...string) []int64 {
	t.Helper()
	var ds []hookbox.Delivery
	for _, id := range ids {
		ds = append(ds, hookbox.Delivery{
			Source: source, DeliveryID: id, EventType: typ,
			Header:     http.Header{"Content-Type": {"application/json"}},
			Payload:    []byte(fmt.Sprintf(`{"id":%q,"raw":"\u00e9 kept"}`+"\n", id)),
			ReceivedAt: time.Now(),
		})
	}
	return storetest.Seed(t, st, status, at, "failed for the test", ds...)
}

func needOps(t *testing.T, st hookbox.Store) {
	t.Helper()
	if _, ok := st.(hookbox.Ops); !ok {
		t.Skipf("%T does not implement hookbox.Ops yet", st)
	}
}

type adminHarness struct {
	t        *testing.T
	url      string
	st       dbtest.Store
	notified atomic.Int32
}

func startAdmin(t *testing.T, dbURL, token string) *adminHarness {
	t.Helper()
	h := &adminHarness{t: t}
	if dbURL != "" {
		h.st = dbtest.Open(t, dbURL)
	}
	srv := server.New(server.Config{})
	var st hookbox.Store
	if h.st != nil {
		st = h.st
	}
	server.RegisterAdmin(srv, server.AdminConfig{Token: token, Store: st, Notify: func() { h.notified.Add(1) }})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	h.url = ts.URL
	return h
}

// call makes an admin request with the token and returns status and body.
func (h *adminHarness) call(method, path string) (int, []byte) {
	h.t.Helper()
	return h.callAuth(method, path, "Bearer "+adminToken)
}

func (h *adminHarness) callAuth(method, path, auth string) (int, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (h *adminHarness) json(method, path string, want int, v any) {
	h.t.Helper()
	code, b := h.call(method, path)
	if code != want {
		h.t.Fatalf("%s %s = %d %s, want %d", method, path, code, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			h.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

func (h *adminHarness) status(id int64) hookbox.Status {
	h.t.Helper()
	e, err := h.st.Event(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return e.Status
}

var adminRoutes = []struct{ method, path string }{
	{"GET", "/admin/events"},
	{"GET", "/admin/events/1"},
	{"POST", "/admin/events/1/replay"},
	{"POST", "/admin/events/1/skip"},
	{"POST", "/admin/replay?status=dead"},
	{"POST", "/admin/purge?days=1"},
	{"POST", "/admin/targets/src/tgt/retire"},
	{"GET", "/admin/anything"},
}

func TestAdminAbsentWithoutToken(t *testing.T) {
	h := startAdmin(t, dbtest.SQLiteURL(t), "")
	for _, r := range adminRoutes {
		for _, auth := range []string{"", "Bearer ", "Bearer " + adminToken} {
			code, b := h.callAuth(r.method, r.path, auth)
			if code != http.StatusNotFound {
				t.Errorf("%s %s (auth %q) = %d %s, want 404", r.method, r.path, auth, code, b)
			}
		}
	}
}

func TestAdminRequiresToken(t *testing.T) {
	h := startAdmin(t, dbtest.SQLiteURL(t), adminToken)
	bad := []string{
		"",
		"Bearer",
		"Bearer ",
		"Bearer wrong-token",
		"Bearer " + adminToken + "x",
		"Bearer " + adminToken[:len(adminToken)-1],
		"Basic " + adminToken,
		adminToken,
	}
	for _, r := range adminRoutes {
		for _, auth := range bad {
			code, b := h.callAuth(r.method, r.path, auth)
			if code != http.StatusUnauthorized {
				t.Errorf("%s %s (auth %q) = %d, want 401", r.method, r.path, auth, code)
			}
			var e struct{ Error string }
			if json.Unmarshal(b, &e) != nil || e.Error == "" {
				t.Errorf("401 body is not a JSON error: %s", b)
			}
			if bytes.Contains(b, []byte(adminToken[:8])) || bytes.Contains(b, []byte("wrong-token")) {
				t.Errorf("401 body echoes a token: %s", b)
			}
		}
	}
	if code, _ := h.callAuth("GET", "/admin/events", "bearer "+adminToken); code != http.StatusOK {
		t.Errorf("case-insensitive scheme: %d", code)
	}
	if code, _ := h.call("GET", "/admin/nothing-here"); code != http.StatusNotFound {
		t.Errorf("unknown admin path with the token: %d, want 404", code)
	}
}

// TestAdminWrongMethodIs405 checks that a known admin path asked with a
// method it does not take is a 405 naming the methods it does take, after
// the token is checked, and that an unknown path stays a 404.
func TestAdminWrongMethodIs405(t *testing.T) {
	h := startAdmin(t, dbtest.SQLiteURL(t), adminToken)
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/admin/purge", "POST"},
		{"DELETE", "/admin/events", "GET, HEAD"},
		{"POST", "/admin/events/7", "GET, HEAD"},
		{"GET", "/admin/events/7/replay", "POST"},
		{"GET", "/admin/replay", "POST"},
		{"PUT", "/admin/targets", "GET, HEAD"},
		{"GET", "/admin/targets/src/pause", "POST"},
		{"GET", "/admin/targets/src/tgt/resume", "POST"},
		{"GET", "/admin/targets/src/tgt/retire", "POST"},
		{"DELETE", "/admin/rejected/recheck", "GET, HEAD, POST"},
		{"PATCH", "/admin/rejected/3", "GET, HEAD"},
	} {
		req, err := http.NewRequest(c.method, h.url+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s = %d Allow %q %s, want 405 Allow %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), b, c.allow)
		}
		var e struct{ Error string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			t.Errorf("%s %s: 405 body is not a JSON error: %s", c.method, c.path, b)
		}
		if code, _ := h.callAuth(c.method, c.path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s %s without the token = %d, want 401 before any 405", c.method, c.path, code)
		}
	}
	for _, p := range []string{"/admin/purge/now", "/admin/events/7/8", "/admin/targets/a/b/c/pause"} {
		if code, b := h.call("GET", p); code != http.StatusNotFound {
			t.Errorf("GET %s = %d %s, want 404", p, code, b)
		}
	}
}

func TestAdminListAndShow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		now := time.Now()
		done := seed(t, h.st, "polar", "order.paid", hookbox.StatusDone, now, "d1", "d2")
		dead := seed(t, h.st, "github", "push", hookbox.StatusDead, now, "x1")
		pending := seed(t, h.st, "polar", "order.refunded", hookbox.StatusPending, now, "p1")

		var all []hookbox.Event
		h.json("GET", "/admin/events", 200, &all)
		if len(all) != 4 || all[0].ID != pending[0] {
			t.Fatalf("list = %+v", all)
		}
		var raw []map[string]any
		h.json("GET", "/admin/events?limit=1", 200, &raw)
		if len(raw) != 1 {
			t.Fatalf("limit=1 gave %d", len(raw))
		}
		for _, k := range []string{"id", "source", "delivery_id", "status", "event_type", "attempts", "created_at"} {
			if _, ok := raw[0][k]; !ok {
				t.Errorf("event object lacks %q: %v", k, raw[0])
			}
		}
		cases := map[string][]int64{
			"?status=done":                 {done[1], done[0]},
			"?source=github":               dead,
			"?type=order.refunded":         pending,
			"?source=polar&status=pending": pending,
			"?since=1h":                    {pending[0], dead[0], done[1], done[0]},
			"?until=1h":                    nil,
			"?since=" + now.Add(time.Hour).UTC().Format(time.RFC3339): nil,
			fmt.Sprintf("?before_id=%d", dead[0]):                     {done[1], done[0]},
		}
		for q, want := range cases {
			var got []hookbox.Event
			h.json("GET", "/admin/events"+q, 200, &got)
			var ids []int64
			for _, e := range got {
				ids = append(ids, e.ID)
			}
			if !slices.Equal(ids, want) {
				t.Errorf("list %s = %v, want %v", q, ids, want)
			}
		}
		for _, q := range []string{"?status=bogus", "?since=yesterday", "?limit=0", "?limit=x", "?until=-5h", "?before_id=-1"} {
			if code, b := h.call("GET", "/admin/events"+q); code != 400 {
				t.Errorf("list %s = %d %s, want 400", q, code, b)
			}
		}

		var d server.EventDetail
		h.json("GET", fmt.Sprintf("/admin/events/%d", dead[0]), 200, &d)
		if d.Event.ID != dead[0] || d.Event.Status != hookbox.StatusDead || d.Event.DeliveryID != "x1" {
			t.Errorf("detail event = %+v", d.Event)
		}
		if string(d.Payload) != `{"id":"x1","raw":"\u00e9 kept"}`+"\n" {
			t.Errorf("detail payload = %q", d.Payload)
		}
		if len(d.Attempts) != 1 || d.Attempts[0].Outcome != hookbox.AttemptDead || d.Attempts[0].Error != "failed for the test" {
			t.Errorf("detail attempts = %+v", d.Attempts)
		}
		code, body := h.call("GET", fmt.Sprintf("/admin/events/%d?payload=raw", dead[0]))
		if code != 200 || string(body) != `{"id":"x1","raw":"\u00e9 kept"}`+"\n" {
			t.Errorf("raw payload = %d %q", code, body)
		}
		if code, _ := h.call("GET", "/admin/events/99999"); code != 404 {
			t.Errorf("missing event: %d", code)
		}
		if code, _ := h.call("GET", "/admin/events/abc"); code != 400 {
			t.Errorf("bad id: %d", code)
		}
		if code, _ := h.call("GET", fmt.Sprintf("/admin/events/%d?payload=hex", dead[0])); code != 400 {
			t.Errorf("bad payload form: %d", code)
		}
	})
}

func TestAdminReplay(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		now := time.Now()
		dead := seed(t, h.st, "polar", "order.paid", hookbox.StatusDead, now, "x1", "x2")
		done := seed(t, h.st, "polar", "order.paid", hookbox.StatusDone, now, "d1")
		otherDead := seed(t, h.st, "github", "push", hookbox.StatusDead, now, "g1")
		inFlight := seed(t, h.st, "stripe", "charge", hookbox.StatusProcessing, now, "s1")

		// One event: dead → pending, attempts reset.
		var rep server.ReplayReply
		h.json("POST", fmt.Sprintf("/admin/events/%d/replay", dead[0]), 200, &rep)
		if !slices.Equal(rep.Replayed, dead[:1]) || h.status(dead[0]) != hookbox.StatusPending {
			t.Fatalf("replay one = %+v, status %s", rep, h.status(dead[0]))
		}
		if h.notified.Load() != 1 {
			t.Errorf("workers not woken after replay")
		}
		// Done needs include_done; in flight is refused; missing is 404.
		if code, b := h.call("POST", fmt.Sprintf("/admin/events/%d/replay", done[0])); code != 409 || !strings.Contains(string(b), "include_done") {
			t.Errorf("replay done without flag = %d %s", code, b)
		}
		if h.status(done[0]) != hookbox.StatusDone {
			t.Fatalf("done event changed")
		}
		h.json("POST", fmt.Sprintf("/admin/events/%d/replay?include_done=true", done[0]), 200, &rep)
		if h.status(done[0]) != hookbox.StatusPending {
			t.Errorf("done not replayed with include_done")
		}
		if code, _ := h.call("POST", fmt.Sprintf("/admin/events/%d/replay?include_done=true", inFlight[0])); code != 409 {
			t.Errorf("replay in flight = %d, want 409", code)
		}
		if h.status(inFlight[0]) != hookbox.StatusProcessing {
			t.Errorf("in-flight event changed")
		}
		if code, _ := h.call("POST", "/admin/events/424242/replay"); code != 404 {
			t.Errorf("replay missing = %d", code)
		}

		// Bulk: a filter is required; dry run changes nothing.
		if code, _ := h.call("POST", "/admin/replay"); code != 400 {
			t.Errorf("bulk replay without a filter = %d, want 400", code)
		}
		// A limit is refused, not ignored (every match was replayed).
		if code, b := h.call("POST", "/admin/replay?status=dead&source=polar&limit=1"); code != 400 || !strings.Contains(string(b), "limit does not apply") {
			t.Errorf("bulk replay with a limit = %d %s, want 400 saying limit does not apply", code, b)
		}
		if h.status(dead[1]) != hookbox.StatusDead {
			t.Fatalf("a bulk replay refused for its limit replayed event %d", dead[1])
		}
		h.json("POST", "/admin/replay?status=dead&source=polar&dry_run=true", 200, &rep)
		if !rep.DryRun || !slices.Equal(rep.Replayed, dead[1:]) || h.status(dead[1]) != hookbox.StatusDead {
			t.Fatalf("dry bulk replay = %+v, status %s", rep, h.status(dead[1]))
		}
		h.json("POST", "/admin/replay?status=dead&source=polar&since=1h", 200, &rep)
		if rep.DryRun || !slices.Equal(rep.Replayed, dead[1:]) || h.status(dead[1]) != hookbox.StatusPending {
			t.Fatalf("bulk replay = %+v", rep)
		}
		if h.status(otherDead[0]) != hookbox.StatusDead {
			t.Errorf("another source's dead event was replayed")
		}
	})
}

func TestAdminPurge(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		old := time.Now().Add(-10 * 24 * time.Hour)
		oldDone := seed(t, h.st, "a", "t", hookbox.StatusDone, old, "1", "2", "3")
		oldDead := seed(t, h.st, "b", "t", hookbox.StatusDead, old, "4")
		newDone := seed(t, h.st, "c", "t", hookbox.StatusDone, time.Now(), "5")
		processing := seed(t, h.st, "d", "t", hookbox.StatusProcessing, old, "6")
		pending := seed(t, h.st, "e", "t", hookbox.StatusPending, old, "7")
		keep := slices.Concat(oldDead, newDone, processing, pending)
		exists := func(id int64) bool {
			_, err := h.st.Event(context.Background(), id)
			return err == nil
		}

		for _, q := range []string{"", "?days=x", "?days=-1", "?days=2&dry_run=maybe"} {
			if code, _ := h.call("POST", "/admin/purge"+q); code != 400 {
				t.Errorf("purge %q = %d, want 400", q, code)
			}
		}
		// Day counts past the cap (meant as "forever") must not wrap
		// time.Duration into a cut-off in the future and purge everything.
		for _, q := range []string{"?days=36501", "?days=106752", "?days=200000", "?days=200000&dry_run=true"} {
			code, body := h.call("POST", "/admin/purge"+q)
			if code != 400 || !strings.Contains(string(body), "days") || !strings.Contains(string(body), "36500") {
				t.Errorf("purge %q = %d %s, want 400 naming days and the cap", q, code, body)
			}
		}
		for _, id := range slices.Concat(oldDone, keep) {
			if !exists(id) {
				t.Fatalf("a refused purge deleted %d", id)
			}
		}
		var rep server.PurgeReply
		h.json("POST", "/admin/purge?days=7&dry_run=true&include_dead=true", 200, &rep)
		if rep.Done != 3 || rep.Dead != 1 || !rep.DryRun || !strings.Contains(rep.Note, "processed again") {
			t.Fatalf("dry purge = %+v", rep)
		}
		for _, id := range slices.Concat(oldDone, keep) {
			if !exists(id) {
				t.Fatalf("dry run deleted %d", id)
			}
		}
		h.json("POST", "/admin/purge?days=7", 200, &rep)
		if rep.Done != 3 || rep.Dead != 0 || rep.DryRun {
			t.Fatalf("purge = %+v", rep)
		}
		for _, id := range oldDone {
			if exists(id) {
				t.Errorf("old done event %d survived", id)
			}
		}
		for _, id := range keep {
			if !exists(id) {
				t.Errorf("event %d was purged", id)
			}
		}
		h.json("POST", "/admin/purge?days=7&include_dead", 200, &rep)
		if rep.Done != 0 || rep.Dead != 1 || exists(oldDead[0]) {
			t.Fatalf("purge with dead = %+v", rep)
		}
		for _, id := range slices.Concat(newDone, processing, pending) {
			if !exists(id) {
				t.Errorf("event %d was purged", id)
			}
		}
	})
}

func TestParseTime(t *testing.T) {
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Time{
		"":                     {},
		"24h":                  now.Add(-24 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"2025-03-01T10:00:00Z": time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC),
		"2025-03-01":           time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC),
	}
	for in, want := range cases {
		got, err := server.ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// Past hookbox.MaxDays a day count would overflow time.Duration.
	for _, in := range []string{"yesterday", "-1h", "-2d", "2025-13-01", "36501d", "200000d", "Infd", "NaNd"} {
		if _, err := server.ParseTime(in, now); err == nil {
			t.Errorf("ParseTime(%q) accepted", in)
		}
	}
}

// TestAdminRefusesUnstorableFilters: a source or type filter that is not
// valid UTF-8 or holds a NUL byte is a 400 naming the parameter on both
// stores (PostgreSQL text refuses such values, which was a 500; SQLite
// answered 200 with nothing).
func TestAdminRefusesUnstorableFilters(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		dead := seed(t, h.st, "polar", "t", hookbox.StatusDead, time.Now(), "1")
		cases := map[string]string{
			"GET /admin/events?source=%ff":                      "source",
			"GET /admin/events?source=pol%00ar":                 "source",
			"GET /admin/events?type=%c3":                        "type",
			"GET /admin/events?type=a%00":                       "type",
			"POST /admin/replay?status=dead&source=%fe%ff":      "source",
			"POST /admin/replay?status=dead&type=%00&dry_run=1": "type",
		}
		for req, param := range cases {
			method, path, _ := strings.Cut(req, " ")
			code, body := h.call(method, path)
			if code != 400 || !strings.Contains(string(body), param) {
				t.Errorf("%s = %d %s, want 400 naming %s", req, code, body, param)
			}
		}
		if h.status(dead[0]) != hookbox.StatusDead {
			t.Errorf("a refused bulk replay changed the event")
		}
	})
}

// TestAdminReplayClearedPayload: an event whose payload payload retention
// cleared is not replayed (it would be sent as an empty body under the
// original signature headers): one by id is a 409 that says why, a bulk
// replay leaves it out and lists it under no_payload, and the listing
// says payload_cleared.
func TestAdminReplayClearedPayload(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		cleared := seed(t, h.st, "polar", "t", hookbox.StatusDone, time.Now().Add(-48*time.Hour), "c1")
		if _, err := h.st.ClearPayloads(context.Background(), time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		dead := seed(t, h.st, "polar", "t", hookbox.StatusDead, time.Now(), "d1")
		for _, q := range []string{"?include_done=true", ""} {
			code, body := h.call("POST", fmt.Sprintf("/admin/events/%d/replay%s", cleared[0], q))
			if code != 409 || !strings.Contains(string(body), "payload was cleared") {
				t.Errorf("replay of a cleared event (%q) = %d %s, want 409 saying the payload was cleared", q, code, body)
			}
		}
		var rep struct {
			Replayed  []int64 `json:"replayed"`
			NoPayload []int64 `json:"no_payload"`
		}
		h.json("POST", "/admin/replay?source=polar&include_done=true&dry_run=true", 200, &rep)
		if !slices.Equal(rep.Replayed, dead) || !slices.Equal(rep.NoPayload, cleared) {
			t.Errorf("dry bulk replay = %+v", rep)
		}
		h.json("POST", "/admin/replay?source=polar&include_done=true", 200, &rep)
		if !slices.Equal(rep.Replayed, dead) || !slices.Equal(rep.NoPayload, cleared) {
			t.Errorf("bulk replay = %+v", rep)
		}
		if h.status(cleared[0]) != hookbox.StatusDone {
			t.Errorf("the cleared event was replayed")
		}
		var evs []map[string]any
		h.json("GET", "/admin/events?source=polar", 200, &evs)
		for _, e := range evs {
			if want := e["id"] == float64(cleared[0]); (e["payload_cleared"] == true) != want {
				t.Errorf("listing: event %v payload_cleared = %v, want %v", e["id"], e["payload_cleared"], want)
			}
		}
	})
}

// TestAdminMasksCredentialHeaders: the headers a sender signed or
// authenticated with (GitLab sends its shared secret itself) are masked in
// the event list and the event detail.
func TestAdminMasksCredentialHeaders(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		const token, sig = "glpat-the-shared-secret", "v1,c2lnbmF0dXJlLXZhbHVl"
		ids := storetest.Seed(t, h.st, hookbox.StatusDone, time.Now(), "", hookbox.Delivery{
			Source: "gitlab", DeliveryID: "g1", ReceivedAt: time.Now(), Payload: []byte(`{}`),
			Header: http.Header{"X-Gitlab-Token": {token}, "Webhook-Signature": {sig}, "X-Gitlab-Event": {"Push Hook"}},
		})
		for _, path := range []string{"/admin/events", fmt.Sprintf("/admin/events/%d", ids[0])} {
			code, body := h.call("GET", path)
			if code != 200 {
				t.Fatalf("%s: %d %s", path, code, body)
			}
			for _, secret := range []string{token, sig} {
				if bytes.Contains(body, []byte(secret)) {
					t.Errorf("%s shows %q: %s", path, secret, body)
				}
			}
			if !bytes.Contains(body, []byte("Push Hook")) {
				t.Errorf("%s hides a header that carries no credential: %s", path, body)
			}
		}
	})
}

// TestAdminRefusalsLogOncePerMinute: requests without the token, however
// many, make one warning a minute (the rest go to debug): whoever sends
// them chooses how many there are.
func TestAdminRefusalsLogOncePerMinute(t *testing.T) {
	var buf bytes.Buffer
	srv := server.New(server.Config{})
	server.RegisterAdmin(srv, server.AdminConfig{Token: adminToken,
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	h := &adminHarness{t: t, url: ts.URL}
	for i := range 200 {
		if code, _ := h.callAuth("GET", fmt.Sprintf("/admin/events?n=%d", i), "Bearer wrong-token"); code != http.StatusUnauthorized {
			t.Fatalf("request %d: %d, want 401", i, code)
		}
	}
	ts.Close() // every handler has returned
	if n := strings.Count(buf.String(), "admin request refused"); n != 1 {
		t.Errorf("%d lines about 200 refused requests, want 1:\n%s", n, buf.String())
	}
}

// TestAdminStoreDownIs503: when the database cannot be reached, every
// admin call that needs it answers 503 (try again) with Retry-After, not
// 500: the failure is a dependency's, not a bug of hookbox. PostgreSQL
// only: the outage is a faults.Proxy that refuses connections. (The 503s
// had no Retry-After, where the console's and ingest's have one.)
func TestAdminStoreDownIs503(t *testing.T) {
	dbURL := pgtest.URL(t)
	proxy, viaProxy := faults.URLProxyFor(t, dbURL)
	h := startAdmin(t, viaProxy, adminToken)
	seed(t, h.st, "down", "x", hookbox.StatusDead, time.Now().Add(-48*time.Hour), "1")
	proxy.Cut()
	for _, rt := range adminRoutes[:5] {
		req, err := http.NewRequest(rt.method, h.url+rt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s %s with the database down = %d %s, want 503", rt.method, rt.path, resp.StatusCode, b)
		} else if ra := resp.Header.Get("Retry-After"); ra != adminRetryAfterWant {
			t.Errorf("%s %s with the database down: Retry-After %q, want %q", rt.method, rt.path, ra, adminRetryAfterWant)
		}
	}
}

// adminRetryAfterWant is the Retry-After the admin API's 503s carry.
const adminRetryAfterWant = "5"

// TestAdminPurgeNamesBadDays: a days value that is not a number is named
// in the 400, as sent, quoted, cut and escaped (it is the client's text).
// The answer used to name -1, a stand-in the client never sent.
func TestAdminPurgeNamesBadDays(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		long := "1\x01" + strings.Repeat("x", 200)
		cases := map[string][]string{
			"abc":                  {`days: want a whole number of days from 0 to 36500, not "abc"`},
			"99999999999999999999": {`not "99999999999999999999"`},
			long:                   {`not "1\x01xxx`, `x"…`},
		}
		for days, wants := range cases {
			code, body := h.call("POST", "/admin/purge?days="+url.QueryEscape(days))
			var rep struct{ Error string }
			if err := json.Unmarshal(body, &rep); err != nil || code != http.StatusBadRequest {
				t.Fatalf("days=%q: %d %s, %v; want a 400 with an error", days, code, body, err)
			}
			for _, want := range wants {
				if !strings.Contains(rep.Error, want) {
					t.Errorf("days=%q: error %q lacks %q", days, rep.Error, want)
				}
			}
			if strings.Contains(rep.Error, "-1") || len(rep.Error) > 120 {
				t.Errorf("days=%q: error %q names -1 or is not bounded", days, rep.Error)
			}
		}
	})
}

// TestAdminPauseRefusesBadReason: a pause whose reason holds a NUL byte
// or text that is not UTF-8 is a 400 that pauses nothing, on both stores
// (PostgreSQL answered 500, SQLite paused with it); a good reason pauses.
func TestAdminPauseRefusesBadReason(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		for _, reason := range []string{"%00", "caf%E9"} {
			if code, b := h.call("POST", "/admin/targets/shop/app/pause?reason="+reason); code != http.StatusBadRequest ||
				!strings.Contains(string(b), "reason: want valid UTF-8 text without NUL bytes") {
				t.Errorf("pause with reason %s = %d %s, want 400 naming the reason", reason, code, b)
			}
		}
		if ps, err := h.st.Paused(context.Background()); err != nil || len(ps) != 0 {
			t.Fatalf("after refused pauses: %+v, %v", ps, err)
		}
		if code, b := h.call("POST", "/admin/targets/shop/app/pause?reason=caf%C3%A9"); code != http.StatusOK {
			t.Fatalf("pause = %d %s", code, b)
		}
		if ps, err := h.st.Paused(context.Background()); err != nil || len(ps) != 1 || ps[0].Reason != "café" {
			t.Errorf("paused %+v, %v; want shop/app with its reason", ps, err)
		}
	})
}
