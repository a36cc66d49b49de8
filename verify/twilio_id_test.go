package verify

import (
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
