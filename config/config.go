// Package config loads hookbox's YAML configuration.
//
// Guarantees:
//   - The file is parsed as YAML before anything is expanded. ${NAME} and
//     ${NAME:-default} are then expanded inside each parsed value ("$$"
//     before "{" or a name is a literal "$"), so an environment value is
//     never YAML text: quotes, backslashes and newlines in it are kept
//     exactly, it cannot change the document's structure, and a ${...} in
//     a comment is not expanded. A variable set to "" takes its default.
//     An unset variable without a default is an error naming the variable
//     and the key; so is anything else that looks like a reference (a bare
//     $NAME, ${NAME:default}, ${NAME-default}, a "${" with no "}"), which
//     would otherwise be taken as text.
//   - Every problem is reported, not only the first: each unknown key with
//     its line and the known key it most resembles, each value of the wrong
//     type with its key and line, each invalid value with its key
//     ("sources[1].scheme: …").
//   - Errors never contain a secret or any value taken from the environment,
//     and never the YAML source lines.
//   - A Config that Load or Parse returned is valid, and each source's
//     provider preset (provider.go) is applied: the keys it fills that the
//     source left empty are set. Its Warnings list what works but is
//     probably a mistake, for the process to log at start: a source running
//     on the example secret written in the file (a ${NAME:-default}
//     default), a config file holding secrets that group or others can
//     read, a retention_days shorter than a provider's redelivery window,
//     secrets too short to be masked in logs, a source that checks no
//     signature and admits every address, a very broad trusted_proxies
//     entry, and keys that do nothing or work against another. hookbox
//     serve logs them and config check prints them; service.New does not.
package config

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/goccy/go-yaml"

	"github.com/hookbox/hookbox"
	mask "github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/verify"
	"github.com/hookbox/hookbox/worker"
)

// DefaultDB is the database used when neither flag, environment nor file
// names one.
const DefaultDB = "sqlite:hookbox.db"

// DefaultMaxBodyBytes is the largest body accepted unless a source or the
// file says otherwise (1 MiB; GitHub may send up to 25 MB: raise
// max_body_bytes for such a source).
const DefaultMaxBodyBytes = 1 << 20

// MaxRetentionDays is the largest retention_days and payload_retention_days
// accepted: 100 years. Much larger day counts overflow a time.Duration
// (from 106,752 days) and would make the purge cutoff lie in the future.
const MaxRetentionDays = 36500

// DefaultMaxInflightBodyBytes is the budget for body bytes in flight when
// max_inflight_body_bytes is not set (64 MiB).
const DefaultMaxInflightBodyBytes = 64 << 20

// MaxBodyLimit is the largest max_body_bytes accepted (1 GiB).
const MaxBodyLimit = 1 << 30

// DefaultMinBodyRate is min_body_rate when not set: 64 KiB a second.
const DefaultMinBodyRate = 64 << 10

// DefaultMaxClientConnections is max_client_connections when not set (the
// server's DefaultMaxClientConnections, which config does not import).
const DefaultMaxClientConnections = 256

