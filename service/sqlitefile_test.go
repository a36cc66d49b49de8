package service_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
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
