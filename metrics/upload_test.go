package metrics_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
)

// TestSlowUploadIsNotASlowCommit: hookbox_ingest_seconds runs from the
// request's start, so a sender's slow upload shows in it; the alert on
// slow commits (HookboxIngestSlow, "a busy disk or database") read it, so
// a slow link, or anyone slowly replaying a captured delivery, sent the
// operator to look at the disk. hookbox_ingest_store_seconds, which the
// alert now reads, is the database's share: from the body read and
// verified to the commit. Over real HTTP to a real SQLite file.
func TestSlowUploadIsNotASlowCommit(t *testing.T) {
	srv := e2e.Start(t, `
sources:
  - name: open
    scheme: none
    id_header: X-Id
    store_only: true
`, dbtest.SQLiteURL(t), nil)
	const stall = 2 * time.Second
	body := []byte(`{"type":"slow.upload","n":12345}`)
	pr, pw := io.Pipe()
	go func() {
		pw.Write(body[:10])
		time.Sleep(stall) // the sender's slow link
		pw.Write(body[10:])
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/open", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	req.Header.Set("X-Id", "slow-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("slow upload: %s, want 202", resp.Status)
	}
	// A refusal waits for no commit and is not observed.
	if r := srv.Post("open", nil, body); r.Status != http.StatusBadRequest {
		t.Fatalf("delivery without its id header: %+v, want 400", r)
	}

	got := scrape(t, srv.URL+"/metrics")
	// Less a margin: the stall's clock starts when the pipe's first bytes
	// are taken, which may come before the server has read the headers and
	// started its own.
	if n, sum := got["hookbox_ingest_seconds_count"], got["hookbox_ingest_seconds_sum"]; n != 1 || sum < (stall-500*time.Millisecond).Seconds() {
		t.Errorf("hookbox_ingest_seconds: count %v, sum %.2f s; want 1 delivery that took about the %v upload", n, sum, stall)
	}
	// The database's share leaves the upload out: what the whole request
	// took less it is the upload, at least the stall (less the margin
	// above). Not a bound on the commit itself, which a loaded machine
	// can make take a second; a slow commit adds to both sums alike.
	n, sum := got["hookbox_ingest_store_seconds_count"], got["hookbox_ingest_store_seconds_sum"]
	if upload := got["hookbox_ingest_seconds_sum"] - sum; n != 1 || upload < (stall-500*time.Millisecond).Seconds() {
		t.Errorf("hookbox_ingest_store_seconds: count %v, sum %.2f s, %.2f s less than the request's; want 1 delivery, without the %v upload", n, sum, upload, stall)
	}
}