// Config is the whole file.
type Config struct {
	// Listen is the webhook address, host:port (hookbox serve's default
	// :8080; --listen overrides it).
	Listen string `yaml:"listen"`
	// AdminListen, when set, is a second address that serves /admin/…,
	// /metrics and the web UI (/ui/), which are then no longer served on
	// Listen. Unset, they share Listen with the webhooks.
	AdminListen          string  `yaml:"admin_listen"`
	DB                   string  `yaml:"db"`
	RetentionDays        int     `yaml:"retention_days"`
	PayloadRetentionDays int     `yaml:"payload_retention_days"`
	AdminToken           string  `yaml:"admin_token"`
	MaxBodyBytes         int64   `yaml:"max_body_bytes"`
	Log                  Log     `yaml:"log"`
	Ingest               Ingest  `yaml:"ingest"`
	SQLite               SQLite  `yaml:"sqlite"`
	Workers              Workers `yaml:"workers"`
	// ShutdownTimeout is how long running work may finish after SIGTERM
	// before it is cancelled and its events released (default 30s).
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	Sources         []Source `yaml:"sources"`
	// Rejected bounds the log of refused deliveries.
	Rejected Rejected `yaml:"rejected"`

	// Warnings are the start-time warnings Load and Parse found: things
	// that work but are probably not what the operator wants (a source
	// running on the example secret, a config file others can read).
	// hookbox serve logs each at WARN when it starts. Code that finds more
	// such things appends to this list.
	Warnings []string `yaml:"-"`

	// origins records where each expanded string value came from, by key
	// path; it lets messages avoid repeating values from the environment.
	origins map[string]origin
	// warnSource maps each warning in Warnings that is about one source
	// to how it names that source (see WarningSource).
	warnSource map[string]string
	// envUses are the environment values substituted anywhere in the
	// file, each with its key path; see EnvValues.
	envUses []envUse
	// MaxInflightBodyBytes bounds the request body bytes held in memory at
	// once across all deliveries; one that would pass it is answered 503
	// with Retry-After, as is one from a client holding more than an
	// eighth of it once half of it is held. Default:
	// DefaultMaxInflightBodyBytes, or twice the largest body limit if that
	// is more. It must be at least twice every source's body limit: a body
	// is read into buffers that grow as its bytes arrive, and those it
	// outgrew count until the reply.
	MaxInflightBodyBytes int64 `yaml:"max_inflight_body_bytes"`
	// MinBodyRate is the bytes a second a sender must keep up, on average,
	// after the first five seconds of its body; one that falls behind gets
	// 408 and its connection closed. Default: DefaultMinBodyRate.
	MinBodyRate int64 `yaml:"min_body_rate"`
	// MaxClientConnections is how many connections one client address
	// (an IPv6 one by its /64) may hold open at once; one more is closed
	// as soon as it is accepted. Peers on loopback or private addresses,
	// where proxies and load balancers sit, and trusted_proxies are not
	// limited. Default: DefaultMaxClientConnections.
	MaxClientConnections int `yaml:"max_client_connections"`
	// TrustedProxies are the addresses or CIDRs of proxies in front of
	// hookbox whose X-Forwarded-For and Forwarded headers are believed when
	// a source has allow_ips, and to tell clients apart in the body budget;
	// their X-Forwarded-Proto (like that of peers on local networks) makes
	// the console's session cookie Secure. From any other peer they are
	// ignored.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// Rejected bounds the log of refused deliveries (400, 401, 404, 408, 413, 415).
// Zero fields take the defaults of the rejected package.
type Rejected struct {
	// MaxCount is the most deliveries kept (default 10000).
	MaxCount int `yaml:"max_count"`
	// MaxAge is how long one is kept (default 168h, a week).
	MaxAge Duration `yaml:"max_age"`
	// MaxBodyBytes is how much of each body is kept (default 65536); only a
	// delivery kept whole can be admitted by a re-check.
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// Rate and Burst bound the deliveries logged per source: Rate a second
	// on average (default 10), Burst at once (default 100). Unknown source
	// names share one allowance.
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
}

// Log configures structured logging.
type Log struct {
	Format string `yaml:"format"` // "text" (default) or "json"
	Level  string `yaml:"level"`  // "debug", "info" (default), "warn", "error"
}

// Ingest tunes group commit on the receiving side.
type Ingest struct {
	// BatchMax caps the deliveries committed in one transaction (default 512).
	BatchMax int `yaml:"batch_max"`
	// BatchWait is how long a batch may wait for more deliveries (default 0:
	// batches form from whatever arrived while the previous commit ran).
	BatchWait Duration `yaml:"batch_wait"`
	// Flushers, when set, makes ingest write that many independent batches
	// at once. By default one transaction fills while the previous one
	// commits (see groupcommit.NewPipelined), which measured faster on both
	// stores.
	Flushers int `yaml:"flushers"`
}

// Workers tunes the queue's workers.
type Workers struct {
	// BatchSize is the most events claimed at once (default 256).
	BatchSize int `yaml:"batch_size"`
	// Concurrency is the most forward/exec deliveries and two-phase
	// Prepares (worker.Phases) in flight at once (default 32).
	Concurrency int `yaml:"concurrency"`
	// MaxPayloadBytes bounds the payload bytes the workers hold in memory
	// at once (worker.Options.MaxPayloadBytes); default the body budget,
	// max_inflight_body_bytes (see WorkerPayloadBytes).
	MaxPayloadBytes int64 `yaml:"max_payload_bytes"`
}

// SQLite holds options that apply only to the SQLite store.
type SQLite struct {
	// Synchronous is FULL (default), NORMAL or OFF. Anything but FULL can
	// lose acknowledged deliveries on power loss.
	Synchronous string `yaml:"synchronous"`
	// BusyTimeout is how long a write waits for SQLite's write lock held
	// by another process (a hookbox command that writes, such as purge or
	// replay, run beside serve) before giving up:
	// a delivery is then answered 503, a worker's call fails and is tried
	// again. Unset: 5 s (sqlite.Options.BusyTimeout). Below
	// LowBusyTimeout, serve and config check warn (StoreWarnings).
	BusyTimeout Duration `yaml:"busy_timeout"`
}

// LowBusyTimeout is the sqlite.busy_timeout below which hookbox serve and
// config check warn: hookbox purge, replay and events skip hold SQLite's
// write lock for a moment at a time while they write, and a wait shorter
// than that moment turns each of them into 503s at ingest. The repository's
// own tests, which hold the lock from another connection on purpose, set
// 500ms.
const LowBusyTimeout = 100 * time.Millisecond

// StoreWarnings warns about settings of the store c.DB names that work
// but are probably not meant: a sqlite.busy_timeout under LowBusyTimeout
// (0 is the default, 5 s) on a SQLite database. It judges c.DB as it is,
// so hookbox serve and config check call it once --db and HOOKBOX_DB are
// applied; on PostgreSQL the sqlite keys do nothing.
func (c *Config) StoreWarnings() []string {
	bt := time.Duration(c.SQLite.BusyTimeout)
	if !isSQLite(c.DB) || bt <= 0 || bt >= LowBusyTimeout {
		return nil
	}
	return []string{fmt.Sprintf("sqlite.busy_timeout is %s: whenever another process holds SQLite's write lock longer than that (a hookbox purge, replay or events skip run beside serve), deliveries are answered 503 and workers' calls fail and are tried again; set it to at least %s, or leave it out for the default 5s",
		bt, LowBusyTimeout)}
}

// Source is one configured sender.
type Source struct {
	Name         string   `yaml:"name"`
	Scheme       string   `yaml:"scheme"`
	Secrets      []string `yaml:"secrets"`
	Tolerance    Duration `yaml:"tolerance"`
	MaxBodyBytes int64    `yaml:"max_body_bytes"`
	// AllowIPs, when set, are the only addresses or CIDRs this source
	// accepts deliveries from (403 otherwise), for any scheme.
	AllowIPs []string `yaml:"allow_ips"`

	// Generic hmac scheme.
	Header    string `yaml:"header"`
	Prefix    string `yaml:"prefix"`
	Encoding  string `yaml:"encoding"`
	Algorithm string `yaml:"algorithm"`

	// Where the delivery id is, for the schemes whose id is not fixed (not
	// standard-webhooks, stripe or github), and the event type, for any.
	IDHeader   string `yaml:"id_header"`
	IDField    string `yaml:"id_field"`
	TypeHeader string `yaml:"type_header"`
	TypeField  string `yaml:"type_field"`
	// IDOptional keys a delivery that lacks its id_header or id_field by
	// the body hash instead of refusing it (see verify.Config.IDOptional).
	// Unset, it is the preset's (slack: on); written, even false, it is
	// what is written.
	IDOptional *bool `yaml:"id_optional"`

	// Provider names a preset (provider.go) that fills the keys the source
	// leaves empty; the rest configure the newer schemes (see verify.Config).
	Provider        string `yaml:"provider"`
	Signed          string `yaml:"signed"`
	TimestampHeader string `yaml:"timestamp_header"`
	PublicURL       string `yaml:"public_url"`
	Handshake       string `yaml:"handshake"`
	// TimestampUnit is the unit of timestamp_header's value: s (unix
	// seconds, the default) or ms (milliseconds, as Webflow sends).
	TimestampUnit string `yaml:"timestamp_unit"`

	// Targets and retries.
	Forward string `yaml:"forward"`
	// ForwardHeaders are added to every forwarded request (a shared secret
	// the app checks, for example).
	ForwardHeaders map[string]string `yaml:"forward_headers"`
	// PermanentStatuses are forward reply statuses that make the event dead
	// at once (default [410]).
	PermanentStatuses []int    `yaml:"permanent_statuses"`
	Exec              []string `yaml:"exec"`
	// PermanentExitCodes are exec exit codes that make the event dead at
	// once (default none): the command's way of refusing an event for
	// good, as a forward's permanent_statuses are the app's.
	PermanentExitCodes []int `yaml:"permanent_exit_codes"`
	// ExecDir is the exec command's working directory. It must exist when
	// the config is loaded; a relative one is taken from the directory
	// hookbox runs in, not the config file's.
	ExecDir     string   `yaml:"exec_dir"`
	ExecEnv     []string `yaml:"exec_env"`
	MaxAttempts int      `yaml:"max_attempts"`
	BackoffMin  Duration `yaml:"backoff_min"`
	BackoffMax  Duration `yaml:"backoff_max"`
	Timeout     Duration `yaml:"timeout"` // per attempt
	// Strict runs this source's events one at a time in id order.
	Strict bool `yaml:"strict"`
	// CircuitAfter and CircuitCooldown are the circuit breaking of the
	// source's own forward or exec, as a target's (see Target; defaults 5
	// and 10s, -1 turns it off), and the default of its targets.
	CircuitAfter    int      `yaml:"circuit_after"`
	CircuitCooldown Duration `yaml:"circuit_cooldown"`
	// StoreOnly says that nothing works the source's events, on purpose:
	// they are verified, deduplicated and stored, and read as "stored",
	// never as due work. Without it, hookbox serve warns at start about a
	// source with no target. (A Go program that registers handlers for a
	// source leaves it unset.)
	StoreOnly bool `yaml:"store_only"`

	// ExecInheritEnv passes hookbox's whole environment to the exec
	// command. Off by default: the command gets PATH, HOME, exec_env and
	// the event's HOOKBOX_* variables only, so that the secrets in
	// hookbox's environment do not reach it (nor its output).
	ExecInheritEnv bool `yaml:"exec_inherit_env"`

	// Targets are named targets, each with a filter and delivery controls
	// (see Target). They replace forward and exec: a source has one or
	// the other.
	Targets []Target `yaml:"targets"`

	// AllowIdenticalBodies turns off deduplication by body for a source
	// whose signature covers the body but not the delivery id (github,
	// hmac, none): by default a body already stored for the source is a
	// duplicate whatever id it comes with, since anyone who captured one
	// delivery could send it again under a fresh id. Set it for senders
	// that really send identical bodies as new deliveries.
	AllowIdenticalBodies bool `yaml:"allow_identical_bodies"`
}

// WorkedAsItself reports whether the events of s are worked under its own
// name: by its forward or exec, or, with neither, by the Go handlers a
// program registers for it. A source with targets, or store_only, is
// not: its events are fan-outs to its targets' queues, or finish as they
// are stored.
func (s Source) WorkedAsItself() bool { return len(s.Targets) == 0 && !s.StoreOnly }

// DedupesByBody reports whether deliveries of s are also deduplicated by
// the SHA-256 of their body, or of what the signature covers of it where
// that differs (verify.BodyKey: twilio's sorted parameters): for schemes
// whose signature covers no delivery id (github, hmac, twilio, token,
// basic, none, and paddle and mailgun with an id_header), unless
// allow_identical_bodies is set.
func (s Source) DedupesByBody() bool {
	if s.AllowIdenticalBodies {
		return false
	}
	s = s.WithPreset()
	switch s.Scheme {
	case "github", "hmac", "twilio", "token", "basic", "none":
		return true
	case "paddle", "mailgun":
		// Paddle's signature covers the body, mailgun's a token the
		// body is bound to (its nonce), neither a header: an
		// id_header is an id nothing covers.
		return s.IDHeader != ""
	}
	return false
}

// Policy returns the retry policy of s (zero fields take the defaults).
func (s Source) Policy() worker.Policy {
	return worker.Policy{
		MaxAttempts: s.MaxAttempts,
		BackoffMin:  time.Duration(s.BackoffMin),
		BackoffMax:  time.Duration(s.BackoffMax),
		Timeout:     time.Duration(s.Timeout),
		Strict:      s.Strict,
	}
}

// Circuit returns after how many failed attempts in a row the circuit of
// s's own forward or exec opens (0: never) and its first cool-down.
func (s Source) Circuit() (after int, cooldown time.Duration) {
	return circuit(s.CircuitAfter, s.CircuitCooldown)
}

// Verify returns the verify.Config for s, its provider's preset applied.
func (s Source) Verify() verify.Config {
	s = s.WithPreset()
	return verify.Config{
		Scheme:          s.Scheme,
		Secrets:         s.Secrets,
		Tolerance:       time.Duration(s.Tolerance),
		Header:          s.Header,
		Prefix:          s.Prefix,
		Encoding:        s.Encoding,
		Algorithm:       s.Algorithm,
		Signed:          s.Signed,
		TimestampHeader: s.TimestampHeader,
		TimestampUnit:   s.TimestampUnit,
		PublicURL:       s.PublicURL,
		IDHeader:        s.IDHeader,
		IDField:         s.IDField,
		IDOptional:      s.IDOptional != nil && *s.IDOptional,
		TypeHeader:      s.TypeHeader,
		TypeField:       s.TypeField,
		Handshake:       s.Handshake,
	}
}

// AllowedIPs returns the parsed allow_ips of s (nil when unset). The
// Config must have been validated.
func (s Source) AllowedIPs() []netip.Prefix {
	ps, _ := ParsePrefixes(s.AllowIPs)
	return ps
}

// TrustedProxyPrefixes returns the parsed trusted_proxies. The Config must
// have been validated.
func (c *Config) TrustedProxyPrefixes() []netip.Prefix {
	ps, _ := ParsePrefixes(c.TrustedProxies)
	return ps
}

// InflightReserve is what the body budget holds beyond twice the largest
// body limit, so that a lone delivery of the largest body can always be
// received: its request's overhead and headers. The server raises a
// smaller budget to it (package server's requestReserve, kept equal by
// a test there).
const InflightReserve = 128 << 10

// InflightBodyBytes returns the budget for body bytes in flight as the
// server runs it: max_inflight_body_bytes, or else the larger of
// DefaultMaxInflightBodyBytes and twice the largest body limit, and in
// either case at least twice the largest body limit and InflightReserve.
func (c *Config) InflightBodyBytes() int64 {
	n := c.MaxInflightBodyBytes
	if n <= 0 {
		n = DefaultMaxInflightBodyBytes
	}
	var largest int64
	for _, s := range c.Sources {
		largest = max(largest, c.BodyLimit(s))
	}
	return max(n, 2*largest+InflightReserve)
}

// WorkerPayloadBytes returns the bound on payload bytes the workers hold
// at once as serve runs it: workers.max_payload_bytes, or else the body
// budget (InflightBodyBytes), so that the payloads worked take no more
// memory than those received may.
func (c *Config) WorkerPayloadBytes() int64 {
	if c.Workers.MaxPayloadBytes > 0 {
		return c.Workers.MaxPayloadBytes
	}
	return c.InflightBodyBytes()
}

// ClientConnections returns max_client_connections, or its default.
func (c *Config) ClientConnections() int {
	if c.MaxClientConnections > 0 {
		return c.MaxClientConnections
	}
	return DefaultMaxClientConnections
}

// BodyRate returns min_body_rate, or its default.
func (c *Config) BodyRate() int64 {
	if c.MinBodyRate > 0 {
		return c.MinBodyRate
	}
	return DefaultMinBodyRate
}

// BodyLimit is the largest body s accepts: its max_body_bytes, else the
// top level's, else DefaultMaxBodyBytes (what ingest answers 413 above).
func (c *Config) BodyLimit(s Source) int64 {
	switch {
	case s.MaxBodyBytes > 0:
		return s.MaxBodyBytes
	case c.MaxBodyBytes > 0:
		return c.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

// ParsePrefixes parses addresses ("192.0.2.7", "2001:db8::1") and CIDRs
// ("192.0.2.0/24"); an address stands for itself alone. Host bits of a CIDR
// are cleared, and an IPv4-mapped IPv6 entry becomes plain IPv4, as
// client addresses are. The error names the index of the first bad entry.
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, s := range list {
		s = strings.TrimSpace(s)
		var p netip.Prefix
		if strings.Contains(s, "/") {
			var err error
			if p, err = netip.ParsePrefix(s); err != nil {
				return nil, fmt.Errorf("[%d]: not an IP address or CIDR: %q", i, s)
			}
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("[%d]: not an IP address or CIDR: %q", i, s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if a := p.Addr(); a.Is4In6() {
			bits := p.Bits() - 96
			if bits < 0 {
				return nil, fmt.Errorf("[%d]: an IPv4-mapped CIDR must be /96 or longer: %q", i, s)
			}
			p = netip.PrefixFrom(a.Unmap(), bits)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Duration is a time.Duration written as "5m", "250ms" in YAML.
type Duration time.Duration

// UnmarshalText parses a Go duration string. Its error does not repeat the
// text, which may have come from the environment.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return errors.New("not a duration: write a number with a unit, like 30s, 5m or 250ms")
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as it would be typed: "30s", "5m",
// "1h", "1h30m" (Go's "1h0m0s" without its zero units).
func (d Duration) MarshalText() ([]byte, error) {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return []byte(s), nil
}

// UnmarshalYAML parses a Go duration string, for callers that decode the
// type with goccy/go-yaml directly.
func (d *Duration) UnmarshalYAML(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return err
	}
	return d.UnmarshalText([]byte(s))
}

// Load reads, expands and validates the file at path. Its Warnings add
// one for a file that holds a secret and is readable by group or others.
func Load(path string) (*Config, error) {
	raw, info, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, d, err := parse(raw, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if perm := info.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 && holdsSecret(d.origins) {
		c.Warnings = append(c.Warnings, fmt.Sprintf("config file %s holds secrets and is readable by group or others (mode %04o); run chmod 600 %s", path, perm, path))
	}
	return c, nil
}

// readFile reads the config file at path, and its mode.
func readFile(path string) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	return raw, info, nil
}

// Parse expands and validates a YAML document. Its Warnings name each
// source whose secret is the example default written in the document,
// and other things that work but are probably not meant (a retention
// shorter than a provider's redeliveries, an admin_listen without
// admin_token).
func Parse(raw []byte) (*Config, error) {
	c, _, err := parse(raw, os.LookupEnv)
	return c, err
}

// parse decodes raw with ${...} expanded in values, validates the result
// and collects the warnings about example secrets.
func parse(raw []byte, lookup func(string) (string, bool)) (*Config, *decoder, error) {
	c, d, err := parseUnredacted(raw, lookup)
	if err != nil {
		// Nothing above repeats a value; this keeps the promise should a
		// message from another package ever do so.
		return nil, nil, redact(err, d.envValues)
	}
	return c, d, nil
}

func parseUnredacted(raw []byte, lookup func(string) (string, bool)) (*Config, *decoder, error) {
	var c Config
	d, err := decodeYAML(raw, &c, lookup)
	if err != nil {
		return nil, d, err
	}
	c.origins, c.envUses = d.origins, d.envUses
	if err := c.validate(); err != nil {
		return nil, d, err
	}
	for i := range c.Sources {
		c.Sources[i] = c.Sources[i].WithPreset()
	}
	c.Warnings = append(c.exampleSecretWarnings(), c.RetentionWarnings()...)
	c.Warnings = append(c.Warnings, c.RejectedAgeWarnings()...)
	c.Warnings = append(c.Warnings, c.adminListenWarnings()...)
	c.Warnings = append(c.Warnings, c.shortSecretWarnings()...)
	c.Warnings = append(c.Warnings, c.openSourceWarnings()...)
	c.Warnings = append(c.Warnings, c.trustedProxyWarnings()...)
	c.Warnings = append(c.Warnings, c.oddKeyWarnings()...)
	c.Warnings = append(c.Warnings, c.signWarnings()...)
	c.Warnings = append(c.Warnings, c.caseWarnings()...)
	return &c, d, nil
}

// minRedacted is the shortest environment value taken out of an error
// message: shorter ones are not secrets, and removing them would garble the
// message.
const minRedacted = 8

// redact replaces every environment value in err's message.
func redact(err error, values []string) error {
	msg := err.Error()
	changed := false
	for _, v := range values {
		if len(v) < minRedacted {
			continue
		}
		for _, form := range []string{v, strings.Trim(strconv.Quote(v), `"`)} {
			if strings.Contains(msg, form) {
				msg = strings.ReplaceAll(msg, form, "[value from the environment]")
				changed = true
			}
		}
	}
	if !changed {
		return err
	}
	return errors.New(msg)
}

// secretKey matches the key paths whose values are secrets.
var secretKey = regexp.MustCompile(`^(admin_token|sources\[\d+\]\.(secrets\[\d+\]|forward_headers\..*|targets\[\d+\]\.(forward_headers\..*|sign\.secret)))$`)

// holdsSecret reports whether a secret's text is written in the file, not
// taken from the environment. A ${NAME:-default} default does not count: it
// is reported, louder, as an example secret.
func holdsSecret(origins map[string]origin) bool {
	for path, o := range origins {
		if o.literal && secretKey.MatchString(path) {
			return true
		}
	}
	return false
}

// exampleSecretWarnings names each source (and the admin token) whose
// secret came from a ${NAME:-default} default rather than the environment.
func (c *Config) exampleSecretWarnings() []string {
	var ws []string
	if vars := c.origins["admin_token"].defaults; len(vars) > 0 {
		ws = append(ws, fmt.Sprintf("admin_token is the example value from the config file; set %s", strings.Join(vars, ", ")))
	}
	if vars := c.origins["admin_token"].emptyVars; len(vars) > 0 && c.AdminToken == "" {
		// An empty default (${NAME:-}) says "off" on purpose; a variable
		// set to nothing most likely does not.
		ws = append(ws, fmt.Sprintf("admin_token is empty because %s is set to nothing, so the admin API and the console are off; set it, or write ${%s:-} to mean off", strings.Join(vars, ", "), vars[0]))
	}
	for i, s := range c.Sources {
		var vars []string
		for j := range s.Secrets {
			for _, v := range c.origins[secretPath(i, j)].defaults {
				if !slices.Contains(vars, v) {
					vars = append(vars, v)
				}
			}
		}
		if len(vars) > 0 {
			ws = append(ws, fmt.Sprintf("source %s uses the example secret from the config file, so anyone who has read that file can forge its deliveries; set %s", c.sourceLabel(i), strings.Join(vars, ", ")))
		}
	}
	return ws
}

// shortSecretWarnings names, by key, the admin token and each source
// secret shorter than redact.MinLen: the masking of logs, errors and
// shown headers leaves such short values alone (masking "test" would
// garble every message), so they may appear there in clear.
func (c *Config) shortSecretWarnings() []string {
	short := func(s string) bool { return s != "" && len(s) < mask.MinLen }
	var keys []string
	if short(c.AdminToken) {
		keys = append(keys, "admin_token")
	}
	for i, s := range c.Sources {
		for j, sec := range s.Secrets {
			if short(sec) {
				keys = append(keys, fmt.Sprintf("%s.secrets[%d]", c.sourceKey(i), j))
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("secrets shorter than %d bytes are not masked in logs and errors: %s; use longer ones", mask.MinLen, strings.Join(keys, ", "))}
}

// openSourceWarnings names each source that checks no signature (scheme
// none) and has no allow_ips: anyone who can reach the port can store
// deliveries for it. Each warning is recorded in warnSource, so that
// serve can log the source as an attribute of its own.
func (c *Config) openSourceWarnings() []string {
	var ws []string
	for i, s := range c.Sources {
		if s.Scheme != verify.SchemeNone || len(s.AllowIPs) > 0 {
			continue
		}
		label := c.sourceLabel(i)
		w := fmt.Sprintf("source %s checks no signature and admits every address: anyone who reaches the port can store deliveries; set allow_ips or a signing scheme", label)
		if c.warnSource == nil {
			c.warnSource = map[string]string{}
		}
		c.warnSource[w] = label
		ws = append(ws, w)
	}
	return ws
}

// MinTolerance is the smallest tolerance accepted: signed timestamps
// count whole seconds. LowTolerance is the one below which config check
// warns: senders' and hookbox's clocks commonly differ by seconds, and a
// delivery takes time to arrive, so a tighter window refuses good
// deliveries now and then.
const (
	MinTolerance = time.Second
	LowTolerance = 30 * time.Second
)

// oddKeyWarnings names keys that are set but do nothing, or work against
// another key: a tolerance so tight that clock skew refuses good
// deliveries, exec_env, exec_dir, exec_inherit_env or
// permanent_exit_codes on a source or target that has no exec command, and
// circuit_after or circuit_cooldown on a source with no forward, exec or
// targets.
func (c *Config) oddKeyWarnings() []string {
	var ws []string
	execOnly := func(what string, exec []string, env []string, dir string, inherit bool, codes []int) {
		if len(exec) > 0 {
			return
		}
		if len(codes) > 0 {
			ws = append(ws, fmt.Sprintf("%s sets permanent_exit_codes but has no exec command, so nothing reads it; remove it (a forward's refusals for good are its permanent_statuses)", what))
		}
		var keys []string
		if len(env) > 0 {
			keys = append(keys, "exec_env")
		}
		if dir != "" {
			keys = append(keys, "exec_dir")
		}
		if inherit {
			keys = append(keys, "exec_inherit_env")
		}
		if len(keys) > 0 {
			ws = append(ws, fmt.Sprintf("%s sets %s but has no exec command, so nothing reads it; remove it (forward_headers is how a value reaches a forward URL)", what, strings.Join(keys, " and ")))
		}
	}
	for i, s := range c.Sources {
		label := "source " + c.sourceLabel(i)
		if s.Tolerance >= Duration(MinTolerance) && s.Tolerance < Duration(LowTolerance) {
			ws = append(ws, fmt.Sprintf("%s has a tolerance of %s: senders' clocks and hookbox's commonly differ by seconds, and a delivery takes time to arrive, so good deliveries will be refused as too old now and then; set 5m (the default) unless the sender asks for less", label, time.Duration(s.Tolerance)))
		}
		execOnly(label, s.Exec, s.ExecEnv, s.ExecDir, s.ExecInheritEnv, s.PermanentExitCodes)
		if (s.CircuitAfter != 0 || s.CircuitCooldown != 0) && s.Forward == "" && len(s.Exec) == 0 && len(s.Targets) == 0 {
			ws = append(ws, fmt.Sprintf("%s sets circuit_after or circuit_cooldown but has no forward, exec or targets, so nothing reads it (a Go program's handlers take no circuit from the file); remove it", label))
		}
		for j, t := range s.Targets {
			execOnly(fmt.Sprintf("%s, target %s", label, c.targetLabel(i, j)), t.Exec, t.ExecEnv, t.ExecDir, t.ExecInheritEnv, t.PermanentExitCodes)
		}
	}
	return ws
}

// targetLabel names target j of source i in messages: by its name when
// written in the file, else by its index.
func (c *Config) targetLabel(i, j int) string {
	o := c.origins[fmt.Sprintf("sources[%d].targets[%d].name", i, j)]
	if name := c.Sources[i].Targets[j].Name; !o.fromEnv && sourceName.MatchString(name) {
		return name
	}
	return fmt.Sprintf("targets[%d]", j)
}

// forwardURLProblem says what makes raw, an http:// or https:// forward
// URL, one no request can be sent to, or "". The message never repeats
// the URL: it may hold a credential or come from the environment.
func forwardURLProblem(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "is not a valid URL; write it like https://app.example.com/hooks (percent-encode spaces and other special characters)"
	}
	if u.Hostname() == "" {
		return "has no host; write it like https://app.example.com/hooks"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "has a port that is not a number from 1 to 65535; fix the port, or leave it out for the scheme's own (80 or 443)"
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return "has a colon after the host but no port; write the port, or remove the colon"
	}
	return ""
}

// broadProxyBits are the shortest trusted_proxies prefixes accepted
// without a warning: an IPv4 /8 (10.0.0.0/8, a whole private network,
// is a common way to trust a cluster's load balancers) and an IPv6 /32
// (a whole provider allocation). Broader ones hold many addresses that
// are no proxy of the operator's, each of which could then set
// X-Forwarded-For. An IPv6 prefix inside fc00::/7 (unique local
// addresses, the IPv6 private networks) is not warned about.
var broadProxyBits = map[bool]int{true: 8, false: 32}

// uniqueLocal is fc00::/7, IPv6's private addresses.
var uniqueLocal = netip.MustParsePrefix("fc00::/7")

// trustedProxyWarnings names each trusted_proxies entry broader than
// broadProxyBits (a /0 is an error, see validate).
func (c *Config) trustedProxyWarnings() []string {
	ps, _ := ParsePrefixes(c.TrustedProxies)
	var ws []string
	for i, p := range ps {
		limit := broadProxyBits[p.Addr().Is4()]
		if p.Bits() == 0 || p.Bits() >= limit || (p.Addr().Is6() && p.Bits() >= 7 && uniqueLocal.Contains(p.Addr())) {
			continue
		}
		ws = append(ws, fmt.Sprintf("trusted_proxies[%d] is %s, which holds far more than a few proxies: every address in it can set X-Forwarded-For and so choose the client address allow_ips checks; list your proxies' own addresses or subnet (/%d or longer)", i, p, limit))
	}
	return ws
}

// WarningSource returns the source that warning w of Warnings is about,
// as the warning names it, or "" when w is not about one source in a way
// a log search should pick out (today: a source that checks no signature
// and admits every address). hookbox serve logs it as the warning's
// source attribute.
func (c *Config) WarningSource(w string) string {
	return c.warnSource[w]
}

// NoTargetWarnings names each source that has neither a forward nor an
// exec target and does not say store_only: true, and each go_handler
// target. hookbox serve, which runs only forward and exec targets,
// appends them to Warnings (and config check prints them), since such a
// source's events, and such a target's deliveries, are stored and never
// worked by it: they wait for a Go program that registers handlers. A Go
// program that registers handlers for its sources does not call it.
func (c *Config) NoTargetWarnings() []string {
	var ws []string
	for i, s := range c.Sources {
		if s.Forward == "" && len(s.Exec) == 0 && s.WorkedAsItself() {
			ws = append(ws, fmt.Sprintf("source %s has no forward, exec or targets: its events are stored and wait for a worker (a Go program's handlers); set store_only: true if nothing should work them", c.sourceLabel(i)))
		}
		for j, t := range s.Targets {
			if !t.GoHandler {
				continue
			}
			label := c.sourceLabel(i)
			name := fmt.Sprintf("targets[%d]", j)
			if o := c.origins[fmt.Sprintf("sources[%d].targets[%d].name", i, j)]; !o.fromEnv && sourceName.MatchString(t.Name) {
				name = t.Name
			}
			queue := label + "/" + name
			if label != s.Name || name != t.Name {
				queue = "SOURCE/TARGET"
			}
			ws = append(ws, fmt.Sprintf("source %s, target %s has go_handler: true, and hookbox serve runs no Go handlers: its deliveries are stored and wait until a program that registers a handler for %q (hookbox.QueueName) runs; give it a forward or exec for hookbox serve to work them", label, name, queue))
		}
	}
	return ws
}

// secretPath is the key path of secret j of source i.
func secretPath(i, j int) string { return fmt.Sprintf("sources[%d].secrets[%d]", i, j) }

// sourceLabel names source i in messages: by its name when the name is
// written in the file, else by its index (a value from the environment is
// never repeated).
func (c *Config) sourceLabel(i int) string {
	o := c.origins[fmt.Sprintf("sources[%d].name", i)]
	if name := c.Sources[i].Name; name != "" && !o.fromEnv && sourceName.MatchString(name) {
		return name
	}
	return fmt.Sprintf("sources[%d]", i)
}

// sourceKey is how errors name source i: its key, with its name when
// that can be shown (sourceLabel).
func (c *Config) sourceKey(i int) string {
	key := fmt.Sprintf("sources[%d]", i)
	if label := c.sourceLabel(i); label != key {
		key = fmt.Sprintf("%s (%s)", key, label)
	}
	return key
}

// schemes are the signature schemes verify knows.
var schemes = verify.Schemes

var sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// nameErrors checks the names of the sources and of their targets, which
// every command reads (Load and LoadPartial alike): each follows
// sourceName, is at most hookbox.MaxNameLength bytes (the stores refuse
// every delivery of a longer one), and differs from the others of its
// kind, and no source is named send.
func (c *Config) nameErrors() []error {
	const rule = "must be letters, digits, '_', '-' or '.' (starting with a letter or digit)"
	var errs []error
	seen := map[string]int{}
	for i, s := range c.Sources {
		key := fmt.Sprintf("sources[%d].name", i)
		first, dup := seen[s.Name]
		switch {
		case !sourceName.MatchString(s.Name):
			errs = append(errs, fmt.Errorf("%s: %s", key, rule))
		case len(s.Name) > hookbox.MaxNameLength:
			errs = append(errs, fmt.Errorf("%s: %s", key, tooLong(s.Name)))
		case s.Name == "send":
			// A send of kind K for key X is the event (send:K, X), whose
			// idempotency key "send:K:X" a source named send would also
			// give its delivery "K:X" (effect.IdempotencyKey).
			errs = append(errs, fmt.Errorf("%s: is reserved: sends recorded by effect.RecordSend have idempotency keys starting with \"send:\", which this source's would share; choose another name", key))
		case dup:
			errs = append(errs, fmt.Errorf("%s: is the name of sources[%d] too; names must differ", key, first))
		default:
			seen[s.Name] = i
		}
		targets := map[string]int{}
		for j, t := range s.Targets {
			key := fmt.Sprintf("%s.targets[%d].name", c.sourceKey(i), j)
			first, dup := targets[t.Name]
			switch {
			case !sourceName.MatchString(t.Name): // the same rule as a source's name
				errs = append(errs, fmt.Errorf("%s: %s", key, rule))
			case len(t.Name) > hookbox.MaxNameLength:
				errs = append(errs, fmt.Errorf("%s: %s", key, tooLong(t.Name)))
			case dup:
				errs = append(errs, fmt.Errorf("%s: is the name of targets[%d] too; names must differ", key, first))
			default:
				targets[t.Name] = j
			}
		}
	}
	return errs
}

// tooLong says that name is longer than a store takes.
func tooLong(name string) string {
	return fmt.Sprintf("is %d bytes long, at most %d are allowed (the stores refuse longer names); choose a shorter one", len(name), hookbox.MaxNameLength)
}

func (c *Config) validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf(key+": "+format, args...))
	}
	for _, r := range []struct {
		key  string
		days int
	}{{"retention_days", c.RetentionDays}, {"payload_retention_days", c.PayloadRetentionDays}} {
		if r.days < 0 {
			bad(r.key, "must be 0 (off) or more")
		} else if r.days > MaxRetentionDays {
			bad(r.key, "must be at most %d (100 years); to keep everything, set 0 (off)", MaxRetentionDays)
		}
	}
	if problem := edgeSpace(c.AdminToken); problem != "" {
		bad("admin_token", "%s", problem)
	}
	if c.MaxBodyBytes < 0 {
		bad("max_body_bytes", "must be positive")
	} else if c.MaxBodyBytes > MaxBodyLimit {
		bad("max_body_bytes", "%d is more than %d (1 GiB): a body is held in memory whole until it is stored", c.MaxBodyBytes, MaxBodyLimit)
	}
	if c.MaxInflightBodyBytes < 0 {
		bad("max_inflight_body_bytes", "must be positive")
	}
	if c.MinBodyRate < 0 {
		bad("min_body_rate", "must be positive (bytes a second)")
	}
	if c.MaxClientConnections < 0 {
		bad("max_client_connections", "must be positive (connections one client may hold open; set it high to lift the limit)")
	}
	errs = append(errs, c.checkListen()...)
	if ps, err := ParsePrefixes(c.TrustedProxies); err != nil {
		errs = append(errs, errors.New("trusted_proxies"+err.Error()))
	} else {
		for i, p := range ps {
			if p.Bits() == 0 {
				// Every client would then be a trusted proxy: its own
				// X-Forwarded-For would name the address allow_ips checks.
				bad(fmt.Sprintf("trusted_proxies[%d]", i), "%s trusts every address, so any client could set X-Forwarded-For and pass allow_ips; list your proxies' own addresses (the load balancer's, like 10.0.0.5, or its subnet, like 10.0.0.0/24)", p)
			}
		}
	}
	switch c.Log.Format {
	case "", "text", "json":
	default:
		bad("log.format", "must be text or json")
	}
	switch c.Log.Level {
	case "", "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error")
	}
	if c.Workers.BatchSize < 0 {
		bad("workers.batch_size", "must be positive")
	}
	if c.Workers.Concurrency < 0 {
		bad("workers.concurrency", "must be positive")
	}
	if c.Workers.MaxPayloadBytes < 0 {
		bad("workers.max_payload_bytes", "must be positive")
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout", "must not be negative")
	}
	for _, r := range []struct {
		key      string
		negative bool
	}{
		{"rejected.max_count", c.Rejected.MaxCount < 0}, {"rejected.max_age", c.Rejected.MaxAge < 0},
		{"rejected.max_body_bytes", c.Rejected.MaxBodyBytes < 0}, {"rejected.rate", c.Rejected.Rate < 0},
		{"rejected.burst", c.Rejected.Burst < 0},
	} {
		if r.negative {
			bad(r.key, "must not be negative")
		}
	}
	if c.Ingest.Flushers < 0 {
		bad("ingest.flushers", "must be positive")
	}
	if c.Ingest.BatchMax < 0 {
		bad("ingest.batch_max", "must be positive")
	}
	if c.Ingest.BatchWait < 0 {
		bad("ingest.batch_wait", "must not be negative")
	}
	if err := CheckDB(c.DB); err != nil {
		bad("db", "%v", err)
	}
	switch strings.ToUpper(c.SQLite.Synchronous) {
	case "", "FULL", "NORMAL", "OFF", "EXTRA":
	default:
		bad("sqlite.synchronous", "must be FULL, NORMAL, OFF or EXTRA")
	}
	if c.SQLite.BusyTimeout < 0 {
		bad("sqlite.busy_timeout", "must not be negative")
	}
	if len(c.Sources) == 0 {
		bad("sources", "at least one source is required")
	}
	errs = append(errs, c.nameErrors()...)
	for i, s := range c.Sources {
		key := c.sourceKey(i)
		emptySecret := false
		for j, sec := range s.Secrets {
			if sec == "" {
				emptySecret = true
				bad(fmt.Sprintf("%s.secrets[%d]", key, j), "is empty%s", c.emptyBecause(i, j))
			} else if problem := edgeSpace(sec); problem != "" {
				bad(fmt.Sprintf("%s.secrets[%d]", key, j), "%s", problem)
			}
		}
		// verify's message for an unknown scheme quotes it; the scheme may
		// have come from the environment.
		if err := checkProvider(key, s); err != nil {
			errs = append(errs, err)
		} else if s.Scheme == "" && s.Provider == "" {
			bad(key+".provider", "or scheme is required: a provider (%s), or a scheme (%s)", strings.Join(PresetNames(), ", "), strings.Join(schemes, ", "))
		} else if !slices.Contains(schemes, s.Scheme) && s.Scheme != "" {
			bad(key+".scheme", "must be %s", strings.Join(schemes, ", "))
		} else if err := checkVerifier(s, emptySecret); err != nil {
			bad(key, "%v", err)
		}
		if s.MaxBodyBytes < 0 {
			bad(key+".max_body_bytes", "must be positive")
		} else if s.MaxBodyBytes > MaxBodyLimit {
			bad(key+".max_body_bytes", "%d is more than %d (1 GiB): a body is held in memory whole until it is stored", s.MaxBodyBytes, MaxBodyLimit)
		}
		if c.MaxInflightBodyBytes > 0 && 2*c.BodyLimit(s) > c.MaxInflightBodyBytes {
			bad("max_inflight_body_bytes", "%d is less than twice %s's body limit of %d bytes (a body's buffers grow as it arrives, and the ones it outgrew count until the reply): its largest deliveries could never be received; set it to at least %d, or lower the limit",
				c.MaxInflightBodyBytes, key, c.BodyLimit(s), 2*c.BodyLimit(s))
		}
		if _, err := ParsePrefixes(s.AllowIPs); err != nil {
			errs = append(errs, errors.New(key+".allow_ips"+err.Error()))
		}
		if s.MaxAttempts < 0 {
			bad(key+".max_attempts", "must be positive")
		}
		if s.BackoffMin < 0 || s.BackoffMax < 0 || s.Timeout < 0 || s.CircuitCooldown < 0 {
			bad(key, "backoff_min, backoff_max, timeout and circuit_cooldown must not be negative")
		}
		if s.CircuitAfter < -1 {
			bad(key+".circuit_after", "must be a count of failures, or -1 for no circuit breaking")
		}
		if s.BackoffMax > 0 && s.BackoffMin > s.BackoffMax {
			bad(key+".backoff_min", "is larger than backoff_max")
		}
		if s.Forward != "" && len(s.Exec) > 0 {
			bad(key, "forward and exec are exclusive; choose one target")
		}
		if s.StoreOnly && (s.Forward != "" || len(s.Exec) > 0) {
			bad(key+".store_only", "is set but the source has a forward or exec target; remove one or the other")
		}
		if s.Forward != "" && !strings.HasPrefix(s.Forward, "http://") && !strings.HasPrefix(s.Forward, "https://") {
			bad(key+".forward", "must be an http:// or https:// URL")
		} else if problem := forwardURLProblem(s.Forward); problem != "" {
			bad(key+".forward", "%s", problem)
		}
		if s.Tolerance > 0 && s.Tolerance < Duration(MinTolerance) {
			bad(key+".tolerance", "is under a second, and signed timestamps count whole seconds: nearly every delivery would be refused as too old; set it to a few minutes (5m, the default, if unsure), or leave it out")
		}
		if s.Forward != "" { // exec reads no statuses: the key does nothing there
			errs = append(errs, permanentStatusErrors(key, s.PermanentStatuses)...)
		}
		if len(s.Exec) > 0 { // nor a forward exit codes (a warning, see oddKeyWarnings)
			errs = append(errs, permanentExitCodeErrors(key, s.PermanentExitCodes)...)
		}
		errs = append(errs, validateTargets(key, s)...)
		errs = append(errs, c.emptyHeaderErrors(key, fmt.Sprintf("sources[%d]", i), s.ForwardHeaders)...)
		for j, t := range s.Targets {
			errs = append(errs, c.emptyHeaderErrors(fmt.Sprintf("%s.targets[%d]", key, j), fmt.Sprintf("sources[%d].targets[%d]", i, j), t.ForwardHeaders)...)
		}
	}
	return errors.Join(errs...)
}

// emptyHeaderErrors reports each forward_headers value (of the source or
// target named key, at key path path) that holds a ${NAME} whose variable
// is set to nothing: a credential most likely missing from the service's
// environment (an EnvironmentFile line "APP_TOKEN="), which the forward
// would send empty to an app that refuses every delivery. ${NAME:-} says
// empty on purpose. Header names are keys, never expanded; no value is
// repeated.
func (c *Config) emptyHeaderErrors(key, path string, headers map[string]string) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		vars := c.origins[path+".forward_headers."+name].emptyVars
		switch len(vars) {
		case 0:
		case 1:
			errs = append(errs, fmt.Errorf("%s.forward_headers.%s: the variable %s is set but empty; set it, or write ${%s:-} if the header may be sent without it", key, name, vars[0], vars[0]))
		default:
			errs = append(errs, fmt.Errorf("%s.forward_headers.%s: the variables %s are set but empty; set them, or write ${NAME:-} for those that may be", key, name, strings.Join(vars, ", ")))
		}
	}
	return errs
}

// checkVerifier checks the signature settings of s as verify.New does.
// An empty secret has been reported already (emptySecret): it is left out
// here, so that one mistake is not reported twice, and when no secret is
// left the rest waits for a secret to be set.
func checkVerifier(s Source, emptySecret bool) error {
	vc := s.Verify()
	if emptySecret {
		vc.Secrets = slices.DeleteFunc(slices.Clone(vc.Secrets), func(sec string) bool { return sec == "" })
		if len(vc.Secrets) == 0 {
			return nil
		}
	}
	_, err := verify.New(vc)
	return err
}

// emptyBecause says why secret j of source i is empty when the config
// knows: its ${NAME} names a variable that is set to nothing. It names
// the variable, never a value.
func (c *Config) emptyBecause(i, j int) string {
	vars := c.origins[secretPath(i, j)].emptyVars
	switch len(vars) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf(": the variable %s is set but empty; set it to the secret", vars[0])
	}
	return fmt.Sprintf(": the variables %s are set but empty; set them", strings.Join(vars, ", "))
}

