package service

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestStartLineBoundsSources: the "listening" line gives the number of
// sources and names the first 20 (scheme and target), then how many more
// there are and where to see them; it listed every source in one
// attribute, 5.4 KB at 200 sources.
func TestStartLineBoundsSources(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("sources:\n")
	for i := range 45 {
		fmt.Fprintf(&doc, "  - name: src%03d\n    scheme: none\n    allow_ips: [\"127.0.0.1\"]\n    store_only: true\n", i)
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startOps(t, dbURL, doc.String(), nil)
		var line string
		for deadline := time.Now().Add(10 * time.Second); line == "" && time.Now().Before(deadline); {
			for _, l := range strings.Split(h.logs.String(), "\n") {
				if strings.Contains(l, `"msg":"listening"`) {
					line = l
				}
			}
			if line == "" {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if line == "" {
			t.Fatalf("no listening line:\n%s", h.logs.String())
		}
		var rec struct {
			Addr        string
			SourceCount int    `json:"source_count"`
			Sources     string `json:"sources"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if rec.Addr == "" || rec.SourceCount != 45 {
			t.Errorf("addr %q, source_count %d, want an address and 45: %s", rec.Addr, rec.SourceCount, line)
		}
		for _, want := range []string{"src000 (none, store-only)", "src019 (none, store-only); … and 25 more; see hookbox config check"} {
			if !strings.Contains(rec.Sources, want) {
				t.Errorf("sources lacks %q: %s", want, rec.Sources)
			}
		}
		if strings.Contains(rec.Sources, "src020") || strings.Count(rec.Sources, "(none, store-only)") != 20 {
			t.Errorf("sources names more than the first 20: %s", rec.Sources)
		}
		if len(line) > 1500 {
			t.Errorf("listening line is %d bytes: %s", len(line), line)
		}
	})
}
