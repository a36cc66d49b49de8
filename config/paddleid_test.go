package config

import "testing"

// TestPaddleIDHeaderDedupesByBody: a paddle source whose id comes from
// an unsigned header (id_header) has no signed id; like hmac, twilio and
// token it must dedupe by body, or a captured delivery is stored again
// under a fresh header value within the tolerance.
func TestPaddleIDHeaderDedupesByBody(t *testing.T) {
	s := Source{Provider: "paddle", Secrets: []string{"pdl_ntfset_0123456789"}, IDHeader: "X-Request-Id"}
	if err := checkVerifier(s, false); err != nil {
		t.Fatalf("config refused: %v", err)
	}
	if !s.DedupesByBody() {
		t.Fatal("paddle source with id_header (unsigned id) does not dedupe by body")
	}
}
