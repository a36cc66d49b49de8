package config

import (
	"strings"
	"testing"

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
