package config

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/verify"
)

// TestPresetKeepsSourcesIDOptional: a source that sets id_optional: true
// under a provider whose preset names the place of the id (gitlab:
// Idempotency-Key, which only recent GitLab releases send) or whose scheme
// has a default place (paddle: event_id) must either get what it asked
// for or be refused at load. WithPreset overwrites it with the preset's
// false, silently.
func TestPresetKeepsSourcesIDOptional(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"gitlab", "sources:\n  - {name: gl, provider: gitlab, secrets: [tok], id_optional: true, store_only: true}\n"},
		{"paddle", "sources:\n  - {name: pd, provider: paddle, secrets: [pdl_ntfset_x], id_optional: true, store_only: true}\n"},
		{"shopify", "sources:\n  - {name: sh, provider: shopify, secrets: [x], id_optional: true, store_only: true}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err != nil {
				return // refused at load: acceptable
			}
			if got := c.Sources[0].Verify().IDOptional; !got {
				t.Errorf("%s: id_optional: true was accepted at load but dropped: Verify().IDOptional = false", tc.name)
			}
		})
	}
	// End to end for gitlab: an older GitLab sends no Idempotency-Key.
	c, err := Parse([]byte("sources:\n  - {name: gl, provider: gitlab, secrets: [tok], id_optional: true, store_only: true}\n"))
	if err != nil {
		return
	}
	v, err := verify.New(c.Sources[0].Verify())
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Gitlab-Token", "tok")
	h.Set("X-Gitlab-Event", "Push Hook")
	if _, err := v.Verify(verify.Request{Header: h, Body: []byte(`{"object_kind":"push"}`)}); err != nil {
		t.Errorf("gitlab source with id_optional: true refuses a delivery without Idempotency-Key: %v", err)
	}
}

// TestPresetKeepsSourcesIDOptionalFalse: explicit keys override a preset,
// but the slack preset turned on a source's written id_optional: false
// (refuse deliveries without an event_id), and config check printed
// true: a bool could not tell false written from no key at all.
func TestPresetKeepsSourcesIDOptionalFalse(t *testing.T) {
	c, err := Parse([]byte("sources:\n  - {name: sl, provider: slack, secrets: [slack-signing-secret-long], id_optional: false, store_only: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].Verify().IDOptional {
		t.Error("id_optional: false written under the slack preset: Verify().IDOptional = true")
	}
	c, err = Parse([]byte("sources:\n  - {name: sl, provider: slack, secrets: [slack-signing-secret-long], store_only: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Sources[0].Verify().IDOptional {
		t.Error("the slack preset without id_optional: Verify().IDOptional = false, want the preset's true")
	}
}

// TestIDOptionalOnFixedIDScheme: id_optional means nothing to the schemes
// whose id is fixed (stripe, github, standard-webhooks), as id_header and
// id_field do not; it should be refused at load like them, not ignored.
func TestIDOptionalOnFixedIDScheme(t *testing.T) {
	for _, y := range []string{
		"sources:\n  - {name: s, scheme: stripe, secrets: [whsec_x], id_optional: true, store_only: true}\n",
		"sources:\n  - {name: g, scheme: github, secrets: [x], id_optional: true, store_only: true}\n",
		"sources:\n  - {name: w, scheme: standard-webhooks, secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw], id_optional: true, store_only: true}\n",
	} {
		_, err := Parse([]byte(y))
		if err == nil || !strings.Contains(err.Error(), "id_optional") {
			t.Errorf("%s: id_optional on a fixed-id scheme: err = %v, want a load error naming id_optional", strings.TrimSpace(y), err)
		}
	}
}
