package verify

import (
	"strings"
	"testing"
	"time"
)

func ghHdr(sig, delivery, event string) map[string][]string {
	h := hdr()
	if sig != "" {
		h.Set("X-Hub-Signature-256", sig)
	}
	if delivery != "" {
		h.Set("X-GitHub-Delivery", delivery)
	}
	if event != "" {
		h.Set("X-GitHub-Event", event)
	}
	return h
}

func TestGitHubVerify(t *testing.T) {
	body := []byte(`{"action":"opened","number":1}`)
	const delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	sigA := "sha256=" + hexMAC(ghSecretA, body)
	sigB := "sha256=" + hexMAC(ghSecretB, body)
	def := Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretA}}
	ok := Result{DeliveryID: delivery, EventType: "pull_request"}

	cases := []verifyCase{
		{name: "valid", header: ghHdr(sigA, delivery, "pull_request"), body: body, want: ok},
		{name: "valid without event", header: ghHdr(sigA, delivery, ""), body: body, want: Result{DeliveryID: delivery}},
		{name: "upper-case hex", header: ghHdr("sha256="+strings.ToUpper(hexMAC(ghSecretA, body)), delivery, "pull_request"), body: body, want: ok},
		{name: "surrounding whitespace", header: ghHdr(" "+sigA+"\t", delivery, "pull_request"), body: body, want: ok},
		{name: "empty body", header: ghHdr("sha256="+hexMAC(ghSecretA, nil), delivery, "ping"), body: nil, want: Result{DeliveryID: delivery, EventType: "ping"}},
		{name: "tampered body", header: ghHdr(sigA, delivery, "pull_request"), body: []byte(`{"action":"closed","number":1}`),
			wantErr: ErrUnauthorized, errText: "github: signature does not match"},
		{name: "wrong secret", header: ghHdr(sigB, delivery, "pull_request"), body: body, wantErr: ErrUnauthorized, errText: "does not match"},
		{name: "missing signature", header: ghHdr("", delivery, "pull_request"), body: body, wantErr: ErrUnauthorized, errText: "github: missing X-Hub-Signature-256 header"},
		{name: "legacy sha1 header only", header: hdr("X-Hub-Signature", "sha1=0000", "X-GitHub-Delivery", delivery), body: body,
			wantErr: ErrUnauthorized, errText: "missing X-Hub-Signature-256"},
		{name: "no prefix", header: ghHdr(hexMAC(ghSecretA, body), delivery, ""), body: body, wantErr: ErrUnauthorized, errText: "malformed X-Hub-Signature-256"},
		{name: "sha1 prefix", header: ghHdr("sha1="+hexMAC(ghSecretA, body), delivery, ""), body: body, wantErr: ErrUnauthorized, errText: "malformed"},
		{name: "short hex", header: ghHdr(sigA[:len(sigA)-2], delivery, ""), body: body, wantErr: ErrUnauthorized, errText: "malformed"},
		{name: "long hex", header: ghHdr(sigA+"00", delivery, ""), body: body, wantErr: ErrUnauthorized, errText: "malformed"},
		{name: "not hex", header: ghHdr("sha256="+strings.Repeat("g", 64), delivery, ""), body: body, wantErr: ErrUnauthorized, errText: "malformed"},
		{name: "rotated secrets second matches", cfg: Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretA, ghSecretB}},
			header: ghHdr(sigB, delivery, "pull_request"), body: body, want: ok},
		{name: "missing delivery", header: ghHdr(sigA, "", "pull_request"), body: body, wantErr: ErrMalformed, errText: "github: missing X-GitHub-Delivery header"},
		{name: "missing delivery and bad signature", header: ghHdr(sigB, "", ""), body: body, wantErr: ErrUnauthorized},
	}
	runCases(t, def, cases)
}

func TestGitHubSign(t *testing.T) {
	body := []byte(`{"zen":"Keep it logically awesome."}`)
	cfg := Config{Scheme: SchemeGitHub, Secrets: []string{ghSecretA, ghSecretB}}
	h, err := Sign(cfg, body, "d-1", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Get("X-Hub-Signature-256"), "sha256="+hexMAC(ghSecretA, body); got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
	if got := h.Get("X-GitHub-Delivery"); got != "d-1" {
		t.Fatalf("delivery %q", got)
	}
	if _, err := Sign(cfg, body, "", time.Time{}); err == nil {
		t.Fatal("Sign without a delivery id succeeded")
	}
}
