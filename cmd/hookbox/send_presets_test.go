package main

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/verify"
)

// TestSendEveryPreset runs `hookbox send --source NAME` for a source of
// every provider preset (and the schemes no preset uses alone) and checks
// that a receiver verifying with that source's config accepts each.
func TestSendEveryPreset(t *testing.T) {
	rc := newReceiver(t, nil)
	edPriv := ed25519.NewKeyFromSeed(make([]byte, 32))
	v1aPriv := ed25519.NewKeyFromSeed([]byte("0123456789abcdef0123456789abcdef"))
	ecPriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecPub, _ := x509.MarshalPKIXPublicKey(&ecPriv.PublicKey)
	ecPKCS8, _ := x509.MarshalPKCS8PrivateKey(ecPriv)
	signingKeys := map[string]string{
		"discord":  hex.EncodeToString(edPriv.Seed()),
		"sendgrid": base64.StdEncoding.EncodeToString(ecPKCS8),
		"sw-v1a":   "whsk_" + base64.StdEncoding.EncodeToString(v1aPriv.Seed()),
	}
	secret := map[string]string{
		"discord":  hex.EncodeToString(edPriv.Public().(ed25519.PublicKey)),
		"sendgrid": base64.StdEncoding.EncodeToString(ecPub),
	}
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %q\nsources:\n", strings.TrimPrefix(rc.srv.URL, "http://"))
	for _, p := range config.Presets {
		s := secret[p.Name]
		if s == "" {
			s = "whsec_" + base64.StdEncoding.EncodeToString([]byte("send-preset-secret-"+p.Name))
		}
		fmt.Fprintf(&b, "  - {name: %s, provider: %s, secrets: [%q], store_only: true", p.Name, p.Name, s)
		if p.Name == "twilio" || p.Name == "square" {
			fmt.Fprintf(&b, ", public_url: %q", rc.srv.URL+"/webhooks/"+p.Name)
		}
		b.WriteString("}\n")
	}
	b.WriteString(`  - {name: gitlab-signing, provider: gitlab, scheme: standard-webhooks, secrets: ["whsec_c2lnbmluZy10b2tlbg=="], store_only: true}
  - {name: sw-v1a, scheme: standard-webhooks, secrets: ["whpk_` + base64.StdEncoding.EncodeToString(v1aPriv.Public().(ed25519.PublicKey)) + `"], store_only: true}
  - {name: basic, scheme: basic, secrets: ["hooks:pa55word"], id_header: X-Request-Id, store_only: true}
`)
	cfgPath := filepath.Join(t.TempDir(), "hookbox.yaml")
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Sources {
		v, err := verify.New(s.Verify())
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		rc.verifier[s.Name] = v
	}
	for _, s := range cfg.Sources {
		t.Run(s.Name, func(t *testing.T) {
			args := []string{"--config", cfgPath, "send", "--source", s.Name, "--type", "hookbox.test"}
			if k := signingKeys[s.Name]; k != "" {
				args = append(args, "--signing-key", k)
			}
			before := len(rc.deliveries())
			out, errOut, err := runSendCmd(t, "", args...)
			if err != nil {
				t.Fatalf("send: %v\nstdout: %s\nstderr: %s", err, out, errOut)
			}
			if strings.Contains(errOut, "warning") {
				t.Errorf("send warned: %s", errOut)
			}
			ds := rc.deliveries()[before:]
			if len(ds) != 1 || ds[0].id == "" {
				t.Fatalf("receiver got %+v", ds)
			}
			vc := s.Verify()
			if (vc.TypeHeader != "" || vc.TypeField != "" || vc.Scheme == verify.SchemeStandardWebhooks || vc.Scheme == verify.SchemeStripe ||
				vc.Scheme == verify.SchemePaddle || vc.Scheme == verify.SchemeMailgun || vc.Scheme == verify.SchemeGitHub) && ds[0].eventType != "hookbox.test" {
				t.Errorf("event type %q", ds[0].eventType)
			}
		})
	}
	if rc.rejected != 0 {
		t.Errorf("%d deliveries rejected", rc.rejected)
	}
	// A public key cannot sign: send says what to give instead.
	_, _, err = runSendCmd(t, "", "--config", cfgPath, "send", "--source", "discord")
	if err == nil || !strings.Contains(err.Error(), "--signing-key") {
		t.Fatalf("discord without a signing key: %v", err)
	}
	// --provider signs without a config file.
	v, err := verify.New(config.Source{Provider: "slack", Secrets: []string{"flag-secret"}}.Verify())
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.verifier["slack-flags"] = v
	rc.mu.Unlock()
	out, errOut, err := runSendCmd(t, "", "send", "--provider", "slack", "--secret", "flag-secret", "--url", rc.srv.URL+"/webhooks/slack-flags")
	if err != nil || !strings.HasPrefix(out, "202 ") {
		t.Fatalf("--provider slack: %v %s %s", err, out, errOut)
	}
	if _, _, err := runSendCmd(t, "", "send", "--provider", "slak", "--secret", "x"); err == nil || !strings.Contains(err.Error(), "known: stripe, github") {
		t.Fatalf("unknown --provider: %v", err)
	}
}
