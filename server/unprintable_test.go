package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// senderText holds what a sender may put in a stored id, header or
// unknown source name and JSON writes raw: U+009B (a terminal's CSI),
// U+0085, U+202E (reverses what follows it on screen) and U+200B.
const senderText = "evt\u202egnp.exe\u200b\u009b2J\u0085"

// TestAdminRepliesEscapeUnprintable: the admin API's replies write the
// runes of sender text that do not print as \u escapes, so that an
// operator's curl in a terminal cannot be driven by a sender, and the
// replies still decode to the text as stored. encoding/json escapes C0
// controls only: the list, an event's detail and the rejected log
// carried U+009B and U+202E raw.
func TestAdminRepliesEscapeUnprintable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		d := storetest.Delivery("polar", senderText)
		d.Header = http.Header{"X-Note": {senderText}}
		id := storetest.Seed(t, h.st, hookbox.StatusDead, time.Now(), senderText, d)[0]
		rj := storetest.Rejection(senderText, 404, time.Now())
		rj.UnknownSource, rj.Reason = true, senderText
		if _, err := h.st.AddRejections(context.Background(), []hookbox.Rejection{rj}, hookbox.RejectionBounds{}); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/admin/events", "/admin/events/" + strconv.FormatInt(id, 10), "/admin/rejected"} {
			code, b := h.call("GET", path)
			if code != http.StatusOK {
				t.Fatalf("%s = %d %s", path, code, b)
			}
			for _, r := range string(b) {
				if r >= utf8.RuneSelf && !unicode.IsPrint(r) {
					t.Errorf("%s holds %U raw: %s", path, r, b)
					break
				}
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s: %v in %s", path, err, b)
			}
			if n := countString(v, senderText); n < 2 {
				t.Errorf("%s: the sender's text decoded %d times, want it twice (id and header, or source and reason): %s", path, n, b)
			}
		}
	})
}

// countString counts the strings in v, decoded JSON, equal to s.
func countString(v any, s string) int {
	switch v := v.(type) {
	case string:
		if v == s {
			return 1
		}
	case []any:
		n := 0
		for _, e := range v {
			n += countString(e, s)
		}
		return n
	case map[string]any:
		n := 0
		for _, e := range v {
			n += countString(e, s)
		}
		return n
	}
	return 0
}
