//go:build unix

package target_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/target"
)

// TestExecOutputTailRedactedTrailingFiller: a secret followed by output
// that the kept tail drops as it makes it safe (trailing white space, or
// control bytes) is never shown in part. Last kept n+Longest raw bytes,
// then trimmed and dropped bytes, so the window's cut could land inside
// the secret, whose cut-off end was then shown unmasked (17 of its 18
// bytes). The cut is now made in the bytes as written.
func TestExecOutputTailRedactedTrailingFiller(t *testing.T) {
	eachMode(t, testExecOutputTailRedactedTrailingFiller)
}

func testExecOutputTailRedactedTrailingFiller(t *testing.T) {
	const token = "adm-secret-token-1"
	r := redact.New(token)
	dir := t.TempDir()
	sh := script(t, dir, "trail.sh", `printf "%s%s" "$TOKEN" "$TRAIL"; exit 1`)
	// Filler at the end (trimmed), and control bytes before a last
	// visible byte (dropped).
	for _, filler := range []struct{ run, end string }{{"\x01", "x"}, {" ", ""}, {"\n", ""}, {"\x01", ""}} {
		for w := 0; w < 80; w++ {
			e := newExec(t, target.ExecOptions{Argv: []string{sh}, OutputLimit: 20, Redactor: r,
				Env: []string{"TOKEN=" + token, "TRAIL=" + strings.Repeat(filler.run, w) + filler.end}})
			err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
			if err == nil {
				t.Fatal("want an error")
			}
			msg := err.Error()
			for k := 4; k <= len(token); k++ {
				if frag := token[len(token)-k:]; strings.Contains(msg, frag) {
					t.Fatalf("filler %q x %d then %q: error %q shows %q of the secret %q", filler.run, w, filler.end, msg, frag, token)
				}
			}
		}
	}
}

// TestExecOutputTailRedactedSplitByControls: a secret that control bytes
// split ("adm-secr\x01et-token-1"), shown once they are dropped, is masked
// whole wherever the kept window's cut falls.
func TestExecOutputTailRedactedSplitByControls(t *testing.T) {
	const token = "adm-secret-token-1"
	r := redact.New(token)
	dir := t.TempDir()
	sh := script(t, dir, "split.sh", `printf "%s\001\001\001\001\001\001\001\001%s%s" "$HEAD" "$REST" "$PAD"; exit 1`)
	for cut := 1; cut < len(token); cut++ {
		for pad := 0; pad < 30; pad++ {
			e := newExec(t, target.ExecOptions{Argv: []string{sh}, OutputLimit: 20, Redactor: r,
				Env: []string{"HEAD=" + token[:cut], "REST=" + token[cut:], "PAD=" + strings.Repeat("x", pad)}})
			err := e.Deliver(context.Background(), &hookbox.Event{ID: 1, Source: "s", DeliveryID: "d", Attempts: 1, Payload: []byte(`{}`)})
			msg := err.Error()
			for k := 4; k <= len(token); k++ {
				if frag := token[len(token)-k:]; strings.Contains(msg, frag) {
					t.Fatalf("split at %d, pad %d: error %q shows %q", cut, pad, msg, frag)
				}
			}
		}
	}
}
