package config

import (
	"net"
	"strings"
	"testing"
)

// TestListenAddresses: listen and admin_listen load when hookbox serve
// could listen on them (host:port, an empty host for every interface, port
// 0 for any free one) and are refused, naming the key and saying what to
// write, when it could not: no port, a port out of range, an IPv6 host
// without brackets. (Whether admin_listen takes the address of listen,
// serve judges: --listen may decide it.)
func TestListenAddresses(t *testing.T) {
	const sources = "sources:\n  - name: a\n    scheme: none\n    allow_ips: [127.0.0.1]\n    store_only: true\n"
	for _, ok := range []string{
		`listen: ":8080"`,
		`listen: "127.0.0.1:8080"`,
		`listen: ":0"`,
		`listen: "[::1]:8080"`,
		`listen: ":http"`,
		"listen: \":8080\"\nadmin_listen: \"127.0.0.1:9090\"",
		"listen: \":0\"\nadmin_listen: \":0\"",
		"listen: \"127.0.0.1:8080\"\nadmin_listen: \"10.0.0.1:8080\"",
		`admin_listen: "127.0.0.1:8080"`, // serve compares it with --listen or the default
		// And with the file's listen: --listen may replace it, and the
		// other commands do not listen at all.
		"listen: \"127.0.0.1:8080\"\nadmin_listen: \"127.0.0.1:8080\"",
	} {
		if _, err := Parse([]byte(ok + "\n" + sources)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, c := range []struct{ doc, want string }{
		{`listen: "bogus"`, `listen: has no port; write host:port, like ":8080"`},
		{`admin_listen: "9090"`, `admin_listen: has no port; write host:port, like ":9090"`},
		{`listen: "127.0.0.1:99999"`, "listen: has a port that is not a number from 0 to 65535"},
		{`admin_listen: "127.0.0.1:-1"`, "admin_listen: has a port that is not a number from 0 to 65535"},
		{`listen: "127.0.0.1:"`, `listen: has no port after the colon; write one, like ":8080" (every interface) or "127.0.0.1:8080", or ":0"`},
		{`listen: "::1:8080"`, `listen: is not host:port (an IPv6 host goes in brackets, like "[::1]:8080")`},
	} {
		_, err := Parse([]byte(c.doc + "\n" + sources))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.doc, err, c.want)
		}
	}
}

// TestAdminListenWithoutToken: admin_listen without admin_token is a
// warning (the admin API and the console are off, so the address serves
// /metrics alone); with a token, none.
func TestAdminListenWithoutToken(t *testing.T) {
	const sources = "sources:\n  - name: a\n    scheme: none\n    allow_ips: [127.0.0.1]\n    store_only: true\n"
	c, err := Parse([]byte("admin_listen: \"127.0.0.1:9090\"\n" + sources))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "admin_listen is set but admin_token is not: /admin/ and /ui/ need admin_token") {
		t.Errorf("warnings %q", c.Warnings)
	}
	c, err = Parse([]byte("admin_listen: \"127.0.0.1:9090\"\nadmin_token: \"a-token-in-the-file\"\n" + sources))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings with a token: %q", c.Warnings)
	}
}

// TestTrustedProxiesEveryAddressRefused: a trusted_proxies entry of /0
// (0.0.0.0/0, ::/0, or ::ffff:0:0/96, which is 0.0.0.0/0 once unmapped)
// is an error: every client would be a trusted proxy, so its own
// X-Forwarded-For would pass allow_ips. A very broad prefix is a
// warning; a private network or a provider's /32 is neither.
func TestTrustedProxiesEveryAddressRefused(t *testing.T) {
	const sources = "sources:\n  - {name: a, scheme: none, allow_ips: [10.1.2.3], store_only: true}\n"
	_, err := Parse([]byte(`trusted_proxies: ["0.0.0.0/0", "::/0", "::ffff:0:0/96", "192.0.2.1"]` + "\n" + sources))
	if err == nil {
		t.Fatal("trusted_proxies of /0 accepted")
	}
	for _, want := range []string{"trusted_proxies[0]: 0.0.0.0/0 trusts every address", "trusted_proxies[1]: ::/0 trusts every address", "trusted_proxies[2]: 0.0.0.0/0 trusts every address", "list your proxies' own addresses"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "trusted_proxies[3]") {
		t.Errorf("error names a single address:\n%v", err)
	}
	c, err := Parse([]byte(`trusted_proxies: ["64.0.0.0/2", "2000::/3", "10.0.0.0/8", "fd00::/8", "2001:db8::/32", "192.0.2.0/24"]` + "\n" + sources))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 2 || !strings.Contains(c.Warnings[0], "trusted_proxies[0] is 64.0.0.0/2, which holds far more than a few proxies") ||
		!strings.Contains(c.Warnings[1], "trusted_proxies[1] is 2000::/3") {
		t.Errorf("warnings %q, want one for each of the two broad prefixes", c.Warnings)
	}
}

// TestSameListenAddressResolvesNames: a host name and an address it
// resolves to take the same address (listen 127.0.0.1:8094 and
// admin_listen localhost:8094 passed config check, and serve failed to
// bind the second); other ports, a name that does not resolve, and
// distinct addresses do not clash.
func TestSameListenAddressResolvesNames(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:8094", "localhost:8094", true},
		{"localhost:8094", "127.0.0.1:8094", true},
		{"LOCALHOST:8094", "localhost:8094", true},
		{":8094", "localhost:8094", true},
		{"127.0.0.1:8094", "localhost:8095", false},
		{"127.0.0.1:8094", "127.0.0.2:8094", false},
		{"127.0.0.1:8094", "no-such-host.invalid:8094", false},
		{"localhost:0", "127.0.0.1:0", false},
		// localhost binds its IPv4 address only (net.Listen takes the
		// first IPv4 one), so it takes nothing from [::1], whether or not
		// /etc/hosts also names ::1 localhost.
		{"[::1]:8094", "localhost:8094", false},
	} {
		if got := SameListenAddress(c.a, c.b); got != c.want {
			t.Errorf("SameListenAddress(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestBoundAddr: of a name's addresses only the one net.Listen binds
// counts: localhost resolving to ::1 and 127.0.0.1 (a common /etc/hosts)
// binds 127.0.0.1, so a listener on [::1] and one on localhost at one
// port both start. Every address of the name counted, and such a config
// was refused.
func TestBoundAddr(t *testing.T) {
	v6, v4 := net.ParseIP("::1"), net.ParseIP("127.0.0.1")
	for _, c := range []struct {
		in   []net.IPAddr
		want []net.IP
	}{
		{[]net.IPAddr{{IP: v6}, {IP: v4}}, []net.IP{v4}},
		{[]net.IPAddr{{IP: v4}, {IP: v6}}, []net.IP{v4}},
		{[]net.IPAddr{{IP: v6}}, []net.IP{v6}},
		{nil, nil},
	} {
		got := boundAddr(c.in)
		if len(got) != len(c.want) || len(got) == 1 && !got[0].Equal(c.want[0]) {
			t.Errorf("boundAddr(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
