package config

import "slices"

// EnvValues returns the values that ${NAME} references took from the
// environment, for a caller that must keep them out of its logs and
// errors (service.Redactor): Masked hides every value that came from the
// environment, since hookbox cannot tell a secret kept there from the
// rest (a bearer token in an exec argument, a Slack URL whose path is the
// credential). Left out are the values that are, whole, the listen or
// admin_listen address or a source's or target's name: they are shown on
// purpose, in every log line that names a source, and hold no secret.
// The result is a copy, without duplicates; empty values are never in it.
func (c *Config) EnvValues() []string {
	shown := map[string]bool{c.Listen: true, c.AdminListen: true}
	for _, s := range c.Sources {
		shown[s.Name] = true
		for _, t := range s.Targets {
			shown[t.Name] = true
		}
	}
	var out []string
	for _, v := range c.envValues {
		if v != "" && !shown[v] && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
