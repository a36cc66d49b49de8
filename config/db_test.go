package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	mask "github.com/hookbox/hookbox/redact"
)

// TestCheckDB: a db hookbox serve cannot open (a PostgreSQL key=value
// string, a bare path, another scheme) is refused when the file is
// loaded, with the forms to write instead and without the value (its
// password); the forms service.OpenStore opens pass.
func TestCheckDB(t *testing.T) {
	for _, c := range []struct{ db, want string }{
		{"host=db user=hookbox password=S3cretPassw0rd dbname=x", "write it as a URL, postgres://USER:PASSWORD@HOST:5432/DBNAME"},
		{"host=db password='S3cret Passw0rd'", "key=value connection string"},
		{"hookbox.db", "put sqlite: before its path"},
		{"mysql://u:S3cretPassw0rd@h/d", "write sqlite:PATH"},
		{"Postgres://u:S3cretPassw0rd@h/d", "lower case"},
		{"sqlite:", "needs a file path"},
	} {
		_, err := Parse([]byte("db: \"" + c.db + "\"\nsources: [{name: a, scheme: none, store_only: true}]\n"))
		if err == nil || !strings.Contains(err.Error(), "db: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("db %q: error %v, want one containing %q", c.db, err, c.want)
		} else if strings.Contains(err.Error(), "S3cret") {
			t.Errorf("db %q: the error shows the password: %v", c.db, err)
		}
		if CheckDB(c.db) == nil {
			t.Errorf("CheckDB(%q) = nil", c.db)
		}
	}
	for _, db := range []string{"", "sqlite:hookbox.db", "sqlite:///var/lib/hookbox.db", "postgres://u:p@h/d?sslmode=disable", "postgresql://h/d"} {
		if err := CheckDB(db); err != nil {
			t.Errorf("CheckDB(%q) = %v", db, err)
		}
	}
}

// TestMaskDB: config check's copy masks the password of a key=value
// connection string, quoted (libpq rules: 'a b', \' inside) or not, and
// keeps the rest readable.
func TestMaskDB(t *testing.T) {
	for _, c := range []struct{ db, want string }{
		{"host=db user=hookbox password=S3cretPassw0rd dbname=x", "host=db user=hookbox password=" + mask.Mask + " dbname=x"},
		{`host=db password = 'S3cret Pass\'w0rd' dbname=x`, "host=db password = " + mask.Mask + " dbname=x"},
		{`password=S3cret\ Passw0rd sslpassword='S3cret' user=u`, "password=" + mask.Mask + " sslpassword=" + mask.Mask + " user=u"},
		{"host=db password='S3cret unterminated", mask.Mask},
		{"postgres://u:S3cretPassw0rd@h/d", "postgres://u:" + mask.Mask + "@h/d"},
		{"sqlite:hookbox.db", "sqlite:hookbox.db"},
	} {
		if got := MaskDB(c.db); got != c.want {
			t.Errorf("MaskDB(%q) = %q, want %q", c.db, got, c.want)
		}
		if got := (&Config{DB: c.db}).Masked().DB; strings.Contains(got, "S3cret") {
			t.Errorf("Masked shows the password of %q: %q", c.db, got)
		}
	}
}

