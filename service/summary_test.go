package service_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/service"
)

// TestDeliveryLogLines: at info, deliveries make no line each but a
// "deliveries" summary, written at the latest when the service stops,
// counting stored, duplicate and refused ones; at debug each stored
// delivery has its own line too.
func TestDeliveryLogLines(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			cfg, err := config.Parse([]byte("sources:\n  - name: s\n    scheme: none\n    id_header: X-Id\n    store_only: true\n"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.DB = "sqlite:" + filepath.Join(t.TempDir(), "hookbox.db")
			var logs syncBuffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))
			ctx, cancel := context.WithCancel(context.Background())
			svc, err := service.New(ctx, cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- svc.Serve(ctx, ln) }()
			post := func(path, id string, want int) {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+path, strings.NewReader(`{"id":"`+id+`"}`))
				req.Header.Set("X-Id", id)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Fatalf("POST %s %s: %d, want %d", path, id, resp.StatusCode, want)
				}
			}
			post("/webhooks/s", "d1", http.StatusAccepted)
			post("/webhooks/s", "d2", http.StatusAccepted)
			post("/webhooks/s", "d1", http.StatusAccepted)
			post("/webhooks/nope", "x", http.StatusNotFound)
			cancel()
			if err := <-done; err != nil {
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
			if n := strings.Count(out, "msg=delivery "); (level == slog.LevelDebug) != (n == 3) || (level == slog.LevelInfo && n != 0) {
				t.Errorf("%d per-delivery lines at %v; log:\n%s", n, level, out)
			}
			if i, j := strings.Index(out, "msg=deliveries"), strings.Index(out, "msg=stopped"); i < 0 || j < i {
				t.Errorf("the summary is not written before stopped:\n%s", out)
			}
		})
	}
}
