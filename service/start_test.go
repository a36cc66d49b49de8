package service

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookbox/hookbox/config"
)

// TestDisplayDB: the start line's database never shows a password, in the
// URL's user part or in its query.
func TestDisplayDB(t *testing.T) {
	for in, want := range map[string]string{
		"sqlite:hookbox.db": "sqlite:hookbox.db",
		"postgres://app:pw-secret-1@db.internal:5432/hooks?sslmode=disable&password=pw-secret-2": "postgres://app@db.internal:5432/hooks",
		"postgresql://db.internal/hooks": "postgresql://db.internal/hooks",
	} {
		if got := config.DisplayDB(in); got != want {
			t.Errorf("config.DisplayDB(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDBPasswordWithHashMasked: the password pgx connects with is masked
// in the service's log lines and left out of the start line when it
// holds '#'. Both read the URL with net/url, which took '#' for the start
// of a fragment: the Redactor did not have the password, and the start
// line showed the part before the '#' (db=postgres://hook:12).
func TestDBPasswordWithHashMasked(t *testing.T) {
	for _, c := range []struct{ db, pw string }{
		{"postgres://hook:Pa#ssXYZ@127.0.0.1:5432/hb?sslmode=disable", "Pa#ssXYZ"},
		{"postgres://hook:12#ssXYZ@127.0.0.1:5432/hb", "12#ssXYZ"},
	} {
		pc, err := pgconn.ParseConfig(c.db)
		if err != nil || pc.Password != c.pw {
			t.Fatalf("pgx reads %q as password %q (%v), want %q", c.db, pc.Password, err, c.pw)
		}
		if got := Redactor(&config.Config{DB: c.db}).String("pq: something quoting " + c.pw); strings.Contains(got, c.pw) {
			t.Errorf("the Redactor for db %q does not mask its password: %q", c.db, got)
		}
		if got := config.DisplayDB(c.db); got != "postgres://hook@127.0.0.1:5432/hb" {
			t.Errorf("config.DisplayDB(%q) = %q, want postgres://hook@127.0.0.1:5432/hb", c.db, got)
		}
	}
}
