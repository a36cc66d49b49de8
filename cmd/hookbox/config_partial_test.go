package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDatabaseCommandsWithoutSecrets: with the sources' secrets only in
// the service's environment (the layout of docs/deploy.md), the commands
// that work on the database read the same config file in an operator's
// shell where those variables are unset: migrate, events list and targets
// list work, while serve, which verifies deliveries, still refuses to
// start, naming the variables.
func TestDatabaseCommandsWithoutSecrets(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, `admin_token: "${HB_PARTIAL_ADMIN}"
sources:
  - name: gh
    scheme: github
    secrets: ["${HB_PARTIAL_GH}"]
    targets:
      - name: app
        forward: http://127.0.0.1:9/
        forward_headers: {Authorization: "Bearer ${HB_PARTIAL_APP}"}
`)
	db := "sqlite:" + filepath.Join(dir, "h.db")
	mustCLI(t, "migrate", "--config", path, "--db", db)
	if out := mustCLI(t, "events", "list", "--config", path, "--db", db); strings.Contains(out, "HB_PARTIAL") {
		t.Errorf("events list: %s", out)
	}
	if out := mustCLI(t, "targets", "list", "--config", path, "--db", db); !strings.Contains(out, "gh/app") {
		t.Errorf("targets list does not show gh/app:\n%s", out)
	}
	_, _, err := runCLI(t, "serve", "--config", path, "--db", db, "--listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "HB_PARTIAL_GH") || !strings.Contains(err.Error(), "not set") {
		t.Errorf("serve with the secrets unset: %v, want an error naming HB_PARTIAL_GH", err)
	}
}

// TestDatabaseCommandsNeedTheirOwnKeys: what those commands do read is
// still expanded strictly: an unset variable in db is an error, not the
// default database.
func TestDatabaseCommandsNeedTheirOwnKeys(t *testing.T) {
	path := writeConfig(t, "db: \"${HB_PARTIAL_DB}\"\nsources:\n  - {name: gh, scheme: github, secrets: [\"${HB_PARTIAL_GH}\"]}\n")
	_, _, err := runCLI(t, "events", "list", "--config", path)
	if err == nil || !strings.Contains(err.Error(), "db (line 1): environment variable HB_PARTIAL_DB is not set") {
		t.Errorf("events list with db's variable unset: %v", err)
	}
}

// TestDatabaseCommandsWithDBElsewhere: a database named by --db or
// $HOOKBOX_DB replaces the config's db, so a variable in db that is set
// only in the service's environment does not stop those commands (it
// did: the config's db was expanded strictly though not used).
func TestDatabaseCommandsWithDBElsewhere(t *testing.T) {
	path := writeConfig(t, "db: \"${HB_PARTIAL_DB}\"\nsources:\n  - {name: gh, scheme: github, secrets: [\"${HB_PARTIAL_GH}\"], targets: [{name: app, forward: \"http://127.0.0.1:9/\"}]}\n")
	db := "sqlite:" + filepath.Join(t.TempDir(), "h.db")
	mustCLI(t, "migrate", "--config", path, "--db", db)
	if out := mustCLI(t, "targets", "list", "--config", path, "--db", db); !strings.Contains(out, "gh/app") {
		t.Errorf("targets list --db does not show gh/app:\n%s", out)
	}
	t.Setenv("HOOKBOX_DB", db)
	mustCLI(t, "events", "list", "--config", path)
}
