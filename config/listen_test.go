package config

import (
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
