package rejected_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/verify"
)

// TestUnverifiableTokenNotKept: the log keeps a token source's header so
// that a re-check can verify it, which it can only when the body was kept
// whole. A delivery refused for its token is refused on its headers alone
// (its body never read), and one whose body is longer than the log keeps
// is cut: keeping their token header would only store, in clear, the
// token the sender really uses (hookbox's copy being perhaps the wrong
// one). A delivery with the right token whose body was kept whole keeps
// it, to be verified again.
func TestUnverifiableTokenNotKept(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		const real, stale = "glpat-the-senders-real-token-0123", "glpat-a-stale-token-in-config-012"
		v, err := verify.New(verify.Config{Scheme: verify.SchemeToken, Header: "X-Gitlab-Token",
			Secrets: []string{stale}, IDHeader: "Idempotency-Key"})
		if err != nil {
			t.Fatal(err)
		}
		rec := rejected.NewRecorder(st, rejected.Options{MaxBodyBytes: 32})
		ts := httptest.NewServer(server.New(server.Config{
			Sources:    []server.Source{{Name: "gitlab", Verifier: v}},
			Ingest:     func(context.Context, hookbox.Delivery) (hookbox.Receipt, error) { return hookbox.Receipt{}, nil },
			Rejections: rec}))
		post := func(token, id, body string, want int) {
			t.Helper()
			req, _ := http.NewRequest("POST", ts.URL+"/webhooks/gitlab", bytes.NewReader([]byte(body)))
			req.Header.Set("X-Gitlab-Token", token)
			if id != "" {
				req.Header.Set("Idempotency-Key", id)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("answered %d, want %d", resp.StatusCode, want)
			}
		}
		post(real, "k-1", `{"object_kind":"push"}`, http.StatusUnauthorized)                                   // the token refused: body unread
		post(stale, "", `{"object_kind":"push","padding":"longer than the log keeps"}`, http.StatusBadRequest) // body cut by the log
		post(stale, "", `{"object_kind":"push"}`, http.StatusBadRequest)                                       // body kept whole
		ts.Close()
		rec.Close()
		rjs, err := st.Rejections(ctx, hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rjs) != 3 {
			t.Fatalf("%d rejections, %v", len(rjs), err)
		}
		for i, rj := range rjs {
			whole := i == 0 // newest first
			if rj.BodyComplete != whole {
				t.Fatalf("rejection %d: body kept whole %v, want %v", rj.ID, rj.BodyComplete, whole)
			}
			token := rj.Header.Get("X-Gitlab-Token")
			if whole && token != stale {
				t.Errorf("rejection %d, body kept whole: token header %q, want it kept to be verified again", rj.ID, token)
			}
			if !whole && token != "" {
				t.Errorf("rejection %d, which cannot be verified again, keeps the token header", rj.ID)
			}
			for k, vs := range rj.Header {
				if strings.Contains(strings.Join(vs, ","), real) {
					t.Errorf("rejection %d stores the sender's real token in clear (%s)", rj.ID, k)
				}
			}
		}
	})
}

// TestLongTokenNotKept: a token longer than the log keeps a header value
// would be cut, and a re-check refuses a cut header: the token is not kept
// at all, although the body was kept whole (it used to be stored cut to
// 400 bytes, in clear, for nothing).
func TestLongTokenNotKept(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		token := "tok-" + strings.Repeat("s", 600)
		v, err := verify.New(verify.Config{Scheme: verify.SchemeToken, Header: "X-Gitlab-Token",
			Secrets: []string{token}, IDHeader: "Idempotency-Key"})
		if err != nil {
			t.Fatal(err)
		}
		rec := rejected.NewRecorder(st, rejected.Options{})
		ts := httptest.NewServer(server.New(server.Config{
			Sources:    []server.Source{{Name: "gitlab", Verifier: v}},
			Ingest:     func(context.Context, hookbox.Delivery) (hookbox.Receipt, error) { return hookbox.Receipt{}, nil },
			Rejections: rec}))
		req, _ := http.NewRequest("POST", ts.URL+"/webhooks/gitlab", bytes.NewReader([]byte(`{"object_kind":"push"}`)))
		req.Header.Set("X-Gitlab-Token", token) // no Idempotency-Key: 400, the body read whole
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ts.Close()
		rec.Close()
		rjs, err := st.Rejections(context.Background(), hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rjs) != 1 || !rjs[0].BodyComplete {
			t.Fatalf("status %d; %d rejections, %v", resp.StatusCode, len(rjs), err)
		}
		if kept := rjs[0].Header.Get("X-Gitlab-Token"); kept != "" {
			t.Errorf("a token the log cuts, which no re-check can use, is kept in clear (%d bytes: %.30s…)", len(kept), kept)
		}
	})
}

