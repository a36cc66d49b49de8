package server

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// recordedRoutes is a Mux that keeps the patterns registered on it.
type recordedRoutes []string

func (r *recordedRoutes) Handle(pattern string, _ http.Handler) { *r = append(*r, pattern) }

// documentedRoute matches an endpoint the README writes in a code span:
// a method and a path, which may hold an optional part ("[/{target}]")
// and alternatives at its end ("pause|resume").
var documentedRoute = regexp.MustCompile("`(GET|POST|PUT|DELETE) (/admin/[^` ?]*)")

// expandRoute writes out a documented route's optional part and
// alternatives: "POST /a[/{b}]/c|d" is four routes.
func expandRoute(method, path string) []string {
	if open := strings.Index(path, "["); open >= 0 {
		if end := strings.Index(path[open:], "]"); end > 0 {
			opt := path[open+1 : open+end]
			rest := path[open+end+1:]
			return append(expandRoute(method, path[:open]+rest), expandRoute(method, path[:open]+opt+rest)...)
		}
	}
	slash := strings.LastIndex(path, "/")
	var out []string
	for _, last := range strings.Split(path[slash+1:], "|") {
		out = append(out, method+" "+path[:slash+1]+last)
	}
	return out
}

// TestAdminRoutesDocumented: the README's list of admin endpoints is the
// admin API's routes, both ways: each documented endpoint is served, and
// each served one is documented.
func TestAdminRoutesDocumented(t *testing.T) {
	var served recordedRoutes
	(&admin{}).register(&served)
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range documentedRoute.FindAllStringSubmatch(string(raw), -1) {
		documented = append(documented, expandRoute(m[1], strings.TrimSuffix(m[2], "/"))...)
	}
	if len(served) < 10 || len(documented) < 10 {
		t.Fatalf("%d routes served, %d documented: the test reads neither as expected", len(served), len(documented))
	}
	var probe http.ServeMux
	for _, s := range served {
		probe.Handle(s, http.NotFoundHandler())
	}
	for _, d := range documented {
		method, path, _ := strings.Cut(d, " ")
		// A path written with its wildcards ({id}) or with values
		// (shop/billing) is served if the routes' mux finds it a route.
		req, err := http.NewRequest(method, strings.NewReplacer("{", "", "}", "").Replace(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, pattern := probe.Handler(req); pattern == "" {
			t.Errorf("README documents %s, which the admin API does not serve", d)
		}
	}
	for _, s := range served {
		if !slices.Contains(documented, s) {
			t.Errorf("the admin API serves %s, which the README does not document", s)
		}
	}
}
