package config

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnvValues returns the values that ${NAME} references took from the
// environment, for a caller that must keep them out of its logs and
// errors (service.Redactor): hookbox cannot tell a secret kept there from
// the rest (a bearer token in an exec argument, a Slack URL whose path is
// the credential), so it hides all that can be one. Left out, because
// logs show them on purpose and masking them wherever their text appears
// would garble every line: values found inside the listen or admin_listen
// address or a source's or target's name ("${ENV}-stripe"), and values
// that read as a number, a duration, a boolean or an IP address or prefix
// (a body limit's digits, an allow_ips entry), which are no secrets. The
// result is a copy, without duplicates; empty values are never in it.
func (c *Config) EnvValues() []string {
	shown := []string{c.Listen, c.AdminListen}
	for _, s := range c.Sources {
		shown = append(shown, s.Name)
		for _, t := range s.Targets {
			shown = append(shown, t.Name)
		}
	}
	var out []string
	for _, v := range c.envValues {
		if v == "" || slices.Contains(out, v) || plainValue(v) ||
			slices.ContainsFunc(shown, func(s string) bool { return strings.Contains(s, v) }) {
			continue
		}
		out = append(out, v)
	}
	return out
}

// plainValue reports whether v reads as a number, a duration, a boolean,
// or an IP address or prefix.
func plainValue(v string) bool {
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return true
	}
	if _, err := time.ParseDuration(v); err == nil {
		return true
	}
	if _, err := strconv.ParseBool(v); err == nil {
		return true
	}
	if _, err := netip.ParseAddr(v); err == nil {
		return true
	}
	_, err := netip.ParsePrefix(v)
	return err == nil
}
