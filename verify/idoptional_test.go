package verify

import (
	"net/http"
	"testing"
)

// TestIDOptionalOnlyForMissingID: id_optional keys by the body hash a
// delivery whose id is missing or empty (Config.IDOptional). An id that
// is there but unusable (a JSON object, array or boolean; a body that
// is not a JSON object at all; an id header sent on two lines) is not
// missing: without id_optional it is refused with its own reason, and with
// it the delivery should not be stored under a hash that ignores the id it
// carries.
func TestIDOptionalOnlyForMissingID(t *testing.T) {
	field, err := New(Config{Scheme: SchemeNone, IDField: "event_id", IDOptional: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"event_id":{"id":"Ev1"}}`,
		`{"event_id":["Ev1"]}`,
		`{"event_id":true}`,
		`[{"event_id":"Ev1"}]`,
	} {
		if res, err := field.Verify(Request{Header: http.Header{}, Body: []byte(body)}); err == nil {
			t.Errorf("id_field with id_optional, body %s: accepted under %q (IDIsHash %v), want refused as malformed", body, res.DeliveryID, res.IDIsHash)
		}
	}
	header, err := New(Config{Scheme: SchemeNone, IDHeader: "X-Id", IDOptional: true})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Id": {"a", "b"}}
	if res, err := header.Verify(Request{Header: h, Body: []byte(`{}`)}); err == nil {
		t.Errorf("id_header with id_optional, X-Id sent twice: accepted under %q (IDIsHash %v), want refused as sent more than once", res.DeliveryID, res.IDIsHash)
	}
}
