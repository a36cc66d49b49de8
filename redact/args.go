package redact

import (
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ArgSecrets returns the credentials written in a command's arguments
// argv (an exec target's), for a Redactor to mask wherever the command's
// output or a view of the configuration may show them. An argument that
// holds white space (a shell script after "sh -c") is also read as
// arguments split at white space, with quotes around a word dropped. The
// credentials are:
//
//   - the password in a URL's user info ("postgres://u:PW@host/db",
//     "https://deploy:PW@host/x"), as written and decoded, or the user
//     name of an http or https URL that has no password
//     ("https://TOKEN@host/x", sent as Basic "TOKEN:");
//   - each segment of a URL's path that looks like a credential
//     (SecretPathSegment: the token of a Slack incoming-webhook URL), as
//     the forward target masks its URL's;
//   - the value of a URL query parameter whose name says it holds a
//     credential (CredentialName: "?access_token=X", "&sig=X", "?key=X");
//     other parameters are shown ("?page=2&region=eu-west-1"), as the
//     values found here are masked in every log line, not in one
//     target's errors as a forward URL's whole query is;
//   - the password of curl's -u, --user, -U and --proxy-user
//     "user:password" ("-u admin:PW", "-uadmin:PW", "--user=admin:PW"), or
//     the user name of "TOKEN:";
//   - the value of an option whose name says it holds a credential
//     (CredentialName): "--token=X", "--password X", "-api-key X"; the
//     next argument is taken for the value unless it starts with "-";
//     options named "no-…", names that end in "file", "path" or "dir"
//     (a file that holds the credential, not the credential) or in "name"
//     ("--secret-name prod-db": the name of one), and a record's keys
//     ("--sort-key", "--partition-key": dataKeyWords) are left out, and
//     so is a value that is a URL (its credentials are found as any
//     URL's) or a file's path ("curl --key /etc/ssl/client.key",
//     "-key client.pem": filePath) unless the name says password or
//     secret: the URL after a flag that takes none ("curl --anyauth URL")
//     is the service's address, and the path names the file a failing
//     command complains about, both to be read;
//   - the value of a NAME=value argument or word whose name says so
//     ("PGPASSWORD=X" given to env, "password=X" in a connection string);
//   - the secrets of a "Name: value" argument whose name is a credential
//     header's (IsCredentialHeader), as curl's -H takes it: the value and
//     the credential of "Bearer X" (HeaderSecrets).
//
// For user info and curl's -u, the Basic credential made of
// "user:password" is given in base64 too (what curl -v prints), while the
// user name alone is not a secret and stays readable. Values that read as
// a number, a duration or a boolean ("--token-ttl 3600"), and, in a
// shell script, values holding "$" or "`" (the shell expands them: the
// secret is elsewhere), are left out. So are the rest of each argument
// and every other argument: masking a whole command line would leave an
// operator nothing to read in a failed command's output. The result may
// hold duplicates and values shorter than MinLen (New drops them).
func ArgSecrets(argv []string) []string {
	var out []string
	scanArgs(argv, false, &out)
	for _, a := range argv {
		if strings.ContainsAny(a, " \t\n") {
			words := strings.Fields(a)
			for i, w := range words {
				words[i] = unquote(w)
			}
			scanArgs(words, true, &out)
		}
	}
	return out
}

// CredentialName reports whether an option, parameter or variable called
// name usually holds a credential, as its name says (case aside): by the
// words of IsCredentialHeader (token, secret, pass: password, passphrase;
// key: api-key, access_key; auth, but not as part of author; sign:
// signature, X-Amz-Signature; hmac, credential, cookie, session), or pwd.
func CredentialName(name string) bool {
	lower := strings.ReplaceAll(strings.ToLower(name), "author", "")
	return strings.Contains(lower, "pwd") || IsCredentialHeader(lower)
}

// credentialParam reports whether a URL query parameter called name holds
// a credential: CredentialName, or one of the short names services use
// for one (Azure's SAS "sig", Azure Functions' key "code").
func credentialParam(name string) bool {
	switch strings.ToLower(name) {
	case "sig", "code":
		return true
	}
	return CredentialName(name)
}

// userOptions are curl's options whose value is "user:password".
var userOptions = map[string]bool{"-u": true, "--user": true, "-U": true, "--proxy-user": true}

// scanArgs appends to out the credentials of args, words of a shell
// script when script is set.
func scanArgs(args []string, script bool, out *[]string) {
	add := func(v string) {
		v = unquote(v)
		if v == "" || plainArg(v) || script && strings.ContainsAny(v, "$`") {
			return
		}
		*out = append(*out, v)
	}
	for i, a := range args {
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		urlSecrets(a, add)
		if name, value, ok := strings.Cut(a, ":"); ok && !script && IsCredentialHeader(name) && headerName(name) && strings.TrimSpace(value) != "" {
			// A header, as curl's -H takes it: "Authorization: Bearer X".
			for _, v := range HeaderSecrets(strings.TrimSpace(value)) {
				add(v)
			}
			continue
		}
		if userOptions[a] {
			userPassword(next, add)
			continue
		}
		if strings.HasPrefix(a, "-u") && !strings.HasPrefix(a, "--") && len(a) > 2 && curlUser(a[2:]) {
			userPassword(a[2:], add) // curl's -uuser:password
		}
		name, value, hasValue := strings.Cut(a, "=")
		option := strings.HasPrefix(name, "-")
		name = strings.TrimLeft(name, "-")
		if userOptions["--"+name] && option && hasValue {
			userPassword(value, add)
			continue
		}
		if !credentialOption(name) || strings.ContainsAny(name, ":/ ") {
			continue
		}
		switch {
		case hasValue && !addressValue(name, value) && !fileValue(name, value):
			add(value)
		case !hasValue && option && next != "" && !strings.HasPrefix(next, "-") && !addressValue(name, next) && !fileValue(name, next):
			add(next)
		}
	}
}

// curlUser reports whether v, what follows "-u" in one argument, can be
// curl's "user:password" rather than the rest of an option's name and
// value, as Go's flag package writes them ("-url=https://…",
// "-upstream=host:port"): it holds no "=" before its ":" and is no URL.
func curlUser(v string) bool {
	user, _, _ := strings.Cut(v, ":")
	return !strings.Contains(user, "=") && !isURL(v)
}

// addressValue reports whether v, the value of the option (or variable)
// name, is a URL to show, its credentials masked as any URL's
// (urlSecrets), rather than a credential to mask whole: the URL after a
// flag that takes no value ("curl --anyauth URL", "wget
// --keep-session-cookies URL"), or given to one whose name says auth,
// token or key ("--auth-url=URL"), is the address of a service, and taken
// whole it was masked in every line that names it. A value given to a
// password or a secret is one whatever it looks like.
func addressValue(name, v string) bool {
	if !isURL(v) {
		return false
	}
	return !namesPassword(name)
}

// namesPassword reports whether the option or variable name says
// password or secret: its value is a credential whatever it looks like.
func namesPassword(name string) bool {
	lower := strings.ToLower(name)
	for _, w := range []string{"password", "passwd", "passphrase", "pwd", "secret"} {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return lower == "pass"
}

// fileValue reports whether v, the value of the option (or variable)
// name, is the path of a file to show rather than a credential to mask:
// "curl --key /etc/ssl/client.key", "openssl s_client -key key.pem",
// "sslkey=~/.postgresql/client.key". The file holds the credential; its
// path, masked in every line that names it, would hide what an operator
// needs most when the command fails ("could not load PEM client
// certificate from …"). It is a path (filePath), and name does not say
// password or secret, whose values are credentials whatever they look
// like, as in addressValue.
func fileValue(name, v string) bool {
	if !filePath(unquote(v)) {
		return false
	}
	return !namesPassword(name)
}

// keyFileExtensions are the extensions of files that hold keys,
// certificates and credentials, by which a bare file name ("client.key")
// is told from a credential.
var keyFileExtensions = []string{".pem", ".key", ".crt", ".cer", ".der", ".p8", ".p12", ".pfx", ".jks", ".keystore", ".pub", ".ppk", ".asc", ".gpg", ".json", ".txt", ".env"}

// filePath reports whether v is a file's path rather than a credential:
// it starts as a path does ("/", "./", "../", "~/", "C:\") or, relative,
// ends in a key file's extension (keyFileExtensions), and each of its
// segments is a file name as people write them (pathSegment). Random
// credentials mix cases and digits throughout: the chance that one of
// MinLen bytes or more reads as such a path is negligible.
func filePath(v string) bool {
	rest := v
	if len(v) >= 3 && ('a' <= v[0]|0x20 && v[0]|0x20 <= 'z') && v[1] == ':' && (v[2] == '\\' || v[2] == '/') {
		rest = v[3:] // a Windows drive
	}
	segs := strings.FieldsFunc(rest, func(r rune) bool { return r == '/' || r == '\\' })
	if len(segs) == 0 {
		return false
	}
	prefixed := rest != v || strings.HasPrefix(v, "/") || strings.HasPrefix(v, "./") || strings.HasPrefix(v, "../") || strings.HasPrefix(v, "~/")
	if !prefixed {
		last := strings.ToLower(segs[len(segs)-1])
		known := false
		for _, ext := range keyFileExtensions {
			known = known || strings.HasSuffix(last, ext) && len(last) > len(ext)
		}
		if !known {
			return false
		}
	}
	for _, seg := range segs {
		if !pathSegment(seg) {
			return false
		}
	}
	return true
}

// pathSegment reports whether seg reads as a directory's or a file's
// name: lower-case letters, digits, ".", "-", "_" and "~" ("client.key",
// "id_ed25519", ".ssh"), the first letter alone allowed upper-case
// ("Users", "Documents").
func pathSegment(seg string) bool {
	for i, c := range []byte(seg) {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '.', c == '-', c == '_', c == '~':
		case i == 0 && 'A' <= c && c <= 'Z':
		default:
			return false
		}
	}
	return true
}

// isURL reports whether v holds a URL ("scheme://").
func isURL(v string) bool {
	return strings.Contains(unquote(v), "://")
}

// headerName reports whether name, the text before the first ":" of an
// argument, can be a header's name (letters, digits, "-" and "_", not
// first a "-"): "--auth-url=https" is an option, not a header.
func headerName(name string) bool {
	if name == "" || name[0] == '-' {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// credentialOption reports whether an option or variable called name (its
// dashes trimmed) takes a credential as its value.
func credentialOption(name string) bool {
	lower := strings.ToLower(name)
	if len(lower) < 2 || strings.HasPrefix(lower, "no-") || strings.HasPrefix(lower, "no_") {
		return false
	}
	for _, suffix := range []string{"file", "path", "dir", "name"} {
		if strings.HasSuffix(lower, suffix) {
			return false
		}
	}
	for _, q := range dataKeyWords {
		for _, sep := range []string{"-", "_", ""} {
			lower = strings.ReplaceAll(lower, q+sep+"key", "")
		}
	}
	return CredentialName(lower)
}

// dataKeyWords name keys that are a record's, not a credential:
// "--sort-key created_at", "--partition-key tenant_id",
// "--idempotency-key order-42". Keys that are credentials under such a
// name (PagerDuty's routing_key, a keyed hash's hash_key, Azure's
// primary and secondary keys: "az iot hub device-identity create
// --primary-key", PRIMARY_KEY of a Service Bus or Cosmos DB account) are
// not here.
var dataKeyWords = []string{"sort", "partition", "foreign", "cache", "idempotency", "dedup", "dedupe", "shard", "range"}

// userPassword adds the credentials of curl's "user:password".
func userPassword(v string, add func(string)) {
	user, password, ok := strings.Cut(unquote(v), ":")
	if !ok {
		return // a user name alone: curl asks for the password
	}
	if password == "" {
		add(user) // "TOKEN:", an API key as the user name
		return
	}
	add(password)
	basic(user, password, add)
}

// basic adds the Basic credential of user and password, as an HTTP client
// sends it, in base64 with and without padding.
func basic(user, password string, add func(string)) {
	cred := []byte(user + ":" + password)
	add(base64.StdEncoding.EncodeToString(cred))
	add(base64.RawStdEncoding.EncodeToString(cred))
}

// urlSecrets adds the credentials of each URL ("scheme://…", up to white
// space or a quote) in s: see ArgSecrets.
func urlSecrets(s string, add func(string)) {
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			return
		}
		start := i
		for start > 0 && isSchemeByte(s[start-1]) {
			start--
		}
		end := i + 3
		for end < len(s) && !strings.ContainsRune(" \t\n\"'`", rune(s[end])) {
			end++
		}
		raw := s[start:end]
		s = s[end:]
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" {
			continue
		}
		if u.User != nil {
			password, hasPassword := u.User.Password()
			rawUserinfo := raw[len(u.Scheme)+3:]
			if at := strings.LastIndex(rawUserinfo[:indexAnyEnd(rawUserinfo, "/?#")], "@"); at >= 0 {
				rawUserinfo = rawUserinfo[:at]
			}
			switch {
			case hasPassword && password != "":
				add(password)
				if _, p, ok := strings.Cut(rawUserinfo, ":"); ok {
					add(p)
				}
				basic(u.User.Username(), password, add)
			case !hasPassword && (u.Scheme == "http" || u.Scheme == "https"):
				add(u.User.Username())
				add(rawUserinfo)
				basic(u.User.Username(), "", add)
			}
		}
		for _, seg := range strings.Split(u.EscapedPath(), "/") {
			if d, err := url.PathUnescape(seg); err == nil && SecretPathSegment(d) {
				add(d)
				add(seg)
			}
		}
		for _, part := range strings.Split(u.RawQuery, "&") {
			name, v, ok := strings.Cut(part, "=")
			if !ok {
				continue
			}
			if n, err := url.QueryUnescape(name); err == nil {
				name = n
			}
			if !credentialParam(name) {
				continue
			}
			add(v)
			if d, err := url.QueryUnescape(v); err == nil {
				add(d)
			}
		}
	}
}

