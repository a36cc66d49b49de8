package redact_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
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

type inner struct{ Token string }

type outer struct{ In *inner }

type upload struct{ Body []byte }

// TestHandlerMasksEncodedValues: a secret inside a value the built-in
// handlers print in an encoding of their own does not reach the output of
// either: a json.RawMessage (a named byte slice, written verbatim by the
// JSON handler and as a quoted string by the text one), a struct reaching
// the secret through a pointer (followed by the JSON handler, not by %+v),
// and a struct with a []byte field (base64 in JSON, decimal bytes in %+v).
// Neither the secret nor its base64 nor its decimal bytes show, nor the
// base64 of the whole field.
func TestHandlerMasksEncodedValues(t *testing.T) {
	r := redact.New(adminToken)
	body := []byte("key " + adminToken) // its base64 does not contain the token's
	forms := []string{
		adminToken,
		base64.StdEncoding.EncodeToString([]byte(adminToken)),
		base64.StdEncoding.EncodeToString(body),
		strings.Trim(fmt.Sprint([]byte(adminToken)), "[]"), // decimal bytes
	}
	values := []struct {
		name string
		v    any
	}{
		{"RawMessage", json.RawMessage(`{"token":"` + adminToken + `"}`)},
		{"pointer field", outer{In: &inner{Token: adminToken}}},
		{"bytes field", upload{Body: body}},
	}
	for _, val := range values {
		for _, format := range []string{"text", "json"} {
			t.Run(val.name+"/"+format, func(t *testing.T) {
				var buf bytes.Buffer
				var h slog.Handler = slog.NewTextHandler(&buf, nil)
				if format == "json" {
					h = slog.NewJSONHandler(&buf, nil)
				}
				slog.New(redact.NewHandler(h, r)).Info("m", "v", val.v)
				out := buf.String()
				for _, form := range forms {
					if strings.Contains(out, form) {
						t.Errorf("log line holds %q:\n%s", form, out)
					}
				}
				if !strings.Contains(out, redact.Mask) {
					t.Errorf("no mask:\n%s", out)
				}
			})
		}
	}
}
