package config

import (
	"fmt"
	"regexp"
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
	// default was used because the variable was unset or empty.
	defaults []string
	// emptyVars names the variables of ${NAME} references (no default)
	// that were set to the empty string.
	emptyVars []string
}

// expansion is the result of expanding one value.
type expansion struct {
	value  string
	origin origin
	// envValues are the environment values substituted, so that a caller
	// can check that none reaches an error.
	envValues []string
}

// expandEnv replaces ${NAME} and ${NAME:-default} in one value that YAML
// has already parsed; "$${" is a literal "${". A variable set to the empty
// string takes the default when there is one. The error names every unset
// variable that has no default, never a value.
func expandEnv(s string, lookup func(string) (string, bool)) (expansion, error) {
	var (
		b       strings.Builder
		x       expansion
		missing []string
	)
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
		if strings.HasPrefix(s, "$${") {
			b.WriteString("${")
			x.origin.literal = true
			s = s[3:]
			continue
		}
		m := envRef.FindStringSubmatch(s)
		if m == nil {
			b.WriteByte('$')
			x.origin.literal = true
			s = s[1:]
			continue
		}
		s = s[len(m[0]):]
		name, hasDefault, def := m[1], m[2] != "", m[3]
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
			b.WriteString(def)
			if def != "" {
				x.origin.defaults = append(x.origin.defaults, name)
			}
			continue
		}
		missing = append(missing, name)
	}
	if len(missing) > 0 {
		verb := "variable %s is"
		if len(missing) > 1 {
			verb = "variables %s are"
		}
		return expansion{}, fmt.Errorf("environment "+verb+" not set (set it, or write ${%s:-default} for a default)", strings.Join(missing, ", "), missing[0])
	}
	x.value = b.String()
	return x, nil
}