// TestMaskDBPasswordAsPgxReadsIt: MaskDB, Masked and DBSecrets find the
// password of a PostgreSQL URL where pgx (whose parser follows libpq's)
// finds it. They used net/url, for which '#' starts a fragment and a '%'
// without two hex digits is an error: a URL pgx connects with, password
// "Pa#ssXYZ", was shown whole by config check and by serve's "db is not
// used" warning, and its password was masked in no log line. A URL
// neither can read (a bad '%', a bad port, a password holding '/') has
// everything that may be its password masked all the same.
func TestMaskDBPasswordAsPgxReadsIt(t *testing.T) {
	for _, c := range []struct{ db, pw, want string }{
		{"postgres://hook:Pa#ssXYZ@127.0.0.1:5432/hb?sslmode=disable", "Pa#ssXYZ", "postgres://hook:" + mask.Mask + "@127.0.0.1:5432/hb?" + mask.Mask},
		{"postgres://hook:12#ssXYZ@db.internal:5432/hb", "12#ssXYZ", "postgres://hook:" + mask.Mask + "@db.internal:5432/hb"},
		{"postgresql://hook:Pa?ssXYZ@db.internal/hb", "Pa?ssXYZ", "postgresql://hook:" + mask.Mask + "@db.internal/hb"},
		{"postgres://hook:Pa%23ss%40XYZ@db.internal/hb", "Pa#ss@XYZ", "postgres://hook:" + mask.Mask + "@db.internal/hb"},
		{"postgres://db.internal/hb?user=hook&password=Pa%23ssXYZ", "Pa#ssXYZ", "postgres://db.internal/hb?" + mask.Mask},
		// pgx refuses these; the text is masked all the same.
		{"postgres://hook:Pa%ssw0rdXYZ@127.0.0.1:5432/hb", "", "postgres://hook:" + mask.Mask + "@127.0.0.1:5432/hb"},
		{"postgresql://hook:S3cretXYZ@db.internal:54x2/hb", "", "postgresql://hook:" + mask.Mask + "@db.internal:54x2/hb"},
		{"postgres://hook:Pa/ssXYZ@db.internal/hb", "", "postgres://" + mask.Mask + "@db.internal/hb"},
		{"postgres://hook:Pa@ssXYZ@db.internal/hb", "", "postgres://hook:" + mask.Mask + "@db.internal/hb"},
	} {
		if c.pw != "" {
			pc, err := pgconn.ParseConfig(c.db)
			if err != nil || pc.Password != c.pw {
				t.Fatalf("pgx reads %q as password %q (%v), want %q", c.db, pc.Password, err, c.pw)
			}
		} else if _, err := pgconn.ParseConfig(c.db); err == nil && !strings.Contains(c.db, "@ss") {
			t.Fatalf("pgx accepts %q", c.db)
		}
		if got := MaskDB(c.db); got != c.want {
			t.Errorf("MaskDB(%q) = %q, want %q", c.db, got, c.want)
		}
		if got := (&Config{DB: c.db}).Masked().DB; strings.Contains(got, "XYZ") {
			t.Errorf("Masked().DB of %q = %q: the password is shown", c.db, got)
		}
		if got := DisplayDB(c.db); strings.Contains(got, "XYZ") || strings.Contains(got, "hook:") {
			t.Errorf("DisplayDB(%q) = %q: the password is shown, in part or whole", c.db, got)
		}
		if c.pw != "" && !slices.Contains(DBSecrets(c.db), c.pw) {
			t.Errorf("DBSecrets(%q) = %q, without the password pgx connects with", c.db, DBSecrets(c.db))
		}
	}
}

// TestSQLitePath: the file a sqlite: URL names is what follows "sqlite:",
// less a leading "//", as the README says; serve, migrate and CheckDB all
// read it through SQLitePath.
func TestSQLitePath(t *testing.T) {
	for db, want := range map[string]string{
		"sqlite:hookbox.db":          "hookbox.db",
		"sqlite:data/hookbox.db":     "data/hookbox.db",
		"sqlite://data/hookbox.db":   "data/hookbox.db",
		"sqlite:///var/lib/h.db":     "/var/lib/h.db",
		"sqlite:/var/lib/h.db":       "/var/lib/h.db",
		"sqlite:////double/slash.db": "//double/slash.db",
	} {
		if got := SQLitePath(db); got != want {
			t.Errorf("SQLitePath(%q) = %q, want %q", db, got, want)
		}
	}
}

