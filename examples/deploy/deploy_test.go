// Package deploy_test runs the deploy example end to end: a real hookbox
// service with an exec target running deploy.sh as a child process.
package deploy_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/e2e"
)

const secret = "deploy-test-secret"

// push signs a push payload by hand, as GitHub does: sha256= and the hex
// HMAC of the body.
func push(srv *e2e.Server, delivery, sha string) e2e.Reply {
	return pushFrom(srv, delivery, strings.Repeat("0", 40), sha)
}

// pushFrom is a push from commit before to commit after.
func pushFrom(srv *e2e.Server, delivery, before, after string) e2e.Reply {
	body := []byte(fmt.Sprintf(`{"ref":"refs/heads/main","before":"%s","after":"%s","repository":{"full_name":"acme/shop"}}`, before, after))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	h.Set("X-GitHub-Delivery", delivery)
	h.Set("X-GitHub-Event", "push")
	return srv.Post("github", h, body)
}

func TestDeployOncePerCommit(t *testing.T) {
	script, err := filepath.Abs("deploy.sh")
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		state := t.TempDir()
		cfg := fmt.Sprintf(`
sources:
  - name: github
    scheme: github
    secrets: [%q]
    exec: [%q]
    exec_env: ["DEPLOY_DIR=%s"]
    strict: true
`, secret, script, state)
		srv := e2e.Start(t, cfg, dbURL, nil)
		shaA := strings.Repeat("a", 40)
		shaB := strings.Repeat("b", 40)

		first := push(srv, "delivery-1", shaA)
		if first.Status != http.StatusAccepted || first.Duplicate {
			t.Fatalf("first push: %+v", first)
		}
		// GitHub's "Redeliver" button: same delivery GUID.
		if r := push(srv, "delivery-1", shaA); !r.Duplicate || r.ID != first.ID {
			t.Fatalf("redelivery: %+v", r)
		}
		// The same push body under a fresh delivery id (a captured push
		// sent again): a duplicate of the first.
		if r := push(srv, "delivery-1b", shaA); !r.Duplicate || r.ID != first.ID {
			t.Fatalf("same body, new delivery id: %+v", r)
		}
		// A second push event carrying the same commit.
		if r := pushFrom(srv, "delivery-2", shaB, shaA); r.Duplicate {
			t.Fatalf("second push: %+v", r)
		}
		push(srv, "delivery-3", shaB)
		srv.WaitIdle(30 * time.Second)
		// A late push of the older commit A, after B is deployed: refused.
		if r := pushFrom(srv, "delivery-4", strings.Repeat("c", 40), shaA); r.Duplicate {
			t.Fatalf("late push: %+v", r)
		}
		srv.WaitIdle(30 * time.Second)

		events := srv.Events("github")
		if len(events) != 4 {
			t.Fatalf("stored %d events, want 4", len(events))
		}
		for _, e := range events {
			if e.Status != "done" {
				t.Errorf("event %s is %s: %s", e.DeliveryID, e.Status, e.LastError)
			}
		}
		log, err := os.ReadFile(filepath.Join(state, "deploys.log"))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(log); got != shaA+"\n"+shaB+"\n" {
			t.Errorf("deploys.log = %q, want one deploy of each commit in order, and no return to A", got)
		}
		if got, _ := os.ReadFile(filepath.Join(state, "deployed_sha")); string(got) != shaB+"\n" {
			t.Errorf("deployed_sha = %q, want B", got)
		}
	})
}
