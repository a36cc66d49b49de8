package config

import (
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	mask "github.com/hookbox/hookbox/redact"
)

// dbForms names the database values hookbox opens, for messages.
const dbForms = "write sqlite:PATH (sqlite:hookbox.db) or a PostgreSQL URL, postgres://USER:PASSWORD@HOST:5432/DBNAME?sslmode=require"

// CheckDB reports why hookbox cannot open the database db names, or nil:
// the rule service.OpenStore applies, so that a value serve would refuse
// is refused when the file is loaded and by config check. "" (the
// default, DefaultDB), "sqlite:PATH" (a "//" after "sqlite:" is dropped:
// "sqlite://rel" is the relative path rel, "sqlite:///abs" the absolute
// /abs), "postgres://…" and "postgresql://…" are accepted. The message never repeats db, which may
// hold a password or come from the environment; it reads after the name
// of where db came from ("db: …", "--db: …").
func CheckDB(db string) error {
	if err := checkDBWrapping(db); err != nil {
		return err
	}
	switch {
	case db == "", strings.HasPrefix(db, "postgres://"), strings.HasPrefix(db, "postgresql://"):
		return nil
	case strings.HasPrefix(db, "sqlite:"):
		path := SQLitePath(db)
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
	case isPrefixFold(db, "postgres") && !strings.HasPrefix(strings.ToLower(db), "postgres="):
		// postgres//…, postgres;//…: the colon is missing or mistyped.
		return errors.New("a PostgreSQL URL starts with postgres:// (a colon, then two slashes): " + dbForms)
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

// checkDBWrapping reports a database value that holds a URL with
// something around it that is no part of it: spaces, the quotes an
// env file kept (docker and podman --env-file keep them as part of the
// value), or the variable's own name (HOOKBOX_DB=… pasted as the value).
// Its messages never repeat db either.
func checkDBWrapping(db string) error {
	if strings.TrimSpace(db) != db {
		return errors.New("has spaces or line breaks before or after it: write the URL alone (an env file or a quoted shell value may have kept them); " + dbForms)
	}
	if db != "" && strings.ContainsAny(db[:1], `"'`+"`") {
		return errors.New("is in quotes, which are taken as part of it: write it without them (docker and podman --env-file keep quotes: HOOKBOX_DB=postgres://…, not HOOKBOX_DB=\"postgres://…\"); " + dbForms)
	}
	if name, rest, ok := strings.Cut(db, "="); ok && envName.MatchString(name) &&
		(strings.EqualFold(name, "HOOKBOX_DB") || isPrefixFold(rest, "postgres:") || isPrefixFold(rest, "postgresql:") || isPrefixFold(rest, "sqlite:")) {
		return errors.New("starts with a variable's name and '=' (" + name + "=): set the variable to the URL alone, without its name; " + dbForms)
	}
	return nil
}

// envName matches an environment variable's name, or a key of a
// key=value connection string.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// SQLitePath is the file a "sqlite:" database URL names: what follows
// "sqlite:", less a leading "//" (see CheckDB).
func SQLitePath(db string) string {
	return strings.TrimPrefix(strings.TrimPrefix(db, "sqlite:"), "//")
}

// isSQLite reports whether db names a SQLite database: "" (DefaultDB)
// or a sqlite: URL.
func isSQLite(db string) bool {
	return db == "" || strings.HasPrefix(db, "sqlite:")
}

// sqliteQuery matches what follows the "?" of a sqlite: path that is a
// query string (_pragma=…, mode=ro), not part of a file name.
var sqliteQuery = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// isPrefixFold reports whether s starts with prefix, case aside.
func isPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// MaskDB returns db, a database URL or a PostgreSQL key=value connection
// string, with its secrets replaced by redact.Mask: a URL's password (or
// whatever may hold it, see splitURL) and query; the values of password
// and sslpassword (and any key holding "password"), quoted ('a b') or
// not, in a key=value string. A URL with text before it (quotes, spaces,
// HOOKBOX_DB=) is masked as a URL, the text kept; a key=value value that
// holds '@' (a URL's credentials) is masked; a key=value string that does
// not parse is masked whole. Other text that holds '@' keeps only what
// comes before its first ':' and after its last '@' (the query masked),
// and other text that holds ':' only what comes before the first: a value
// nothing can parse may still be a URL written wrong (postgres:/u:pw@h,
// postgres//u:pw@h), with a password in it. Text with neither, a path,
// is returned as it is.
func MaskDB(db string) string {
	if strings.HasPrefix(db, "sqlite:") {
		return db // a file's path
	}
	if u, ok := splitURL(db); ok {
		var b strings.Builder
		b.WriteString(u.scheme)
		switch {
		case u.unclear:
			b.WriteString(mask.Mask + "@")
		case u.hasUserinfo:
			b.WriteString(u.user)
			if u.hasPassword {
				b.WriteString(":" + mask.Mask)
			}
			b.WriteString("@")
		}
		b.WriteString(u.rest)
		if u.hasQuery {
			b.WriteString("?" + mask.Mask)
		}
		return b.String()
	}
	if at := embeddedURL(db); at > 0 {
		return db[:at] + MaskDB(db[at:])
	}
	params, ok := parseConninfo(db)
	if ok {
		var b strings.Builder
		last := 0
		for _, p := range params {
			if strings.Contains(strings.ToLower(p.key), "password") || strings.Contains(db[p.start:p.end], "@") {
				b.WriteString(db[last:p.start])
				b.WriteString(mask.Mask)
				last = p.end
			}
		}
		b.WriteString(db[last:])
		return b.String()
	}
	if strings.Contains(db, "=") {
		return mask.Mask // a key=value string that does not parse: any part may be its password
	}
	if at := strings.LastIndexByte(db, '@'); at >= 0 {
		head := db[:at]
		if colon := strings.IndexByte(head, ':'); colon >= 0 {
			head = head[:colon+1]
		} else {
			head = ""
		}
		rest, _, hasQuery := strings.Cut(db[at+1:], "?")
		if hasQuery {
			rest += "?" + mask.Mask
		}
		return head + mask.Mask + "@" + rest
	}
	if u, err := url.Parse(db); err == nil && u.Scheme != "" && u.Opaque == "" {
		return maskURL(db) // sqlite:PATH, postgres:/HOST/DB
	}
	if colon := strings.IndexByte(db, ':'); colon >= 0 {
		return db[:colon+1] + mask.Mask
	}
	return db
}

// embeddedURL returns where a URL with "://" starts in db after other
// text (a quote, a space, NAME=), or 0 when db holds none or starts with
// it.
func embeddedURL(db string) int {
	i := strings.Index(db, "://")
	if i < 0 {
		return 0
	}
	start := i
	for start > 0 && isSchemeByte(db[start-1]) {
		start--
	}
	for start < i && !isLetter(db[start]) {
		start++
	}
	if start == i || start == 0 {
		return 0
	}
	return start
}

// isSchemeByte reports whether c may be part of a URL scheme.
func isSchemeByte(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// DisplayDB returns db as the start line shows it: a URL reduced to its
// scheme, user, hosts and path (its password and query, which may hold
// one, left out; "…" in place of what may hold a password where the URL
// cannot be split for sure, see splitURL); anything else (a sqlite: URL)
// as it is.
func DisplayDB(db string) string {
	u, ok := splitURL(db)
	if !ok {
		return db
	}
	switch {
	case u.unclear:
		return u.scheme + "…@" + u.rest
	case u.hasUserinfo && u.user != "":
		return u.scheme + u.user + "@" + u.rest
	}
	return u.scheme + u.rest
}

// DBSecrets returns the secrets db, a database URL, holds, as a
// Redactor takes them: its password as written and percent-decoded (read
// as pgx and libpq read a PostgreSQL URL, and as splitURL keeps it from
// being shown, when the two differ), and the values of the query
// parameters whose names hold "password" (sslpassword). It is nil for
// anything else.
func DBSecrets(db string) []string {
	u, ok := splitURL(db)
	if !ok {
		return nil
	}
	var out []string
	add := func(raw string) {
		if raw != "" {
			out = append(out, raw, decodeLenient(raw), strings.TrimSpace(decodeLenient(raw)))
		}
	}
	if u.unclear {
		add(u.userinfo)
	}
	add(u.password)
	add(u.libpqPassword)
	if u.hasQuery {
		for _, kv := range strings.Split(u.query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			if strings.Contains(strings.ToLower(decodeLenient(k)), "password") {
				add(v)
			}
		}
	}
	return out
}

// splitDB is a database URL split where its secrets may be.
type splitDB struct {
	scheme string // "postgres://", as written
	// userinfo is what comes before the '@' that ends it: the last '@'
	// before the first '/'; user and password are its parts around its
	// first ':'.
	userinfo, user, password string
	hasUserinfo, hasPassword bool
	// libpqPassword is the password as libpq and pgx read it: their
	// userinfo ends at the first '@' (a password holding '@' is written
	// %40); it differs from password only in a URL they cannot use.
	libpqPassword string
	// unclear: no '@' comes before the first '/', but one comes after it.
	// libpq then reads no password (and most likely fails on the host or
	// port), but the text before the last '@' may be a password holding
	// '/': userinfo is all of it, and is shown as no part.
	unclear bool
	// rest is the hosts and path, between the userinfo and the query.
	rest string
	// query is what follows the first '?' after the userinfo.
	query    string
	hasQuery bool
}

// splitURL splits db, a URL with "://" other than a sqlite: one, as libpq
// splits a PostgreSQL URL (and pgx, whose parser follows libpq's): no
// character but '/' ends the userinfo's search, so '#' and '?' are part of
// a password, where net/url would take them for a fragment or a query
// and a password "Pa#ss" would be shown, in part or whole. It never
// fails on the text itself (a '%' not followed by two hex digits, a bad
// port), so a URL nothing could connect with still has its password
// found. ok is false when db is not such a URL.
func splitURL(db string) (u splitDB, ok bool) {
	scheme, after, ok := strings.Cut(db, "://")
	if !ok || !validScheme(scheme) || strings.EqualFold(scheme, "sqlite") {
		return splitDB{}, false
	}
	u.scheme = scheme + "://"
	head := after[:indexOr(after, "/", len(after))]
	if at := strings.LastIndexByte(head, '@'); at >= 0 {
		u.hasUserinfo = true
		u.userinfo, after = head[:at], after[at+1:]
		u.user, u.password, u.hasPassword = strings.Cut(u.userinfo, ":")
		first := head[:strings.IndexByte(head, '@')]
		_, u.libpqPassword, _ = strings.Cut(first, ":")
	} else if at := strings.LastIndexByte(after, '@'); at >= 0 {
		u.hasUserinfo, u.unclear = true, true
		u.userinfo, after = after[:at], after[at+1:]
	}
	u.rest, u.query, u.hasQuery = strings.Cut(after, "?")
	return u, true
}

// validScheme reports whether s is a URL scheme: a letter, then letters,
// digits, '+', '-' or '.'.
func validScheme(s string) bool {
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// indexOr is strings.Index, with def when sep is not in s.
func indexOr(s, sep string, def int) int {
	if i := strings.Index(s, sep); i >= 0 {
		return i
	}
	return def
}

// decodeLenient percent-decodes s, leaving as written each '%' not
// followed by two hex digits (which libpq refuses, after a message may
// have shown the text).
func decodeLenient(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// conninfoParam is one key=value of a connection string: its key, and
// where its value (quotes included) starts and ends in the string.
type conninfoParam struct {
	key        string
	start, end int
}

// parseConninfo splits a PostgreSQL key=value connection string as libpq
// does (conninfo_parse): keys (words: letters, digits, '_') and values
// separated by spaces, spaces allowed around '=', a value in single
// quotes may hold spaces, and a backslash escapes the next character,
// quoted or not. ok is false when s is not such a string (a key without
// '=', a key that is no word, an unterminated quote).
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
		if i == len(s) || s[i] != '=' || !envName.MatchString(key) {
			return nil, false // libpq's keys are words: no URL written wrong
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