// TestCheckDBWrappedURL: a URL with something around it that is no part
// of it (quotes an env file kept, spaces, the variable's name pasted in)
// or a scheme missing its colon is refused with what is wrong, never with
// the value; a key=value string that names a database "postgres" is still
// read as one.
func TestCheckDBWrappedURL(t *testing.T) {
	for db, want := range map[string]string{
		`"postgres://hook:S3cretXYZ@127.0.0.1:5432/hb"`: "is in quotes",
		`'postgres://hook:S3cretXYZ@127.0.0.1:5432/hb'`: "is in quotes",
		" postgres://u:S3cretXYZ@127.0.0.1:5999/db":     "spaces",
		"postgres://u:S3cretXYZ@127.0.0.1:5999/db\n":    "spaces",
		"HOOKBOX_DB=postgres://u:S3cretXYZ@h/db":        "starts with a variable's name and '=' (HOOKBOX_DB=)",
		"DATABASE_URL=postgresql://u:S3cretXYZ@h/db":    "(DATABASE_URL=)",
		"postgres//u:S3cretXYZ@h/db":                    "a colon, then two slashes",
		"postgres;//u:S3cretXYZ@h/db":                   "a colon, then two slashes",
		"postgres:/u:S3cretXYZ@h/db":                    "two slashes",
		"dbname=postgres host=h password=S3cretXYZ":     "key=value connection string",
	} {
		err := CheckDB(db)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckDB(%q) = %v, want %q", db, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "S3cret") {
			t.Errorf("CheckDB(%q) shows the password: %v", db, err)
		}
	}
}

// TestMaskDBMalformed: MaskDB hides the password of a database value that
// is no URL it can split, in every form an operator may write by mistake
// (it returned them as they were, password included): a URL in quotes,
// after a space or NAME=, with one slash or none, without its colon, or
// text with credentials of no known form. What cannot hold a password
// stays readable.
func TestMaskDBMalformed(t *testing.T) {
	for db, want := range map[string]string{
		`"postgres://hook:S3cretXYZ@127.0.0.1:5432/hb"`:   `"postgres://hook:` + mask.Mask + `@127.0.0.1:5432/hb"`,
		`'postgres://hook:S3cretXYZ@127.0.0.1:5432/hb'`:   `'postgres://hook:` + mask.Mask + `@127.0.0.1:5432/hb'`,
		" postgres://u:S3cretXYZ@127.0.0.1:5999/db":       " postgres://u:" + mask.Mask + "@127.0.0.1:5999/db",
		"HOOKBOX_DB=postgres://u:S3cretXYZ@h/db?x=1":      "HOOKBOX_DB=postgres://u:" + mask.Mask + "@h/db?" + mask.Mask,
		"HOOKBOX_DB='postgres:/u:S3cretXYZ@h/db'":         "HOOKBOX_DB=" + mask.Mask,
		"postgres:/u:S3cretXYZ@h/db":                      "postgres:" + mask.Mask + "@h/db",
		"postgres:u:S3cretXYZ@h/db":                       "postgres:" + mask.Mask + "@h/db",
		"postgres//u:S3cretXYZ@h/db":                      "postgres//u:" + mask.Mask + "@h/db",
		"postgres;//u:S3cretXYZ@h/db?sslpassword=S3cretX": mask.Mask,
		"u:S3cretXYZ@h":        "u:" + mask.Mask + "@h",
		"S3cretXYZ@h":          mask.Mask + "@h",
		"postgres:u:S3cretXYZ": "postgres:" + mask.Mask,
		// key=value text that does not parse is masked whole: any part
		// of it may be the password (a first version showed s3cr3t).
		"host=db password='S3cretXYZ:pw":        mask.Mask,
		"host=db user=u password=S3cret@ss:w x": mask.Mask,
		"sqlite:data/hookbox.db":                "sqlite:data/hookbox.db",
		"hookbox.db":                            "hookbox.db",
	} {
		if got := MaskDB(db); got != want {
			t.Errorf("MaskDB(%q) = %q, want %q", db, got, want)
		}
		if got := (&Config{DB: db}).Masked().DB; strings.Contains(got, "S3cret") {
			t.Errorf("Masked().DB of %q = %q: the password is shown", db, got)
		}
	}
}
