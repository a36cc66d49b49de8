package server

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestForwardedHTTPS: X-Forwarded-Proto is believed from a trusted peer
// only (an IPv4-mapped address counts as its IPv4 one), and says HTTPS
// when its first hop, the client's, is https.
func TestForwardedHTTPS(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		peer, proto string
		want        bool
	}{
		{"10.1.2.3:5000", "https", true},
		{"[::ffff:10.1.2.3]:5000", "HTTPS", true},
		{"10.1.2.3:5000", " https , http", true},
		{"10.1.2.3:5000", "http, https", false},
		{"10.1.2.3:5000", "http", false},
		{"10.1.2.3:5000", "", false},
		{"203.0.113.5:5000", "https", false},
		{"not an address", "https", false},
	} {
		r := httptest.NewRequest("GET", "/ui/login", nil)
		r.RemoteAddr = tc.peer
		if tc.proto != "" {
			r.Header.Set("X-Forwarded-Proto", tc.proto)
		}
		if got := ForwardedHTTPS(r, trusted); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-Proto %q: %v, want %v", tc.peer, tc.proto, got, tc.want)
		}
	}
}
