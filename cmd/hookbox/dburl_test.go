package main

import (
	"fmt"
	"strings"
	"testing"
)

// dbCommands are the commands that open the database, as the tests run
// them (their --db given apart).
var dbCommands = [][]string{
	{"migrate"},
	{"events", "list", "--limit", "1"},
	{"events", "show", "1"},
	{"replay", "1", "--dry-run"},
	{"replay", "--status", "dead", "--dry-run"},
	{"purge", "--days", "1", "--dry-run"},
	{"tail", "-n", "1"},
	{"targets", "list"},
	{"rejected", "list"},
	{"rejected", "show", "1"},
}

// TestDatabaseCommandsHideMalformedURLPassword: every command that opens
// the database refuses a URL written slightly wrong (quotes an env file
// kept, a space, one slash, no colon, HOOKBOX_DB= pasted in) with
// config.CheckDB's reason, as serve does, and never with the value: it
// printed the whole value, password included, from --db and HOOKBOX_DB
// alike.
func TestDatabaseCommandsHideMalformedURLPassword(t *testing.T) {
	for _, c := range []struct{ db, want string }{
		{`"postgres://hook:QuotedPwXYZ@127.0.0.1:5432/hb"`, "is in quotes"},
		{`'postgres://hook:QuotedPwXYZ@127.0.0.1:5432/hb'`, "is in quotes"},
		{" postgres://u:SpacePwXYZ@127.0.0.1:5999/db", "spaces"},
		{"postgres:/u:SlashPwXYZ@h/db", "two slashes"},
		{"postgres//u:ColonPwXYZ@h/db", "a colon, then two slashes"},
		{"postgres;//u:SemiPwXYZ@h/db", "a colon, then two slashes"},
		{"HOOKBOX_DB=postgres://u:TwicePwXYZ@h/db", "starts with a variable's name"},
	} {
		for _, args := range dbCommands {
			check := func(how string, err error, out, errOut string) {
				t.Helper()
				name := strings.Join(args, " ") + " " + how + " " + c.want
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: %v, want CheckDB's reason %q", name, err, c.want)
				}
				if all := fmt.Sprint(err) + out + errOut; strings.Contains(all, "PwXYZ") {
					t.Errorf("%s: the password is shown: %s", name, all)
				}
			}
			out, errOut, err := runCLI(t, append(args, "--db", c.db)...)
			check("--db", err, out, errOut)
			t.Setenv("HOOKBOX_DB", c.db)
			out, errOut, err = runCLI(t, args...)
			check("HOOKBOX_DB", err, out, errOut)
			t.Setenv("HOOKBOX_DB", "")
		}
	}
}
