package tracing_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/tracing"
	"github.com/hookbox/hookbox/worker"
)

// TestEnabled: tracing is off by default and on for an OTLP exporter or
// endpoint; the off switches win; what hookbox cannot export to is an
// error naming the variable.
func TestEnabled(t *testing.T) {
	cases := []struct {
		env     map[string]string
		on      bool
		errWith string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, errWith: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, errWith: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, on: true},
	}
	for _, c := range cases {
		on, err := tracing.Enabled(func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
		if c.errWith != "" {
			if err == nil || !strings.Contains(err.Error(), c.errWith) {
				t.Errorf("%v: err = %v, want one naming %s", c.env, err, c.errWith)
			}
			continue
		}
		if err != nil || on != c.on {
			t.Errorf("%v: on = %v, err = %v; want %v", c.env, on, err, c.on)
		}
	}
}

// TestSpans: a delivery to a running hookbox makes a receive span (server
// kind, the reply's status) with verify and store spans under it; each
// attempt of a forward and an exec target has an attempt span, whose
// context reaches the app as a traceparent header (replacing the
// sender's, whose tracestate and baggage are dropped with it: they used
// to reach the app beside hookbox's traceparent) and the command as
// TRACEPARENT. A sender's traceparent is
// only a link of the receive span: its sampled flag and tracestate are
// not trusted.
func TestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.Install(tp)
	t.Cleanup(func() { tp.Shutdown(context.Background()) })

	var mu sync.Mutex
	var forwarded []string
	var senderContext []string // the sender's tracestate and baggage, when forwarded
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		forwarded = append(forwarded, r.Header.Get("Traceparent"))
		for _, k := range []string{"Tracestate", "Baggage"} {
			if v, ok := r.Header[k]; ok {
				senderContext = append(senderContext, fmt.Sprintf("%s: %q", k, v))
			}
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(app.Close)
	dir := t.TempDir()
	script := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s' \"$TRACEPARENT\" > \"$0.out\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := e2e.Start(t, `
sources:
  - name: fwd
    scheme: none
    id_header: X-Id
    forward: "`+app.URL+`"
  - name: run
    scheme: none
    id_header: X-Id
    exec: ["`+script+`"]
`, "sqlite:"+filepath.Join(dir, "hookbox.db"), nil)

	const senderTrace = "0af7651916cd43dd8448eb211c80319c"
	senderParent := "00-" + senderTrace + "-b7ad6b7169203331-01"
	rep := srv.Post("fwd", http.Header{"X-Id": {"d1"}, "Traceparent": {senderParent}, "Tracestate": {"sender=" + strings.Repeat("x", 200)},
		"Baggage": {"user.id=victim,tenant=other"}}, []byte(`{"a":1}`))
	if rep.Status != http.StatusAccepted {
		t.Fatalf("fwd: %+v", rep)
	}
	if rep := srv.Post("run", http.Header{"X-Id": {"d2"}}, []byte(`{"b":2}`)); rep.Status != http.StatusAccepted {
		t.Fatalf("run: %+v", rep)
	}
	if rep := srv.Post("fwd", http.Header{}, []byte(`{"a":1}`)); rep.Status != http.StatusBadRequest {
		t.Fatalf("no id: %+v", rep)
	}
	srv.WaitIdle(10 * time.Second)

	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	if n := len(byName["receive"]); n != 3 {
		t.Fatalf("%d receive spans, want 3; spans: %v", n, names(spans))
	}
	var fwdReceive tracetest.SpanStub
	for _, s := range byName["receive"] {
		if s.SpanKind != trace.SpanKindServer {
			t.Errorf("receive span kind %v", s.SpanKind)
		}
		if attr(s, "hookbox.source") == "fwd" && attr(s, "http.response.status_code") == "202" {
			fwdReceive = s
		}
	}
	if !fwdReceive.SpanContext.IsValid() {
		t.Fatalf("no receive span for fwd with status 202: %+v", byName["receive"])
	}
	// The sender's trace context is a link of the receive span, which
	// starts a trace of its own; the sender's tracestate is not kept.
	if fwdReceive.Parent.IsValid() || fwdReceive.SpanContext.TraceID().String() == senderTrace {
		t.Errorf("receive span's parent %v (trace %s): the sender's trace context must not be its parent", fwdReceive.Parent, fwdReceive.SpanContext.TraceID())
	}
	if len(fwdReceive.Links) != 1 || fwdReceive.Links[0].SpanContext.TraceID().String() != senderTrace ||
		fwdReceive.Links[0].SpanContext.SpanID().String() != "b7ad6b7169203331" || fwdReceive.Links[0].SpanContext.TraceState().Len() != 0 {
		t.Errorf("receive span's links %+v, want one to the sender's span, without its tracestate", fwdReceive.Links)
	}
	for _, name := range []string{"verify", "store"} {
		found := false
		for _, s := range byName[name] {
			found = found || s.Parent.SpanID() == fwdReceive.SpanContext.SpanID()
		}
		if !found {
			t.Errorf("no %s span under the receive span", name)
		}
	}

	attempts := byName["attempt"]
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2: %v", len(attempts), names(spans))
	}
	mu.Lock()
	got := append([]string(nil), forwarded...)
	// The app joins hookbox's trace only: the sender's tracestate and
	// baggage, which went along with hookbox's traceparent, are dropped.
	if len(senderContext) > 0 {
		t.Errorf("app got the sender's trace context beside hookbox's traceparent: %v", senderContext)
	}
	mu.Unlock()
	ran, err := os.ReadFile(script + ".out")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attempts {
		want := "00-" + a.SpanContext.TraceID().String() + "-" + a.SpanContext.SpanID().String() + "-01"
		switch attr(a, "hookbox.source") {
		case "fwd":
			if len(got) != 1 || got[0] != want {
				t.Errorf("forwarded traceparent %q, want the attempt span's %s", got, want)
			}
		case "run":
			if string(ran) != want {
				t.Errorf("exec TRACEPARENT %q, want %s", ran, want)
			}
		}
		if a.SpanKind != trace.SpanKindClient || attr(a, "hookbox.attempt") != "1" || attr(a, "hookbox.event_id") == "" {
			t.Errorf("attempt span: kind %v, attributes %v", a.SpanKind, a.Attributes)
		}
	}
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestHandlerAndTargetSpans: a Go handler's attempt runs in a "handle"
// span whose context the handler gets, with its error (masked) as the
// span's status; a named target's forward gets an "attempt" span too.
func TestHandlerAndTargetSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.Install(tp)
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(app.Close)
	dir := t.TempDir()
	var inSpan atomic.Bool
	srv := e2e.Start(t, `
sources:
  - name: lib
    scheme: none
    id_header: X-Id
  - name: fan
    scheme: none
    id_header: X-Id
    targets:
      - {name: app, forward: "`+app.URL+`"}
`, "sqlite:"+filepath.Join(dir, "hookbox.db"), func(svc *service.Service) error {
		svc.Pool.Handle("lib", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			inSpan.Store(trace.SpanFromContext(ctx).SpanContext().IsValid())
			return nil
		})
		return nil
	})
	for _, src := range []string{"lib", "fan"} {
		if rep := srv.Post(src, http.Header{"X-Id": {"h1"}}, []byte(`{}`)); rep.Status != http.StatusAccepted {
			t.Fatalf("%s: %+v", src, rep)
		}
	}
	srv.WaitIdle(10 * time.Second)
	var handle, attempt int
	for _, s := range exp.GetSpans() {
		switch {
		case s.Name == "handle" && attr(s, "hookbox.source") == "lib":
			handle++
		case s.Name == "attempt" && attr(s, "hookbox.source") == "fan/app":
			attempt++
		}
	}
	if handle != 1 || attempt != 1 || !inSpan.Load() {
		t.Errorf("handle spans %d, target attempt spans %d, handler saw its span: %v; want 1, 1, true (spans: %v)",
			handle, attempt, inSpan.Load(), names(exp.GetSpans()))
	}
}

// TestAttemptSpanCarriesTheEventsID: the attempt span of a named target's
// delivery carries the id of its event (the sender's 202, the receive
// span's hookbox.event_id), as Hookbox-Event-Id does, not the delivery's
// own row id, which no other span or reply names; a source's own event
// carries its id.
func TestAttemptSpanCarriesTheEventsID(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.Install(tp)
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	noop := tracing.Attempts(worker.TargetFunc(func(context.Context, *hookbox.Event) error { return nil }))
	for _, ev := range []*hookbox.Event{
		{ID: 9, Parent: 4, Source: "shop/billing", Target: "billing", DeliveryID: "d1", Attempts: 1},
		{ID: 5, Source: "shop", DeliveryID: "d2", Attempts: 1},
	} {
		if err := noop.Deliver(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for i, want := range []string{"4", "5"} {
		if got := attr(spans[i], "hookbox.event_id"); got != want {
			t.Errorf("attempt span of %s: hookbox.event_id %s, want %s", attr(spans[i], "hookbox.source"), got, want)
		}
	}
}
