package service_test

import (
	"strings"
	"testing"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/service"
)

// TestRedactorMasksExecEnv: the values of exec_env, a source's and a
// target's, are masked with the other secrets: a command that prints its
// environment, or fails quoting it, puts them in its output, which goes
// to the log and to the attempt's error.
func TestRedactorMasksExecEnv(t *testing.T) {
	cfg, err := config.Parse([]byte(`
sources:
  - name: a
    scheme: github
    secrets: ["source-secret-1"]
    exec: ["true"]
    exec_env: ["API_KEY=sk_live_source_env_1"]
  - name: b
    scheme: none
    targets:
      - name: t
        exec: ["true"]
        exec_env: ["TOKEN=target-env-secret-2", "EMPTY="]
`))
	if err != nil {
		t.Fatal(err)
	}
	out := service.Redactor(cfg).String("exec: sh: exit code 3; output: using key sk_live_source_env_1 and target-env-secret-2")
	for _, secret := range []string{"sk_live_source_env_1", "target-env-secret-2"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q shown: %s", secret, out)
		}
	}
	if !strings.Contains(out, "exit code 3") {
		t.Errorf("the rest of the text was masked too: %s", out)
	}
}

// TestOpenStoreHidesAConnectionStringPassword: a database given as a
// key=value connection string, which hookbox does not open, is refused
// without its password in the error (only URLs' passwords were hidden).
func TestOpenStoreHidesAConnectionStringPassword(t *testing.T) {
	_, err := service.OpenStore(t.Context(), "host=db user=hookbox password=S3cretPassw0rd dbname=x", service.StoreOptions{})
	if err == nil || strings.Contains(err.Error(), "S3cretPassw0rd") {
		t.Errorf("OpenStore = %v, want an error without the password", err)
	}
}

// TestRedactorMasksForwardHeaderCredential: the service's Redactor, which
// masks its log lines, masks the credential of a forward header shaped
// "scheme credential" on its own, as an app may quote it in a reply that
// a log line shows. It had the header's whole value only.
func TestRedactorMasksForwardHeaderCredential(t *testing.T) {
	cfg, err := config.Parse([]byte(`
sources:
  - name: a
    scheme: none
    forward: http://127.0.0.1:9/hook
    forward_headers: {Authorization: "Bearer app-secret-token-123456"}
  - name: b
    scheme: none
    targets:
      - name: t
        forward: http://127.0.0.1:9/hook
        forward_headers: {X-Api-Auth: "Token target-token-654321"}
`))
	if err != nil {
		t.Fatal(err)
	}
	out := service.Redactor(cfg).String(`forward: 401 Unauthorized: {"error":"invalid token app-secret-token-123456 or target-token-654321"}`)
	for _, secret := range []string{"app-secret-token-123456", "target-token-654321"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q shown: %s", secret, out)
		}
	}
}
