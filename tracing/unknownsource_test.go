package tracing_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hookbox/hookbox/internal/e2e"
	"github.com/hookbox/hookbox/tracing"
)

// TestUnknownSourceSpanBounded: a request to a source nobody configured
// is an unauthenticated sender's to make, with any name in its path. Its
// receive span carries hookbox.source "" for it, as the metrics count it
// under source="": the span carried the name as it came, newlines and
// ANSI escapes included, and a new value for every path.
func TestUnknownSourceSpanBounded(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.Install(tp)
	t.Cleanup(func() { tp.Shutdown(context.Background()) })

	srv := e2e.Start(t, `
sources:
  - name: shop
    scheme: none
    id_header: X-Id
    store_only: true
`, "sqlite:"+filepath.Join(t.TempDir(), "hookbox.db"), nil)

	const probes = 20
	for i := 0; i < probes; i++ {
		// /webhooks/probe-i%0A%1B[31mFAKE level=ERROR
		path := fmt.Sprintf("/webhooks/probe-%d%%0A%%1B%%5B31mFAKE%%20level=ERROR", i)
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", path, resp.StatusCode)
		}
	}

	values := map[string]bool{}
	n := 0
	for _, s := range exp.GetSpans() {
		if s.Name != "receive" {
			continue
		}
		n++
		for _, a := range s.Attributes {
			if a.Key != tracing.AttrSource {
				continue
			}
			v := a.Value.AsString()
			values[v] = true
			if strings.IndexFunc(v, unicode.IsControl) >= 0 {
				t.Errorf("receive span's hookbox.source holds control characters from the request path: %q", v)
			}
		}
	}
	if n != probes {
		t.Fatalf("%d receive spans, want %d", n, probes)
	}
	for v := range values {
		if v != "" && v != "shop" {
			t.Errorf("hookbox.source = %q: a name no source has, chosen by the sender (%d distinct values from %d requests)", v, len(values), probes)
			break
		}
	}
}
