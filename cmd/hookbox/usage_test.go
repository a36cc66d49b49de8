package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/internal/dbtest"
)

// runExit runs hookbox args as main does and returns the exit code,
// stdout and stderr.
func runExit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestExitCodes: every error exited 1, so a script could not tell a
// command line it got wrong from a database that is down. Usage errors
// (an unknown command or flag, a bad flag value, a wrong number of
// arguments) now exit 2, failures 1, success 0; health exits 0 or 1 only
// (Docker's HEALTHCHECK reserves 2).
func TestExitCodes(t *testing.T) {
	db := dbtest.SQLiteURL(t)
	if code, _, errOut := runExit(t, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	missing := "sqlite:" + filepath.Join(t.TempDir(), "none.db")
	for _, c := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"version"}, 0, ""},
		{[]string{}, 0, ""},
		{[]string{"events", "list", "--db", db}, 0, ""},
		{[]string{"nosuch"}, 2, `unknown command "nosuch" for "hookbox"`},
		{[]string{"evnts", "list"}, 2, "did you mean events?"},
		{[]string{"events", "lst"}, 2, `unknown command "lst" for "hookbox events"`},
		{[]string{"purge", "--dyas", "3", "--db", db}, 2, "unknown flag: --dyas"},
		{[]string{"purge", "--db", db}, 2, "--days is required"},
		{[]string{"purge", "30", "--db", db}, 2, "takes no arguments"},
		{[]string{"events", "list", "--limit", "x", "--db", db}, 2, `invalid argument "x" for "--limit"`},
		{[]string{"events", "list", "--status", "bogus", "--db", db}, 2, "--status: want"},
		{[]string{"events", "list", "--db-timeout", "x", "--db", db}, 2, "--db-timeout: want a duration"},
		{[]string{"restore-ids", "--gap", "-1", "--db", db}, 2, "--gap and --after take a number"},
		{[]string{"events", "list", "--since", "yesterday", "--db", db}, 2, "--since"},
		{[]string{"rejected", "list", "--status", "999", "--db", db}, 2, "--status: want an HTTP status"},
		{[]string{"events", "show", "--db", db}, 2, "accepts 1 arg(s), received 0"},
		{[]string{"events", "show", "x", "--db", db}, 2, `event id "x"`},
		{[]string{"replay", "--db", db}, 2, "name event ids"},
		{[]string{"targets", "pause", "a", "b", "--db", db}, 2, "accepts 1 arg(s), received 2"},
		{[]string{"targets", "pause", "no spaces", "--db", db}, 2, "is not a target name"},
		{[]string{"tail", "--interval", "0s", "--db", db}, 2, "--interval"},
		{[]string{"send", "--scheme", "none", "--copies", "0"}, 2, "--copies"},
		{[]string{"health", "--nope"}, 1, "unknown flag: --nope"},
		{[]string{"events", "list", "--db", missing}, 1, "hookbox migrate"},
		{[]string{"events", "show", "999", "--db", db}, 1, "999"},
		{[]string{"replay", "999", "--db", db}, 1, "no such event"},
		{[]string{"config", "check", "--config", filepath.Join(t.TempDir(), "nope.yaml")}, 1, "no such file"},
	} {
		code, _, errOut := runExit(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("hookbox %s: exit %d, stderr %q; want exit %d and %q", strings.Join(c.args, " "), code, errOut, c.code, c.want)
		}
	}
}

// TestStrayArgumentsSuggestFlags: a command that takes no arguments
// refused one as `unknown command "30" for "hookbox purge"`; it says it
// takes none and suggests the flag where the mapping is plain.
func TestStrayArgumentsSuggestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"purge", "30"}, `hookbox purge takes no arguments, but was given "30": did you mean --days 30?`},
		{[]string{"rejected", "recheck", "5"}, "did you mean --id 5?"},
		{[]string{"rejected", "recheck", "5", "6"}, "did you mean --id 5 --id 6?"},
		{[]string{"events", "list", "dead"}, "did you mean --status dead?"},
		{[]string{"events", "list", "42"}, "did you mean hookbox events show 42?"},
		{[]string{"events", "list", "stripe"}, "did you mean --source stripe?"},
		{[]string{"rejected", "list", "401"}, "did you mean --status 401?"},
		{[]string{"tail", "stripe"}, "did you mean --source stripe?"},
		{[]string{"tail", "20"}, "did you mean --lines 20?"},
		{[]string{"config", "check", "hookbox.yaml"}, "did you mean --config hookbox.yaml?"},
		{[]string{"serve", "hookbox.yml"}, "did you mean --config hookbox.yml?"},
		{[]string{"migrate", "now", "please"}, `hookbox migrate takes no arguments, but was given "now", "please" (hookbox migrate --help lists its flags)`},
	} {
		_, _, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "unknown command") {
			t.Errorf("hookbox %s: %v; want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
