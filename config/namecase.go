package config

import (
	"fmt"
	"strings"
)

// caseWarnings names the sources, and the targets of one source, whose
// names differ only in case (Stripe and stripe): names are case-sensitive,
// as URL paths are, so they are two sources (or targets) with their own
// URLs, events and deliveries. That is allowed, and in a generated
// config of hundreds of sources it is more likely a mistake than meant.
// Each name is compared with the first of its spelling in lower case.
func (c *Config) caseWarnings() []string {
	var ws []string
	sources := map[string]int{}
	for i, s := range c.Sources {
		low := strings.ToLower(s.Name)
		if first, ok := sources[low]; ok && c.Sources[first].Name != s.Name {
			ws = append(ws, fmt.Sprintf("%s and %s have names that differ only in case: names are case-sensitive, so they are two sources, each with its own URL and events; rename or remove one unless that is meant", c.sourceKey(first), c.sourceKey(i)))
		} else if !ok {
			sources[low] = i
		}
		targets := map[string]int{}
		for j, t := range s.Targets {
			low := strings.ToLower(t.Name)
			if first, ok := targets[low]; ok && s.Targets[first].Name != t.Name {
				ws = append(ws, fmt.Sprintf("source %s: %s and %s have names that differ only in case: names are case-sensitive, so they are two targets, each with its own deliveries; rename or remove one unless that is meant", c.sourceLabel(i), c.targetKey(i, first), c.targetKey(i, j)))
			} else if !ok {
				targets[low] = j
			}
		}
	}
	return ws
}

// targetKey names target j of source i by its key, and its name when
// written in the file: "targets[1] (billing)".
func (c *Config) targetKey(i, j int) string {
	key := fmt.Sprintf("targets[%d]", j)
	if label := c.targetLabel(i, j); label != key {
		key = fmt.Sprintf("%s (%s)", key, label)
	}
	return key
}
