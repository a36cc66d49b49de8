package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// TestClaimLimitsComeInFewTexts: claims with a limit per source
// (hookbox.ClaimParams.Limits) over 2 to 400 sources come in at most 20
// statement texts (a power of two of parts, or maxUnion; with running
// events left out or not), well within the cache of prepared claims
// (maxCached): unpadded, each count of sources was a text of its own, 798
// of them, and once the cache was full every claim past it was parsed
// and planned each time it ran. The padding parts take nothing.
func TestClaimLimitsComeInFewTexts(t *testing.T) {
	texts := map[string]bool{}
	for n := 2; n <= maxUnion; n++ {
		for _, running := range [][]int64{nil, {7}} {
			p := hookbox.ClaimParams{Limit: n, Now: time.Now(), Sources: make([]string, n), Limits: make([]int, n), RunningIDs: running}
			for i := range n {
				p.Sources[i], p.Limits[i] = fmt.Sprint("s", i), 1
			}
			q, args := claimSQL(p)
			texts[q] = true
			if len(p.Sources) != n || len(p.Limits) != n {
				t.Fatalf("claimSQL changed its caller's sources or limits")
			}
			// Each part binds its source, the time, the running ids when
			// there are, its source again (unlessPaused) and its limit;
			// then the claim's limit.
			per := 4
			if running != nil {
				per = 5
			}
			parts := (len(args) - 1) / per
			if parts < n || parts > maxUnion {
				t.Fatalf("%d sources: a statement of %d parts", n, parts)
			}
			for k := n; k < parts; k++ {
				if src, limit := args[k*per], args[k*per+per-1]; src != "" || limit != 0 {
					t.Fatalf("%d sources: padding part %d binds source %q, limit %v; want none, 0", n, k, src, limit)
				}
			}
		}
	}
	if len(texts) > 20 {
		t.Errorf("claims with limits over 2 to %d sources come in %d statement texts, want at most 20", maxUnion, len(texts))
	}
	if len(texts) > maxCached/2 {
		t.Errorf("%d texts would take more than half the cache of prepared claims (%d)", len(texts), maxCached)
	}
}
