package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestRecheckMissingIDFails: rejected recheck --id of a row the log does
// not hold exited 0 (a "refused" line), while rejected show of it fails;
// it fails too, after reporting the ids it did judge.
func TestRecheckMissingIDFails(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		if _, err := st.AddRejections(context.Background(), []hookbox.Rejection{{Source: "polar", ReceivedAt: time.Now(), Status: 401,
			Reason: "no signature matches", Body: []byte("{}"), BodySize: 2, BodyComplete: true}}, hookbox.RejectionBounds{}); err != nil {
			t.Fatal(err)
		}
		kept, err := st.Rejections(context.Background(), hookbox.RejectionFilter{})
		if err != nil || len(kept) != 1 {
			t.Fatalf("rejections: %v %v", kept, err)
		}
		ids := []int64{kept[0].ID}
		cfgPath := filepath.Join(t.TempDir(), "hookbox.yaml")
		if err := os.WriteFile(cfgPath, []byte("sources:\n  - name: polar\n    scheme: github\n    secrets: [a-secret-of-some-length]\n    store_only: true\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runExit(t, "rejected", "recheck", "--db", dbURL, "--config", cfgPath, "--id", "99999", "--id", fmt.Sprint(ids[0]))
		if code != 1 || !strings.Contains(errOut, "no rejected delivery 99999 (the log keeps a bounded number)") ||
			!strings.Contains(out, fmt.Sprintf("%d: ", ids[0])) || !strings.Contains(out, "refused 2") {
			t.Errorf("recheck of a missing id: exit %d\n%s%s", code, out, errOut)
		}
		if code, _, errOut := runExit(t, "rejected", "show", "99999", "--db", dbURL); code != 1 || !strings.Contains(errOut, "no rejected delivery 99999") {
			t.Errorf("show of a missing id: exit %d %s", code, errOut)
		}
		if code, out, errOut := runExit(t, "rejected", "recheck", "--db", dbURL, "--config", cfgPath, "--id", fmt.Sprint(ids[0])); code != 0 {
			t.Errorf("recheck of a kept id: exit %d\n%s%s", code, out, errOut)
		}
	})
}
