package verify

import (
	"crypto/sha256"
	"testing"
	"time"
)

// TestTwilioIDIsWhatItSigned: Twilio signs the decoded parameters, sorted,
// not the body's bytes, so bodies that differ in order, encoding, a
// trailing "&", or in how names and values are cut (Twilio joins them
// with nothing between) pass with one signature. They get one delivery
// id, the hash of what was signed, so a captured callback sent again in
// another form is a duplicate, not a new event; a body signing otherwise
// gets another id.
func TestTwilioIDIsWhatItSigned(t *testing.T) {
	cfg := Config{Scheme: SchemeTwilio, Secrets: []string{"twilio-auth-token"}, PublicURL: "https://h.example/sms"}
	v := mustNew(t, cfg)
	original := []byte("Body=Hello&From=%2B15550001&To=%2B15550002")
	h, err := Sign(cfg, original, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	first, err := v.Verify(Request{Header: h, Body: original})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		"To=%2B15550002&Body=Hello&From=%2B15550001",   // another order
		"Body=Hello&From=%2B15550001&To=%2B15550002&",  // a trailing &
		"Body=Hel%6Co&From=%2B15550001&To=%2B15550002", // an encoding changed
		"Body=HelloFrom%2B15550001&To=%2B15550002",     // cut otherwise: From is gone
	} {
		res, err := v.Verify(Request{Header: h, Body: []byte(body)})
		if err != nil {
			t.Errorf("%s: %v (the signature covers it)", body, err)
			continue
		}
		if res.DeliveryID != first.DeliveryID {
			t.Errorf("%s: id %s, want the original's %s", body, res.DeliveryID, first.DeliveryID)
		}
	}
	other := []byte("Body=Bye&From=%2B15550001&To=%2B15550002")
	oh, err := Sign(cfg, other, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := v.Verify(Request{Header: oh, Body: other}); err != nil || res.DeliveryID == first.DeliveryID {
		t.Errorf("another message: %+v, %v; want another id", res, err)
	}
}

// TestBodyKeyIsWhatIsSigned: BodyKey gives bodies one twilio signature
// covers one key, also when the id is a header the signature does not
// cover (id_header) and through a wrapper (a handshake); another message
// gets another key. Every other scheme keys the body's bytes.
func TestBodyKeyIsWhatIsSigned(t *testing.T) {
	for _, cfg := range []Config{
		{Scheme: SchemeTwilio, Secrets: []string{"twilio-auth-token"}, PublicURL: "https://h.example/sms", IDHeader: "I-Twilio-Idempotency-Token"},
		{Scheme: SchemeTwilio, Secrets: []string{"twilio-auth-token"}, PublicURL: "https://h.example/sms", Handshake: HandshakeSlack},
	} {
		v := mustNew(t, cfg)
		original := []byte("Body=Hello&From=%2B15550001&To=%2B15550002")
		h, err := Sign(cfg, original, "idem-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		want := BodyKey(v, original)
		if want == sha256.Sum256(original) {
			t.Errorf("%+v: the key is the hash of the body's bytes", cfg)
		}
		for _, body := range []string{
			"To=%2B15550002&Body=Hello&From=%2B15550001",
			"Body=Hello&From=%2B15550001&To=%2B15550002&",
			"Body=Hel%6Co&From=%2B15550001&To=%2B15550002",
			"Body=HelloFrom%2B15550001&To=%2B15550002",
		} {
			h := h.Clone()
			h.Set("I-Twilio-Idempotency-Token", "idem-replayed")
			if _, err := v.Verify(Request{Header: h, Body: []byte(body)}); err != nil {
				t.Fatalf("%s: %v (the signature covers it)", body, err)
			}
			if got := BodyKey(v, []byte(body)); got != want {
				t.Errorf("%+v: %s keyed %x, want the original's %x", cfg, body, got, want)
			}
		}
		if BodyKey(v, []byte("Body=Bye&From=%2B15550001&To=%2B15550002")) == want {
			t.Errorf("%+v: another message has the original's key", cfg)
		}
	}
	body := []byte(`{"id":"evt_1"}`)
	for _, cfg := range []Config{
		{Scheme: SchemeGitHub, Secrets: []string{"s"}},
		{Scheme: SchemeGitHub, Secrets: []string{"s"}, TypeHeader: "X-Type"},
		{Scheme: SchemeHMAC, Header: "X-Sig", Secrets: []string{"s"}, Handshake: HandshakeSlack},
		{Scheme: SchemeToken, Header: "X-Token", Secrets: []string{"s"}},
		{Scheme: SchemeMailgun, Secrets: []string{"s"}},
		{Scheme: SchemeNone},
	} {
		if got := BodyKey(mustNew(t, cfg), body); got != sha256.Sum256(body) {
			t.Errorf("%s: key %x, want the body's SHA-256", cfg.Scheme, got)
		}
	}
}
