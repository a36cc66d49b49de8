package hookbox_test

import (
	"errors"
	"testing"

	"github.com/hookbox/hookbox"
)

// TestReceivableText: ingest takes ids that are storable text without
// control characters (C0, DEL, C1) or white space at either end, and
// event types without control characters, while stores keep taking them
// (events stored before the rule must stay readable).
func TestReceivableText(t *testing.T) {
	for s, want := range map[string]bool{
		"evt_1": true, "evt 1 é": true, "50%off": true, "": true,
		"evt_1\n": false, "a\tb": false, "del\x7f": false, "nel\u0085": false,
		"nul\x00": false, "bad\xff": false,
		"evt_1 ": false, " evt_1": false, "evt_1\u00a0": false, "evt 1": true,
	} {
		if got := hookbox.StorableText(s) && hookbox.NotReceivable(s, true) == ""; got != want {
			t.Errorf("receivable as an id: %q = %v, want %v", s, got, want)
		}
	}
	d := hookbox.Delivery{Source: "s", DeliveryID: "evt_1\n", EventType: "t"}
	if err := hookbox.CheckReceivable(&d); !errors.Is(err, hookbox.ErrBadDelivery) {
		t.Errorf("CheckReceivable = %v, want ErrBadDelivery", err)
	}
	if err := hookbox.CheckStorable(&d); err != nil {
		t.Errorf("CheckStorable = %v, want nil (stores still take it)", err)
	}
	d.DeliveryID, d.EventType = "evt_1", "a\tb"
	if err := hookbox.CheckReceivable(&d); !errors.Is(err, hookbox.ErrBadDelivery) {
		t.Errorf("CheckReceivable of a type with a tab = %v, want ErrBadDelivery", err)
	}
	// White space at the ends of a type is harmless: a verified delivery
	// is not refused for it.
	d.EventType = "invoice.paid\u00a0"
	if err := hookbox.CheckReceivable(&d); err != nil {
		t.Errorf("CheckReceivable of a type ending in a space = %v, want nil", err)
	}
}
