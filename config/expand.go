package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// envRef matches one reference at the start of the text: ${NAME} or
// ${NAME:-default}.
var envRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// origin says where the text of one expanded value came from. It never
// holds the value itself.
type origin struct {
	// literal: some of the text is written in the file itself, outside
	// any ${...} reference.
	literal bool
	// fromEnv: some of the text came from the environment.
	fromEnv bool
	// defaults names the variables whose non-empty ${NAME:-default}
	// default was used because the variable was unset or empty. Such a
	// default counts as a value from the environment wherever one is
	// masked (see outside), though it is written in the file.
	defaults []string
	// emptyVars names the variables of ${NAME} references (no default)
	// that were set to the empty string.
	emptyVars []string
}

// outside reports whether some of the text came from a ${...} reference:
// the environment's value, or the default used in its place. Such text is
// masked as a secret kept in the environment is (Masked, EnvValues,
// ExecEnvSecrets): a secret given as a default is no less secret.
func (o origin) outside() bool { return o.fromEnv || len(o.defaults) > 0 }

// expansion is the result of expanding one value.
type expansion struct {
	value  string
	origin origin
	// envValues are the environment values substituted, and the
	// defaults used in their place, so that a caller can check that none
	// reaches an error.
	envValues []string
}

// expandEnv replaces ${NAME} and ${NAME:-default} in one value that YAML
// has already parsed. "$$" before "{" or a name is a literal "$" ("$${X}"
// is the text "${X}", "$$X" the text "$X"); a "$" before anything else
// ("$1", "$(", a "$" at the end) is kept as written. A variable set to
// the empty string takes the default when there is one.
//
// Anything else that looks like a reference is an error: a bare $NAME, or
// a "${" that is not ${NAME} or ${NAME:-default} (${NAME:default},
// ${NAME-default}, ${ NAME }, a "${" with no "}"). Taken as text, such a
// value would be a password anyone who reads the config knows (an
// admin_token of "$HOOKBOX_ADMIN_TOKEN"), with nothing said. The error
// names every unset variable that has no default, and says what is wrong
// with a malformed reference without quoting it (it may be part of a
// secret written in the file); it never contains a value.
func expandEnv(s string, lookup func(string) (string, bool)) (expansion, error) {
	x, missing, malformed := expandRefs(s, lookup)
	if len(malformed) > 0 {
		return expansion{}, fmt.Errorf("%s: hookbox reads ${NAME} and ${NAME:-default} only; for a literal \"$\" before a name or \"{\", write \"$$\"", strings.Join(malformed, "; "))
	}
	if len(missing) > 0 {
		verb := "variable %s is"
		if len(missing) > 1 {
			verb = "variables %s are"
		}
		return expansion{}, fmt.Errorf("environment "+verb+" not set (set it, or write ${%s:-default} for a default)", strings.Join(missing, ", "), missing[0])
	}
	return x, nil
}

// expandRefs does expandEnv's work: it returns the expansion, the unset
// variables with no default, and what is wrong with each malformed
// reference. A default's text is read by the same rules ("$$" is one "$",
// a bare $NAME is malformed), with no variables in it.
func expandRefs(s string, lookup func(string) (string, bool)) (x expansion, missing, malformed []string) {
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			x.origin.literal = true
			break
		}
		if i > 0 {
			b.WriteString(s[:i])
			x.origin.literal = true
			s = s[i:]
		}
		if strings.HasPrefix(s, "$$") && len(s) > 2 && (s[2] == '{' || isNameStart(s[2])) {
			b.WriteByte('$')
			x.origin.literal = true
			// The "{" or name after it is text: skip past the "$$" and
			// past the next byte, which is not a "$".
			b.WriteByte(s[2])
			s = s[3:]
			continue
		}
		m := envRef.FindStringSubmatch(s)
		if m == nil {
			if problem := badReference(s); problem != "" {
				if !slices.Contains(malformed, problem) {
					malformed = append(malformed, problem)
				}
				s = s[1:]
				continue
			}
			b.WriteByte('$')
			x.origin.literal = true
			s = s[1:]
			continue
		}
		s = s[len(m[0]):]
		name, hasDefault, def := m[1], m[2] != "", m[3]
		// A default is checked whether or not it is used, so that a
		// config valid on one host is valid on every host.
		d, _, bad := expandRefs(def, func(string) (string, bool) { return "", false })
		for _, problem := range bad {
			if problem = "in a default, " + problem; !slices.Contains(malformed, problem) {
				malformed = append(malformed, problem)
			}
		}
		if v, ok := lookup(name); ok && (v != "" || !hasDefault) {
			b.WriteString(v)
			if v != "" {
				x.origin.fromEnv = true
				x.envValues = append(x.envValues, v)
			} else {
				x.origin.emptyVars = append(x.origin.emptyVars, name)
			}
			continue
		}
		if hasDefault {
			b.WriteString(d.value)
			if def != "" {
				// A secret given as a default is as secret as one
				// from the environment: it is masked as one.
				x.origin.defaults = append(x.origin.defaults, name)
				x.envValues = append(x.envValues, d.value)
			}
			continue
		}
		missing = append(missing, name)
	}
	x.value = b.String()
	return x, missing, malformed
}

// isNameStart reports whether c may start an environment variable's name.
func isNameStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// badReference says what is wrong with the text at the start of s, which
// starts with a "$" that is not a reference expandEnv reads, when it looks
// like one all the same; "" when it does not (a "$" before a digit, a
// space, "(" or nothing is text). The message never quotes s.
func badReference(s string) string {
	if len(s) < 2 {
		return ""
	}
	if isNameStart(s[1]) {
		return "a $NAME without braces is not expanded: write ${NAME} for the variable's value here, or $$NAME for the text $NAME (for a shell in exec to expand)"
	}
	if s[1] != '{' {
		return ""
	}
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return "a \"${\" has no closing \"}\""
	}
	inner := s[2:end]
	name := strings.TrimLeft(inner, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
	switch {
	case inner == "":
		return "\"${}\" names no variable"
	case strings.TrimSpace(inner) != inner:
		return "a ${ NAME } has spaces inside the braces: write ${NAME}"
	case !isNameStart(inner[0]):
		return "a variable's name in ${...} must start with a letter or \"_\""
	case strings.HasPrefix(name, "-"), strings.HasPrefix(name, "="), strings.HasPrefix(name, ":="), strings.HasPrefix(name, "?"), strings.HasPrefix(name, ":?"), strings.HasPrefix(name, "+"), strings.HasPrefix(name, ":+"):
		return "of the shell's ${NAME...} forms only ${NAME:-default} is read"
	case strings.HasPrefix(name, ":") && !strings.HasPrefix(name, ":-"):
		return "a default is written ${NAME:-default}, with \":-\""
	}
	return "a ${...} is not ${NAME} or ${NAME:-default}"
}
