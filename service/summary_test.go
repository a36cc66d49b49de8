package service_test

import (
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/internal/syncbuf"
)

// TestDeliveryLogLines: at info, deliveries make no line each but a
// "deliveries" summary, written at the latest when the service stops,
// counting stored, duplicate and refused ones; at debug each stored
// delivery has its own line too.
func TestDeliveryLogLines(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			var logs syncbuf.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))
			srv := e2e.StartLogged(t, "sources:\n  - name: s\n    scheme: none\n    id_header: X-Id\n    store_only: true\n",
				"sqlite:"+filepath.Join(t.TempDir(), "hookbox.db"), log, nil)
			post := func(source, id string, want int) {
				t.Helper()
				if rep := srv.Post(source, http.Header{"X-Id": {id}}, []byte(`{"id":"`+id+`"}`)); rep.Status != want {
					t.Fatalf("POST %s %s: %+v, want %d", source, id, rep, want)
				}
			}
			post("s", "d1", http.StatusAccepted)
			post("s", "d2", http.StatusAccepted)
			post("s", "d1", http.StatusAccepted)
			post("nope", "x", http.StatusNotFound)
			if err := srv.Stop(); err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			summary := ""
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "msg=deliveries") {
					summary = line
				}
			}
			for _, want := range []string{"level=INFO", "stored=2", "duplicate=1", "refused=1", "unavailable=0", "period="} {
				if !strings.Contains(summary, want) {
					t.Errorf("summary line %q lacks %s; log:\n%s", summary, want, out)
				}
			}
			if n := strings.Count(out, "msg=delivery "); (level == slog.LevelDebug && n != 3) || (level == slog.LevelInfo && n != 0) {
				t.Errorf("%d per-delivery lines at %v; log:\n%s", n, level, out)
			}
			if i, j := strings.Index(out, "msg=deliveries"), strings.Index(out, "msg=stopped"); i < 0 || j < i {
				t.Errorf("the summary is not written before stopped:\n%s", out)
			}
		})
	}
}