// MinSecretPathSegment is the length, in bytes, from which a path segment
// of a URL may be taken for a credential (SecretPathSegment).
const MinSecretPathSegment = 16

// SecretPathSegment reports whether seg, a decoded segment of a URL's
// path (a forward URL's, or one in an exec argument), looks like a
// credential rather than a route: services whose incoming webhooks carry
// their secret in the path (Slack's /services/T…/B…/<24 letters and
// digits>, Discord's /api/webhooks/<id>/<68-byte token>, Teams' GUIDs)
// use long random strings, which mix at least two of lower-case letters,
// upper-case letters and digits, while route words do not, or are short.
// A long route that mixes them (order-created-v2) is masked too: a cost
// worth a credential's safety. A segment of digits alone (Discord's
// webhook id) is an id, not a secret.
func SecretPathSegment(seg string) bool {
	if len(seg) < MinSecretPathSegment {
		return false
	}
	var lower, upper, digit int
	for _, r := range seg {
		switch {
		case r >= 'a' && r <= 'z':
			lower = 1
		case r >= 'A' && r <= 'Z':
			upper = 1
		case r >= '0' && r <= '9':
			digit = 1
		}
	}
	return lower+upper+digit >= 2
}

// isSchemeByte reports whether c may be part of a URL's scheme.
func isSchemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// indexAnyEnd is strings.IndexAny, with len(s) when no char of chars is
// in s.
func indexAnyEnd(s, chars string) int {
	if i := strings.IndexAny(s, chars); i >= 0 {
		return i
	}
	return len(s)
}

// unquote drops one pair of matching quotes around s, and a quote left
// alone at either end (a shell word cut at white space).
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return strings.Trim(s, `"'`)
}

// plainArg reports whether v reads as a number, a duration or a boolean:
// a setting, never a credential.
func plainArg(v string) bool {
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return true
	}
	if _, err := time.ParseDuration(v); err == nil {
		return true
	}
	_, err := strconv.ParseBool(v)
	return err == nil
}
