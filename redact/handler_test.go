package redact_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/redact"
)

type config struct{ Token string }

type stringer string

func (s stringer) String() string { return string(s) }

// TestHandlerMasksEveryPart: whatever part of a record carries a secret, the
// output of both built-in handlers does not.
func TestHandlerMasksEveryPart(t *testing.T) {
	r := redact.New(adminToken, whsec)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			var h slog.Handler = slog.NewTextHandler(&buf, nil)
			if format == "json" {
				h = slog.NewJSONHandler(&buf, nil)
			}
			log := slog.New(redact.NewHandler(h, r))
			log = log.With("token", adminToken).WithGroup("g")
			log.Warn("attempt failed: "+adminToken,
				"err", fmt.Errorf("exec: output: POLAR=%s", whsec),
				"output", []byte("key "+whsecKey),
				"who", stringer("by "+adminToken),
				"cfg", config{Token: adminToken},
				slog.Group("inner", "v", whsecKey),
				adminToken, 1,
				"n", 42, "plain", "hello")
			out := buf.String()
			for _, secret := range []string{adminToken, whsecKey} {
				if strings.Contains(out, secret) {
					t.Errorf("log line holds %q:\n%s", secret, out)
				}
			}
			if n := strings.Count(out, redact.Mask); n != 8 {
				t.Errorf("%d masks, want 8:\n%s", n, out)
			}
			if !strings.Contains(out, "42") || !strings.Contains(out, "hello") {
				t.Errorf("lost plain attributes:\n%s", out)
			}
		})
	}
}

// TestHandlerKeepsValuesWithoutSecrets: a value without a secret keeps its
// type, so the JSON handler still writes a struct as an object.
func TestHandlerKeepsValuesWithoutSecrets(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(redact.NewHandler(slog.NewJSONHandler(&buf, nil), redact.New(adminToken)))
	log.Info("m", "cfg", config{Token: "public"}, "err", errors.New("plain"))
	if !strings.Contains(buf.String(), `"cfg":{"Token":"public"}`) || !strings.Contains(buf.String(), `"err":"plain"`) {
		t.Errorf("got %s", buf.String())
	}
}

func TestNewHandlerWithoutSecrets(t *testing.T) {
	h := slog.NewTextHandler(&bytes.Buffer{}, nil)
	if redact.NewHandler(h, redact.New("short")) != slog.Handler(h) {
		t.Error("a Redactor with nothing to mask wrapped the handler")
	}
}
