package service_test

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/internal/syncbuf"
)

// TestSQLiteFileDeleted503: the database file is deleted under a running
// hookbox. SQLite would go on storing deliveries in the file it has open,
// which no longer has a name, and answering 202 for deliveries gone at the
// next start; instead every delivery, a resent stored one included, is
// answered 503 with Retry-After, and /readyz says not ready.
func TestSQLiteFileDeleted503(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookbox.db")
	h := start(t, "sqlite:"+path)
	if r := do(t, h.signed("polar", "m-1", []byte(`{}`))); r.status != http.StatusAccepted {
		t.Fatalf("before: %+v, want 202", r)
	}
	if code, body := readyz(t, h.url); code != http.StatusOK {
		t.Fatalf("/readyz = %d %s before the file was deleted", code, body)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m-2", "m-1", "m-3"} {
		r := do(t, h.signed("polar", id, []byte(`{}`)))
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Errorf("delivery %s after the file was deleted: %+v, want 503 with Retry-After", id, r)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := readyz(t, h.url)
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %s 10 s after the file was deleted, want 503", code, body)
		}
	}
}

// TestSQLiteFileGoneLoggedToTheServiceLog: the store's line saying its
// file was deleted goes to the service's log, in its format (JSON here)
// and through its redaction; it went to Go's default logger, as plain
// text on stderr.
func TestSQLiteFileGoneLoggedToTheServiceLog(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	logs := &syncbuf.Buffer{}
	srv := e2e.StartLogged(t, `
sources:
  - name: open
    scheme: none
    id_header: X-Id
    store_only: true
`, dbURL, slog.New(slog.NewJSONHandler(logs, nil)), nil)
	if err := os.Remove(strings.TrimPrefix(dbURL, "sqlite:")); err != nil {
		t.Fatal(err)
	}
	if r := srv.Post("open", http.Header{"X-Id": {"after"}}, []byte(`{}`)); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("delivery after the file was deleted: %+v, want 503", r)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "while hookbox had it open") {
			if !strings.HasPrefix(line, "{") {
				t.Errorf("the line is not in the service's JSON: %s", line)
			}
			return
		}
	}
	t.Errorf("the service's log does not say the file was deleted:\n%s", logs.String())
}
