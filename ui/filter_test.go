package ui

import (
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/hookbox/hookbox/server"
)

// TestDeadFilterCoversListingFilter proves that deadFilter, the parameters
// a bulk replay carries from the dead events page, sets every field of the
// listing filter the page applies, except Status (forced to dead), the
// paging fields and Parent (no query parameter sets it): a filter field
// added to hookbox.Filter and server.FilterFromQuery fails here until the
// replay carries it too.
func TestDeadFilterCoversListingFilter(t *testing.T) {
	q := url.Values{}
	for _, k := range deadFilter {
		q.Set(k, "1d") // a valid text, since and until alike
	}
	f, err := server.FilterFromQuery(q, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(f)
	for i := range v.NumField() {
		switch name := v.Type().Field(i).Name; name {
		case "Status", "Limit", "BeforeID", "Parent":
		default:
			if v.Field(i).IsZero() {
				t.Errorf("the bulk replay does not carry the dead page's filter field %s", name)
			}
		}
	}
}
