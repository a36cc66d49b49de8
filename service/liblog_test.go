package service_test

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/tracing"
)

// TestLibraryErrorsInTheServiceLog: what net/http and OpenTelemetry log
// about their own failures goes to the service's log, in its format (JSON
// here) and through its redaction, at most a line a minute each. They
// wrote plain text to stderr, past the log's JSON parsers: net/http a
// handler's panic with its stack (here a handler an embedding program
// added), OpenTelemetry each failed export of traces.
func TestLibraryErrorsInTheServiceLog(t *testing.T) {
	tracing.Install(sdktrace.NewTracerProvider()) // tracing on, exporting nowhere
	logs := &syncbuf.Buffer{}
	srv := e2e.StartLogged(t, `
sources:
  - name: open
    scheme: none
    id_header: X-Id
    store_only: true
`, dbtest.SQLiteURL(t), slog.New(slog.NewJSONHandler(logs, nil)), func(svc *service.Service) error {
		svc.Server.Handle("GET /panics", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("handler bug") }))
		return nil
	})
	for range 5 {
		if resp, err := http.Get(srv.URL + "/panics"); err == nil {
			resp.Body.Close() // net/http closes the connection of a panicking handler
		}
	}
	otel.Handle(errors.New("traces export: connection refused"))
	var panics, export int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.HasPrefix(line, "{") {
			t.Errorf("a line not in the service's JSON: %s", line)
		}
		if strings.Contains(line, "http: panic serving") && strings.Contains(line, "handler bug") {
			panics++
		}
		if strings.Contains(line, "traces export") {
			export++
		}
	}
	if panics != 1 || export != 1 {
		t.Errorf("the service's log has %d lines about the panics of 5 requests (want 1) and %d about the failed export (want 1):\n%s", panics, export, logs)
	}
}
