package rejected_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/verify"
)

// TestRecheckDoesNotStoreTheToken proves that a delivery a re-check admits
// is stored with the headers ingest would have stored, so the secret of a
// token-scheme source never reaches an event (and so neither the console,
// the API nor a target). Through the real server, recorder and store: a
// delivery with the right X-Gitlab-Token is refused with 400 (its id is in
// another header than the one configured), and the log keeps the token so
// that it can be verified again; once the id header is fixed, a re-check
// admits it, and the event holds neither the token header nor the token
// anywhere, and the same header names as an identical delivery ingested
// directly.
func TestRecheckDoesNotStoreTheToken(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		const token = "glpat-recheck-token-0123456789"
		ingest := ingestInto(st)
		tokenSource := func(idHeader string) verify.Verifier {
			v, err := verify.New(verify.Config{Scheme: verify.SchemeToken, Header: "X-Gitlab-Token", Secrets: []string{token}, IDHeader: idHeader})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		post := func(url, id string) int {
			req, err := http.NewRequest("POST", url+"/webhooks/gitlab", strings.NewReader(`{"object_kind":"push"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Gitlab-Token", token)
			req.Header.Set("X-Gitlab-Event-Uuid", id)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}

		// Misconfigured: the id is looked for in a header the sender does not send.
		rec := rejected.NewRecorder(st, rejected.Options{})
		ts := httptest.NewServer(server.New(server.Config{
			Sources:    []server.Source{{Name: "gitlab", Verifier: tokenSource("X-Delivery-Id")}},
			Ingest:     ingest,
			Rejections: rec,
		}))
		if status := post(ts.URL, "uuid-refused"); status != http.StatusBadRequest {
			t.Fatalf("misconfigured source answered %d, want 400", status)
		}
		ts.Close()  // waits for the handler, which records after replying
		rec.Close() // writes what was recorded
		rjs, err := st.Rejections(ctx, hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rjs) != 1 {
			t.Fatalf("rejections: %d, %v", len(rjs), err)
		}
		if rjs[0].Header.Get("X-Gitlab-Token") != token {
			t.Fatalf("the log did not keep the token to verify again: %q", rjs[0].Header)
		}

		// Fixed: the re-check admits it.
		fixed := tokenSource("X-Gitlab-Event-Uuid")
		res, err := rejected.Recheck(ctx, st, map[string]rejected.Source{"gitlab": {Verifier: fixed}}, rejected.RecheckParams{})
		if err != nil || len(res.Admitted) != 1 || res.Admitted[0].EventID == 0 {
			t.Fatalf("re-check: %+v, %v", res, err)
		}
		ev, err := st.Event(ctx, res.Admitted[0].EventID)
		if err != nil || ev.DeliveryID != "uuid-refused" {
			t.Fatalf("admitted event %+v, %v", ev, err)
		}
		if vs, ok := ev.Header["X-Gitlab-Token"]; ok {
			t.Errorf("admitted event stores the token header: %q", vs)
		}
		if b, _ := json.Marshal(ev); strings.Contains(string(b), token) || strings.Contains(string(ev.Payload), token) {
			t.Errorf("admitted event holds the token: %s", b)
		}

		// The same delivery ingested directly is stored with the same headers.
		ts = httptest.NewServer(server.New(server.Config{
			Sources: []server.Source{{Name: "gitlab", Verifier: fixed}},
			Ingest:  ingest,
		}))
		defer ts.Close()
		if status := post(ts.URL, "uuid-direct"); status != http.StatusAccepted {
			t.Fatalf("fixed source answered %d, want 202", status)
		}
		evs, err := st.Events(ctx, hookbox.Filter{})
		if err != nil || len(evs) != 2 {
			t.Fatalf("events: %d, %v", len(evs), err)
		}
		var direct hookbox.Event
		for _, e := range evs {
			if e.DeliveryID == "uuid-direct" {
				direct, err = st.Event(ctx, e.ID)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		got, want := slices.Sorted(maps.Keys(ev.Header)), slices.Sorted(maps.Keys(direct.Header))
		if !slices.Equal(got, want) {
			t.Errorf("admitted event's headers %q, ingested one's %q", got, want)
		}
	})
}

// TestRecheckAllowIPsNeedsTheClientAddress proves that a source's
// AllowIPs admit, at re-check, only a rejection recorded from a client
// address they contain: one from another address is refused with
// ReasonAddressRefused, and one whose client address the log does not
// hold (none, or a connection's "host:port", which the server records
// when it cannot tell the client, e.g. behind a proxy whose headers do
// not parse) with ReasonAddressUnknown, even when that host is allowed.
// The allowed address, IPv4 or IPv4-mapped IPv6, passes. Nothing refused
// is stored.
func TestRecheckAllowIPsNeedsTheClientAddress(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		v, err := verify.New(verify.Config{Scheme: verify.SchemeNone, IDField: "id"})
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct{ remote, want string }{
			{"10.9.9.9", ""},
			{"::ffff:10.9.9.9", ""},
			{"127.0.0.1", rejected.ReasonAddressRefused},
			{"", rejected.ReasonAddressUnknown},
			{"10.9.9.9:4711", rejected.ReasonAddressUnknown},
			{"not an address", rejected.ReasonAddressUnknown},
		}
		var rjs []hookbox.Rejection
		for i, c := range cases {
			rj := rejection("internal", fmt.Sprintf(`{"id":"d%d"}`, i))
			rj.UnknownSource, rj.Status, rj.RemoteAddr = true, http.StatusNotFound, c.remote
			rjs = append(rjs, rj)
		}
		if _, err := st.AddRejections(ctx, rjs, hookbox.RejectionBounds{}); err != nil {
			t.Fatal(err)
		}
		stored, err := st.Rejections(ctx, hookbox.RejectionFilter{})
		if err != nil || len(stored) != len(cases) {
			t.Fatalf("rejections: %d, %v", len(stored), err)
		}
		want := map[int64]string{} // rejection id → the reason wanted, "" to admit
		for _, rj := range stored {
			for _, c := range cases {
				if c.remote == rj.RemoteAddr {
					want[rj.ID] = c.want
				}
			}
		}
		src := rejected.Source{Verifier: v, AllowIPs: []netip.Prefix{netip.MustParsePrefix("10.9.9.9/32")}}
		res, err := rejected.Recheck(ctx, st, map[string]rejected.Source{"internal": src}, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range res.Admitted {
			if want[a.RejectionID] != "" {
				t.Errorf("rejection %d admitted, want refused: %s", a.RejectionID, want[a.RejectionID])
			}
		}
		for _, r := range res.Refused {
			if r.Reason != want[r.RejectionID] {
				t.Errorf("rejection %d refused: %s; want %q", r.RejectionID, r.Reason, want[r.RejectionID])
			}
		}
		if len(res.Admitted) != 2 || len(res.Refused) != 4 {
			t.Errorf("re-check admitted %d and refused %d, want 2 and 4: %+v", len(res.Admitted), len(res.Refused), res)
		}
		evs, err := st.Events(ctx, hookbox.Filter{Source: "internal"})
		if err != nil || len(evs) != 2 {
			t.Errorf("events stored: %d, %v; want the 2 admitted", len(evs), err)
		}
	})
}
