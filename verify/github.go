package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// Canonical keys of the GitHub headers.
var (
	githubSignatureHeader = http.CanonicalHeaderKey("X-Hub-Signature-256")
	githubDeliveryHeader  = http.CanonicalHeaderKey("X-GitHub-Delivery")
	githubEventHeader     = http.CanonicalHeaderKey("X-GitHub-Event")
)

var (
	errGitHubMissing    = unauthorized("github: missing X-Hub-Signature-256 header")
	errGitHubMalformed  = unauthorized("github: malformed X-Hub-Signature-256 header (want sha256=<64 hex digits>)")
	errGitHubNoMatch    = unauthorized("github: signature does not match")
	errGitHubNoDelivery = malformed("github: missing X-GitHub-Delivery header")
)

// githubVerifier verifies GitHub's scheme: "X-Hub-Signature-256:
// sha256=<hex>", an HMAC-SHA256 over the body keyed with the secret. The
// delivery id is X-GitHub-Delivery, the event type X-GitHub-Event.
type githubVerifier struct {
	keys []*macKey
}

func newGitHub(cfg Config) *githubVerifier {
	v := &githubVerifier{}
	for _, s := range cfg.Secrets {
		v.keys = append(v.keys, newMACKey(sha256.New, []byte(s)))
	}
	return v
}

// parseHeader decodes the signature header of r into sig.
func (v *githubVerifier) parseHeader(r Request, sig *[sha256.Size]byte) error {
	h, ok := headerValue(r.Header, githubSignatureHeader)
	if !ok || h == "" {
		return absent(r.Header, errGitHubMissing, githubSignatureHeader)
	}
	if !parseGitHubSignature(h, sig) {
		return errGitHubMalformed
	}
	return nil
}

// CheckHeader implements Verifier.
func (v *githubVerifier) CheckHeader(r Request) error {
	var sig [sha256.Size]byte
	return v.parseHeader(r, &sig)
}

// Verify implements Verifier.
func (v *githubVerifier) Verify(r Request) (Result, error) {
	var sig [sha256.Size]byte
	if err := v.parseHeader(r, &sig); err != nil {
		return Result{}, err
	}
	if !matchBody(v.keys, r.Body, sig[:]) {
		return Result{}, errGitHubNoMatch
	}
	id, _ := headerValue(r.Header, githubDeliveryHeader)
	if id == "" {
		return Result{}, absent(r.Header, errGitHubNoDelivery, githubDeliveryHeader)
	}
	typ, _ := headerValue(r.Header, githubEventHeader)
	return Result{DeliveryID: id, EventType: typ}, nil
}

// parseGitHubSignature decodes "sha256=<64 hex digits>" (already trimmed)
// into dst.
func parseGitHubSignature(h string, dst *[sha256.Size]byte) bool {
	hexSig, ok := strings.CutPrefix(h, "sha256=")
	if !ok || len(hexSig) != 2*sha256.Size {
		return false
	}
	var src [2 * sha256.Size]byte
	copy(src[:], hexSig)
	_, err := hex.Decode(dst[:], src[:])
	return err == nil
}

// matchBody reports whether the MAC of body under any of keys equals sig.
func matchBody(keys []*macKey, body, sig []byte) bool {
	for _, k := range keys {
		st := k.get()
		ok := hmac.Equal(st.mac(nil, body), sig)
		k.put(st)
		if ok {
			return true
		}
	}
	return false
}

func (v *githubVerifier) sign(body []byte, deliveryID string, _ time.Time) (http.Header, error) {
	if err := checkSignID("github", deliveryID); err != nil {
		return nil, err
	}
	st := v.keys[0].get()
	sig := "sha256=" + hex.EncodeToString(st.mac(nil, body))
	v.keys[0].put(st)
	h := make(http.Header, 2)
	h.Set(githubSignatureHeader, sig)
	h.Set(githubDeliveryHeader, deliveryID)
	return h, nil
}
