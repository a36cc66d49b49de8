package config

import (
	"errors"
	"net/url"
	"regexp"
	"strings"

	mask "github.com/hookbox/hookbox/redact"
)

// dbForms names the database values hookbox opens, for messages.
const dbForms = "write sqlite:PATH (sqlite:hookbox.db) or a PostgreSQL URL, postgres://USER:PASSWORD@HOST:5432/DBNAME?sslmode=require"

// CheckDB reports why hookbox cannot open the database db names, or nil:
// the rule service.OpenStore applies, so that a value serve would refuse
// is refused when the file is loaded and by config check. "" (the
// default, DefaultDB), "sqlite:PATH", "postgres://…" and
// "postgresql://…" are accepted. The message never repeats db, which may
// hold a password or come from the environment; it reads after the name
// of where db came from ("db: …", "--db: …").
func CheckDB(db string) error {
	switch {
	case db == "", strings.HasPrefix(db, "postgres://"), strings.HasPrefix(db, "postgresql://"):
		return nil
	case strings.HasPrefix(db, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(db, "sqlite:"), "//")
		if path == "" {
			return errors.New("sqlite: needs a file path: write sqlite:hookbox.db")
		}
		if _, q, ok := strings.Cut(path, "?"); ok && sqliteQuery.MatchString(q) {
			// The SQLite store takes the path as a file name ('?' is part
			// of it), so a query would create a file named with it.
			return errors.New("sqlite: takes no query string (?NAME=…): hookbox sets its own pragmas, and everything after sqlite: is the file's name, so this would open a file named with the query; write sqlite:PATH alone, and set durability with sqlite.synchronous (an earlier hookbox did open that file: if your events are in it, rename it to PATH first)")
		}
		return nil
	case isPrefixFold(db, "postgres://"), isPrefixFold(db, "postgresql://"), isPrefixFold(db, "sqlite:"):
		return errors.New("the scheme must be written in lower case: " + dbForms)
	case isPrefixFold(db, "postgres:"), isPrefixFold(db, "postgresql:"):
		return errors.New("a PostgreSQL URL starts with postgres:// (two slashes): " + dbForms)
	}
	if _, ok := parseConninfo(db); ok {
		return errors.New("is a PostgreSQL key=value connection string, which hookbox does not read: " +
			"write it as a URL, postgres://USER:PASSWORD@HOST:5432/DBNAME, with other settings as query parameters (?sslmode=require)")
	}
	if !strings.Contains(db, "://") {
		return errors.New("is neither a sqlite: nor a postgres:// URL; for a SQLite file put sqlite: before its path (sqlite:hookbox.db), " +
			"for PostgreSQL write postgres://USER:PASSWORD@HOST:5432/DBNAME")
	}
	return errors.New("names a database hookbox does not support: " + dbForms)
}

// sqliteQuery matches what follows the "?" of a sqlite: path that is a
// query string (_pragma=…, mode=ro), not part of a file name.
var sqliteQuery = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// isPrefixFold reports whether s starts with prefix, case aside.
func isPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// MaskDB returns db, a database URL or a PostgreSQL key=value connection
// string, with its secrets replaced by redact.Mask: a URL's password and
// query; the values of password and sslpassword (and any key holding
// "password"), quoted ('a b') or not, in a key=value string. A key=value
// string that does not parse is masked whole; other text is returned as
// it is.
func MaskDB(db string) string {
	if u, err := url.Parse(db); err == nil && u.Scheme != "" {
		return maskURL(db)
	}
	params, ok := parseConninfo(db)
	if !ok {
		if strings.Contains(db, "=") {
			return mask.Mask
		}
		return db
	}
	var b strings.Builder
	last := 0
	for _, p := range params {
		if strings.Contains(strings.ToLower(p.key), "password") {
			b.WriteString(db[last:p.start])
			b.WriteString(mask.Mask)
			last = p.end
		}
	}
	b.WriteString(db[last:])
	return b.String()
}

// conninfoParam is one key=value of a connection string: its key, and
// where its value (quotes included) starts and ends in the string.
type conninfoParam struct {
	key        string
	start, end int
}

// parseConninfo splits a PostgreSQL key=value connection string as libpq
// does (conninfo_parse): keys and values separated by spaces, spaces
// allowed around '=', a value in single quotes may hold spaces, and a
// backslash escapes the next character, quoted or not. ok is false when
// s is not such a string (a key without '=', an unterminated quote).
func parseConninfo(s string) (params []conninfoParam, ok bool) {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' }
	i := 0
	for i < len(s) {
		if isSpace(s[i]) {
			i++
			continue
		}
		k := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[k:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) || s[i] != '=' || key == "" {
			return nil, false
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		start := i
		if i < len(s) && s[i] == '\'' {
			i++
			for {
				if i >= len(s) {
					return nil, false
				}
				if s[i] == '\\' {
					i += 2
					continue
				}
				if s[i] == '\'' {
					i++
					break
				}
				i++
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' {
					i++
				}
				i++
			}
		}
		i = min(i, len(s))
		params = append(params, conninfoParam{key: key, start: start, end: i})
	}
	return params, len(params) > 0
}