// TestKeptTokenMaskedWithoutConfig: a token kept for a re-check is masked
// wherever the rejection is shown, even by a view that has neither the
// source's configuration nor a header name that marks a credential (what
// `rejected show|list --json` and `tail --json` do with --db alone); a
// re-check still verifies it, and admits the delivery without the token
// or the log's list of it. Masking went by header name or by the
// configuration only, so a custom token header (X-Shared) was printed in
// clear by the CLI run without --config.
func TestKeptTokenMaskedWithoutConfig(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		const token = "TokenSecretValue999"
		source := func(idHeader string) verify.Verifier {
			v, err := verify.New(verify.Config{Scheme: verify.SchemeToken, Header: "X-Shared", Secrets: []string{token}, IDHeader: idHeader})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		rec := rejected.NewRecorder(st, rejected.Options{})
		ts := httptest.NewServer(server.New(server.Config{
			Sources:    []server.Source{{Name: "tok", Verifier: source("X-Delivery-Id")}},
			Ingest:     func(context.Context, hookbox.Delivery) (hookbox.Receipt, error) { return hookbox.Receipt{}, nil },
			Rejections: rec}))
		req, _ := http.NewRequest("POST", ts.URL+"/webhooks/tok", bytes.NewReader([]byte(`{"id":"a"}`)))
		req.Header.Set("X-Shared", token)
		req.Header.Set("X-Request-Uuid", "uuid-1") // not the id header configured: 400, the body read whole
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ts.Close()
		rec.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("answered %d, want 400", resp.StatusCode)
		}
		rjs, err := st.Rejections(ctx, hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rjs) != 1 || rjs[0].Header.Get("X-Shared") != token {
			t.Fatalf("%d rejections (%v), want one keeping the token to verify again", len(rjs), err)
		}

		rj, err := st.Rejection(ctx, rjs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		v := server.ViewRejection(rj, redact.ShowHeader, true)
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), token) || !slices.Equal(v.Header["X-Shared"], []string{redact.Mask}) {
			t.Errorf("the view without the configuration shows the token: %s", b)
		}
		if !strings.Contains(string(b), "uuid-1") || strings.Contains(string(b), "\\ufffd") || strings.Contains(string(b), "\uFFFD") {
			t.Errorf("the view masks more than the token, or shows the log's list: %s", b)
		}

		res, err := rejected.Recheck(ctx, st, map[string]rejected.Source{"tok": {Verifier: source("X-Request-Uuid")}}, rejected.RecheckParams{})
		if err != nil || len(res.Admitted) != 1 || res.Admitted[0].EventID == 0 {
			t.Fatalf("re-check: %+v, %v", res, err)
		}
		ev, err := st.Event(ctx, res.Admitted[0].EventID)
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range ev.Header {
			if strings.ContainsRune(k, '\uFFFD') || strings.Contains(strings.Join(vs, ","), token) {
				t.Errorf("the admitted event holds the token or the log's list: %s: %q", k, vs)
			}
		}
	})
}

// TestHMACSignatureHeaderMaskedWithoutConfig: an hmac source's signature
// header, whose name the configuration chose (X-Sig says nothing of a
// signature), is masked wherever a refused delivery is shown, even by a
// view without the configuration (`rejected list --json` with --db
// alone): a sender set up wrong sends the secret itself there, and the
// CLI printed it in clear. A re-check still verifies a signature kept
// there, and the event it admits keeps the header as ingest does.
func TestHMACSignatureHeaderMaskedWithoutConfig(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		const secret = "HmacSecretValue-777"
		source := func(secret string) verify.Verifier {
			v, err := verify.New(verify.Config{Scheme: verify.SchemeHMAC, Header: "X-Sig", Secrets: []string{secret}, IDHeader: "X-Id"})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		rec := rejected.NewRecorder(st, rejected.Options{})
		ts := httptest.NewServer(server.New(server.Config{
			Sources:    []server.Source{{Name: "hm", Verifier: source("the-old-secret-1")}},
			Ingest:     func(context.Context, hookbox.Delivery) (hookbox.Receipt, error) { return hookbox.Receipt{}, nil },
			Rejections: rec}))
		send := func(id, sig string) {
			req, _ := http.NewRequest("POST", ts.URL+"/webhooks/hm", bytes.NewReader([]byte(`{"id":"`+id+`"}`)))
			req.Header.Set("X-Sig", sig)
			req.Header.Set("X-Id", id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("answered %d, want 401", resp.StatusCode)
			}
		}
		send("raw", secret)
		signed, err := verify.Sign(verify.Config{Scheme: verify.SchemeHMAC, Header: "X-Sig", Secrets: []string{secret}, IDHeader: "X-Id"},
			[]byte(`{"id":"signed"}`), "signed", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		send("signed", signed.Get("X-Sig"))
		ts.Close()
		rec.Close()

		rjs, err := st.Rejections(ctx, hookbox.RejectionFilter{WithBody: true})
		if err != nil || len(rjs) != 2 {
			t.Fatalf("%d rejections (%v), want 2", len(rjs), err)
		}
		for _, rj := range rjs {
			v := server.ViewRejection(rj, redact.ShowHeader, true)
			b, _ := json.Marshal(v)
			if strings.Contains(string(b), secret) || strings.Contains(string(b), signed.Get("X-Sig")) || !slices.Equal(v.Header["X-Sig"], []string{redact.Mask}) {
				t.Errorf("the view without the configuration shows the X-Sig header: %s", b)
			}
		}

		res, err := rejected.Recheck(ctx, st, map[string]rejected.Source{"hm": {Verifier: source(secret)}}, rejected.RecheckParams{})
		if err != nil || len(res.Admitted) != 1 || res.Admitted[0].EventID == 0 {
			t.Fatalf("re-check: %+v, %v", res, err)
		}
		ev, err := st.Event(ctx, res.Admitted[0].EventID)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Header.Get("X-Sig") != signed.Get("X-Sig") || len(ev.Header) != len(withoutMarks(ev.Header)) {
			t.Errorf("admitted event's headers = %v, want the signature kept and no list of the log's", ev.Header)
		}
	})
}

// withoutMarks is h without any header whose name is not a valid header
// name (the log's own list is named so that no sender can send it).
func withoutMarks(h http.Header) http.Header {
	out := http.Header{}
	for k, vs := range h {
		if !strings.ContainsRune(k, '\uFFFD') {
			out[k] = vs
		}
	}
	return out
}
