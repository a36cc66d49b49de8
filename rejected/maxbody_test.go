package rejected_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/verify"
)

// TestRecheckKeepsSourceBodyLimit: ingest answers 413 to a body over
// the source's max_body_bytes; a re-check verifies kept bodies against the
// current configuration but never asks the source's limit, so a body kept
// whole (under rejected.max_body_bytes) that the source now refuses as too
// large is admitted.
func TestRecheckKeepsSourceBodyLimit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		const secret = "HmacSecretValue-777"
		cfg, err := config.Parse([]byte(`
sources:
  - name: hm
    scheme: hmac
    header: X-Sig
    id_header: X-Id
    secrets: ["` + secret + `"]
    max_body_bytes: 64
    exec: ["true"]
`))
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"id":"big","padding":"` + strings.Repeat("x", 200) + `"}`)
		h, err := verify.Sign(verify.Config{Scheme: verify.SchemeHMAC, Header: "X-Sig", Secrets: []string{secret}, IDHeader: "X-Id"}, body, "big", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		hdr := http.Header{"X-Sig": h.Values("X-Sig"), "X-Id": {"big"}, "Content-Type": {"application/json"}}
		if _, err := st.AddRejections(ctx, []hookbox.Rejection{{Source: "hm", ReceivedAt: time.Now(), RemoteAddr: "192.0.2.1",
			Status: http.StatusUnauthorized, Reason: "no signature matches", Header: hdr,
			BodySize: int64(len(body)), Body: bytes.Clone(body), BodyComplete: true}}, hookbox.RejectionBounds{MaxCount: 100}); err != nil {
			t.Fatal(err)
		}
		sources, err := service.RecheckSources(cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := rejected.Recheck(ctx, st, sources, rejected.RecheckParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) != 0 {
			t.Errorf("a %d-byte body over the source's max_body_bytes 64 (ingest answers 413) was admitted by a re-check: %+v", len(body), res)
		}
	})
}
