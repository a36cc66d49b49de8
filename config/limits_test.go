package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestIngestLimitKeys: max_inflight_body_bytes, trusted_proxies and
// allow_ips are validated at load with errors that name the key.
func TestIngestLimitKeys(t *testing.T) {
	const src = "sources:\n  - name: a\n    scheme: none\n"
	cases := []struct{ yaml, key string }{
		{"max_inflight_body_bytes: -1\n" + src, "max_inflight_body_bytes: must be positive"},
		{"max_inflight_body_bytes: 1000\n" + src, "max_inflight_body_bytes: 1000 is less than twice sources[0] (a)'s body limit of 1048576"},
		{"max_inflight_body_bytes: 5999\n" + src + "    max_body_bytes: 3000\n", "max_inflight_body_bytes: 5999 is less than twice sources[0] (a)'s body limit of 3000 bytes"},
		{src + "min_body_rate: -1\n", "min_body_rate: must be positive"},
		{src + "max_client_connections: -1\n", "max_client_connections: must be positive"},
		// Twice this would wrap to a negative floor for the budget.
		{"max_body_bytes: 4611686018427387905\n" + src, "max_body_bytes: 4611686018427387905 is more than 1073741824 (1 GiB)"},
		{src + "    max_body_bytes: 1073741825\n", "sources[0] (a).max_body_bytes: 1073741825 is more than 1073741824 (1 GiB)"},
		{"trusted_proxies: [10.0.0.1, 'ten']\n" + src, `trusted_proxies[1]: not an IP address or CIDR: "ten"`},
		{"trusted_proxies: [10.0.0.0/33]\n" + src, `trusted_proxies[0]: not an IP address or CIDR`},
		{src + "    allow_ips: ['192.0.2.0/24', '192.0.2.300']\n", `sources[0] (a).allow_ips[1]: not an IP address or CIDR: "192.0.2.300"`},
		{src + "    allow_ips: ['fe80::1%eth0']\n", `sources[0] (a).allow_ips[0]: not an IP address or CIDR`},
		{src + "    allow_ips: ['::ffff:0:0/64']\n", `sources[0] (a).allow_ips[0]: an IPv4-mapped CIDR must be /96 or longer`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml))
		if err == nil {
			t.Errorf("%q: no error", c.yaml)
			continue
		}
		if !strings.Contains(err.Error(), c.key) {
			t.Errorf("%q: error %q does not contain %q", c.yaml, err, c.key)
		}
	}
}

func TestIngestLimitValues(t *testing.T) {
	c, err := Parse([]byte(`
trusted_proxies: ["10.0.0.1", "172.16.0.0/12"]
sources:
  - name: a
    scheme: none
    allow_ips: ["192.0.2.7", "198.51.100.9/24", "::ffff:203.0.113.0/120", "2001:db8::/32"]
  - name: big
    scheme: none
    max_body_bytes: 104857600
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32"),
	}
	if got := c.Sources[0].AllowedIPs(); !slices.Equal(got, want) {
		t.Errorf("allow_ips = %v, want %v", got, want)
	}
	if got := c.Sources[1].AllowedIPs(); got != nil {
		t.Errorf("no allow_ips = %v, want nil", got)
	}
	wantProxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32"), netip.MustParsePrefix("172.16.0.0/12")}
	if got := c.TrustedProxyPrefixes(); !slices.Equal(got, wantProxies) {
		t.Errorf("trusted_proxies = %v, want %v", got, wantProxies)
	}
	// Unset: the default, raised to twice the largest body limit and the
	// reserve that lets a lone delivery of that size be received.
	if got := c.InflightBodyBytes(); got != 2*104857600+InflightReserve {
		t.Errorf("InflightBodyBytes = %d, want twice the big source's 104857600 and the reserve", got)
	}
	c.Sources = c.Sources[:1]
	if got := c.InflightBodyBytes(); got != DefaultMaxInflightBodyBytes {
		t.Errorf("InflightBodyBytes = %d, want the default %d", got, DefaultMaxInflightBodyBytes)
	}
	c.MaxInflightBodyBytes = 5 << 20
	if got := c.InflightBodyBytes(); got != 5<<20 {
		t.Errorf("InflightBodyBytes = %d, want the configured %d", got, 5<<20)
	}
	// Set to exactly twice the largest limit, which the check accepts: the
	// server raises it by the reserve, and so does what config check shows.
	c.MaxInflightBodyBytes = 2 * c.BodyLimit(c.Sources[0])
	if got, want := c.InflightBodyBytes(), 2*c.BodyLimit(c.Sources[0])+InflightReserve; got != want {
		t.Errorf("InflightBodyBytes = %d, want %d (as the server runs it)", got, want)
	}
}
