package service_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/verify"
)

// BenchmarkMailgunToken is what remembering Mailgun's token costs a
// delivery: signed deliveries over real HTTP to a running service, one
// source signing the body (standard-webhooks, no token) and one signing a
// token in it (mailgun, a store write of its own per delivery), on each
// store. Compare the two sources of one run, not absolutes.
func BenchmarkMailgunToken(b *testing.B) {
	const doc = `
sources:
  - {name: polar, scheme: standard-webhooks, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], store_only: true}
  - {name: mailgun, provider: mailgun, secrets: ["mailgun-signing-key-bench"], store_only: true}
`
	stores := map[string]func(b *testing.B) string{
		"sqlite":   func(b *testing.B) string { return "sqlite:" + b.TempDir() + "/hookbox.db" },
		"postgres": func(b *testing.B) string { return pgtest.URL(b) },
	}
	for _, store := range []string{"sqlite", "postgres"} {
		for _, source := range []string{"polar", "mailgun"} {
			b.Run(store+"/"+source, func(b *testing.B) {
				h := startWith(b, stores[store](b), doc)
				v := h.source(source).Verify()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
				var n atomic.Int64
				b.SetParallelism(16)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						id := fmt.Sprintf("ev-%d", n.Add(1))
						body := []byte(`{"event-data":{"id":"` + id + `","event":"delivered"},"type":"x","id":"` + id + `"}`)
						hdr, signed, err := verify.SignRequest(v, body, id, time.Now())
						if err != nil {
							b.Error(err)
							return
						}
						req, _ := http.NewRequest(http.MethodPost, h.url+"/webhooks/"+source, bytes.NewReader(signed))
						req.Header = hdr
						resp, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusAccepted {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				})
			})
		}
	}
}