// edgeSpace says what is wrong with a secret that starts or ends with
// white space, or "" when it does not. Such a value is almost always a
// file's last newline, kept when the file was read into a variable, or a
// stray space; it is never what the sender signs with or sends: HTTP
// drops the spaces around a header value, so such an admin_token, or a
// token or basic secret, can never match, and a signing secret differs
// from the sender's. The message never repeats the value.
func edgeSpace(v string) string {
	trimmed := strings.TrimSpace(v)
	if trimmed == v {
		return ""
	}
	where := "ends"
	switch {
	case trimmed == "":
		return "is only white space; set the secret itself"
	case strings.TrimLeftFunc(v, unicode.IsSpace) != v && strings.TrimRightFunc(v, unicode.IsSpace) != v:
		where = "starts and ends"
	case strings.TrimLeftFunc(v, unicode.IsSpace) != v:
		where = "starts"
	}
	what := "spaces"
	if strings.ContainsAny(v[:len(v)-len(strings.TrimLeftFunc(v, unicode.IsSpace))]+v[len(strings.TrimRightFunc(v, unicode.IsSpace)):], "\r\n") {
		what = "a newline"
	}
	return fmt.Sprintf("%s with %s, which no sender or client sends (read from a file? strip it, for example with tr -d '\\n', or remove the spaces in the config)", where, what)
}
