package config

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	mask "github.com/hookbox/hookbox/redact"
)

// envUse is one environment value substituted by a ${NAME} reference, and
// the key path of the value it was substituted into.
type envUse struct {
	path, value string
}

// plainKey matches the key paths whose values are plainly no secret: an
// exec command's working directory. A value from the environment used
// only there is left out of EnvValues.
var plainKey = regexp.MustCompile(`^sources\[\d+\]\.(targets\[\d+\]\.)?exec_dir$`)

// EnvValues returns the values that ${NAME} references took from the
// environment, and the defaults ${NAME:-default} used in their place (a
// secret given as a default is as secret as one from the environment),
// for a caller that must keep them out of its logs and
// errors (service.Redactor): hookbox cannot tell a secret kept there from
// the rest (a bearer token in an exec argument, a Slack URL whose path is
// the credential), so it hides all that can be one. Left out, because
// logs show them on purpose and masking them wherever their text appears
// would garble every line: values found inside the listen or admin_listen
// address or a source's or target's name ("${ENV}-stripe"), values used
// only as an exec_dir (a directory, which a failed command's output
// names), and values that read as a number, a duration, a boolean or an
// IP address or prefix (a body limit's digits, an allow_ips entry), which
// are no secrets. The result is a copy, without duplicates; empty values
// are never in it.
func (c *Config) EnvValues() []string {
	shown := []string{c.Listen, c.AdminListen}
	for _, s := range c.Sources {
		shown = append(shown, s.Name)
		for _, t := range s.Targets {
			shown = append(shown, t.Name)
		}
	}
	// secretUse: the value is substituted into a key that may hold a
	// secret at least once.
	secretUse := map[string]bool{}
	for _, u := range c.envUses {
		if !plainKey.MatchString(u.path) {
			secretUse[u.value] = true
		}
	}
	var out []string
	for _, u := range c.envUses {
		v := u.value
		if v == "" || !secretUse[v] || slices.Contains(out, v) || plainValue(v) ||
			slices.ContainsFunc(shown, func(s string) bool { return strings.Contains(s, v) }) {
			continue
		}
		out = append(out, v)
	}
	return out
}

// secretName matches the names of environment variables that usually
// hold a secret, or text with one in it (a URL or connection string with
// its password), in upper case.
var secretName = regexp.MustCompile(`KEY|TOKEN|SECRET|PASS|PWD|CRED|AUTH|PRIVATE|SIGN|HMAC|SALT|DSN|CONN|URL|URI|WEBHOOK|COOKIE|SESSION`)

// SecretEnvName reports whether an environment variable called name
// usually holds a secret, as its name says (case aside): it contains KEY,
// TOKEN, SECRET, PASS (PASSWORD, PASSWD), PWD, CRED (CREDENTIALS), AUTH,
// PRIVATE, SIGN (SIGNING), HMAC, SALT, DSN, CONN (a connection string),
// URL, URI, WEBHOOK, COOKIE or SESSION.
func SecretEnvName(name string) bool { return secretName.MatchString(strings.ToUpper(name)) }

// settingName matches, in upper case, the names of environment variables
// that hold a plain setting, never a credential: an environment or mode
// (APP_ENV, NODE_ENV, MODE), a directory or path, a level, a port, a
// host, a region, a name, a time zone or locale.
var settingName = regexp.MustCompile(`^(PATH|HOME|LANG|TZ|USER|SHELL|TERM|DEBUG|VERBOSE|MODE|ENV|ENVIRONMENT|STAGE|REGION|LOG_LEVEL|LOGLEVEL)$|_(ENV|ENVIRONMENT|MODE|DIR|PATH|HOME|LEVEL|PORT|HOST|REGION|STAGE|NAME|TZ|LANG)$|^LC_`)

// SettingEnvName reports whether an environment variable called name
// plainly holds a setting, not a secret (case aside): its name is one of
// PATH, HOME, LANG, TZ, USER, SHELL, TERM, DEBUG, VERBOSE, MODE, ENV,
// ENVIRONMENT, STAGE, REGION, LOG_LEVEL, begins with LC_, or ends with
// _ENV, _ENVIRONMENT, _MODE, _DIR, _PATH, _HOME, _LEVEL, _PORT, _HOST,
// _REGION, _STAGE, _NAME, _TZ or _LANG; and it says nothing of a secret
// (SecretEnvName: AUTH_MODE is a secret's name).
func SettingEnvName(name string) bool {
	up := strings.ToUpper(name)
	return settingName.MatchString(up) && !secretName.MatchString(up)
}

// ExecEnvSecrets returns the values of the exec_env entries, of the
// sources and of their targets, that are masked as secrets
// (service.Redactor): every value but a literal setting under a name
// that plainly holds one (SettingEnvName: APP_ENV=production,
// RELEASE_DIR=/srv/app), or a number, duration, boolean or IP address
// under a name that does not say it holds a secret (SecretEnvName:
// API_SECRET=83748271938475629384 is masked).
// Masked, such settings would be masked in every log line and error, in
// delivery ids and command output alike. A value written with a ${NAME}
// reference is masked whatever its name (a secret kept in the
// environment is why one writes a reference), and so is one that holds
// a URL ("://"), whose user info, query or path may be a credential.
// Any other name (GITHUB_PAT, STRIPE_SK, JWT) is taken for a secret's.
func (c *Config) ExecEnvSecrets() []string {
	var out []string
	add := func(path string, env []string) {
		for i, kv := range env {
			name, v, ok := strings.Cut(kv, "=")
			if !ok || v == "" {
				continue
			}
			item := fmt.Sprintf("%s[%d]", path, i)
			fromEnv := c.origins[item].outside() || c.origins[path].outside()
			if fromEnv || strings.Contains(v, "://") || SecretEnvName(name) || !(SettingEnvName(name) || plainValue(v)) {
				out = append(out, v)
			}
		}
	}
	for i, s := range c.Sources {
		add(fmt.Sprintf("sources[%d].exec_env", i), s.ExecEnv)
		for j, t := range s.Targets {
			add(fmt.Sprintf("sources[%d].targets[%d].exec_env", i, j), t.ExecEnv)
		}
	}
	return out
}

// ExecArgSecrets returns the credentials written in the exec commands'
// arguments, of the sources and of their targets, that are masked as
// secrets (service.Redactor, Masked): the password of a URL's user info,
// curl's -u user:password, the values of --token, --password, --api-key
// and other options, parameters and NAME=value words whose name says they
// hold a credential, and the like (see redact.ArgSecrets for the list).
// The rest of each argument is shown: a failed command's output that
// quotes its arguments stays readable. An argument that came from the
// environment is masked whole anyway (EnvValues).
func (c *Config) ExecArgSecrets() []string {
	var out []string
	for _, s := range c.Sources {
		out = append(out, mask.ArgSecrets(s.Exec)...)
		for _, t := range s.Targets {
			out = append(out, mask.ArgSecrets(t.Exec)...)
		}
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
