// Package config loads hookbox's YAML configuration.
//
// Loading expands ${NAME} and ${NAME:-default} from the environment (an unset
// variable without a default is an error that names it), rejects unknown keys,
// and validates every value, naming the key at fault ("sources[1].scheme: …").
// A Config that Load returned is ready to use; error messages never contain a
// secret's value.
package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

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

// DefaultMaxInflightBodyBytes is the budget for body bytes in flight when
// max_inflight_body_bytes is not set (64 MiB).
const DefaultMaxInflightBodyBytes = 64 << 20

// Config is the whole file.
type Config struct {
	Listen               string  `yaml:"listen"`
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

	// MaxInflightBodyBytes bounds the request body bytes held in memory at
	// once across all deliveries; one that would pass it is answered 503
	// with Retry-After. Default: DefaultMaxInflightBodyBytes, or the largest
	// body limit if that is more. It must be at least every source's body
	// limit; a chunked body (no Content-Length) near the limit needs up to
	// three times the limit, as its buffer grows.
	MaxInflightBodyBytes int64 `yaml:"max_inflight_body_bytes"`
	// TrustedProxies are the addresses or CIDRs of proxies in front of
	// hookbox whose X-Forwarded-For and Forwarded headers are believed when
	// a source has allow_ips. From any other peer they are ignored.
	TrustedProxies []string `yaml:"trusted_proxies"`
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
	// Concurrency is the most forward/exec deliveries in flight (default 32).
	Concurrency int `yaml:"concurrency"`
}

// SQLite holds options that apply only to the SQLite store.
type SQLite struct {
	// Synchronous is FULL (default), NORMAL or OFF. Anything but FULL can
	// lose acknowledged deliveries on power loss.
	Synchronous string `yaml:"synchronous"`
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

	// Where the delivery id and event type are, for hmac and none.
	IDHeader   string `yaml:"id_header"`
	IDField    string `yaml:"id_field"`
	TypeHeader string `yaml:"type_header"`
	TypeField  string `yaml:"type_field"`

	// Targets and retries.
	Forward string `yaml:"forward"`
	// ForwardHeaders are added to every forwarded request (a shared secret
	// the app checks, for example).
	ForwardHeaders map[string]string `yaml:"forward_headers"`
	// PermanentStatuses are forward reply statuses that make the event dead
	// at once (default [410]).
	PermanentStatuses []int    `yaml:"permanent_statuses"`
	Exec              []string `yaml:"exec"`
	ExecDir           string   `yaml:"exec_dir"`
	ExecEnv           []string `yaml:"exec_env"`
	MaxAttempts       int      `yaml:"max_attempts"`
	BackoffMin        Duration `yaml:"backoff_min"`
	BackoffMax        Duration `yaml:"backoff_max"`
	Timeout           Duration `yaml:"timeout"` // per attempt
	// Strict runs this source's events one at a time in id order.
	Strict bool `yaml:"strict"`
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

// Verify returns the verify.Config for s.
func (s Source) Verify() verify.Config {
	return verify.Config{
		Scheme:     s.Scheme,
		Secrets:    s.Secrets,
		Tolerance:  time.Duration(s.Tolerance),
		Header:     s.Header,
		Prefix:     s.Prefix,
		Encoding:   s.Encoding,
		Algorithm:  s.Algorithm,
		IDHeader:   s.IDHeader,
		IDField:    s.IDField,
		TypeHeader: s.TypeHeader,
		TypeField:  s.TypeField,
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

// InflightBodyBytes returns max_inflight_body_bytes, or its default: the
// larger of DefaultMaxInflightBodyBytes and the largest body limit.
func (c *Config) InflightBodyBytes() int64 {
	if c.MaxInflightBodyBytes > 0 {
		return c.MaxInflightBodyBytes
	}
	n := int64(DefaultMaxInflightBodyBytes)
	for _, s := range c.Sources {
		n = max(n, c.bodyLimit(s))
	}
	return n
}

// bodyLimit is the largest body s accepts.
func (c *Config) bodyLimit(s Source) int64 {
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

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration (like 5m or 250ms): %q", s)
	}
	*d = Duration(v)
	return nil
}

// Load reads, expands and validates the file at path.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse expands and validates a YAML document.
func Parse(raw []byte) (*Config, error) {
	expanded, err := expandEnv(string(raw), os.LookupEnv)
	if err != nil {
		return nil, err
	}
	var c Config
	if err := yaml.UnmarshalWithOptions([]byte(expanded), &c, yaml.DisallowUnknownField()); err != nil {
		return nil, errors.New(yaml.FormatError(err, false, true))
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandEnv replaces ${NAME} and ${NAME:-default}. "$${" escapes a literal
// "${".
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	const escaped = "\x00dollar\x00"
	s = strings.ReplaceAll(s, "$${", escaped)
	var missing []string
	s = envRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := envRef.FindStringSubmatch(ref)
		if v, ok := lookup(m[1]); ok && (v != "" || m[2] == "") {
			return v
		}
		if m[2] != "" {
			return m[3]
		}
		missing = append(missing, m[1])
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set (use ${NAME:-default} for a default)", strings.Join(missing, ", "))
	}
	return strings.ReplaceAll(s, escaped, "${"), nil
}

var sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func (c *Config) validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf(key+": "+format, args...))
	}
	if c.RetentionDays < 0 {
		bad("retention_days", "must be 0 (off) or more")
	}
	if c.PayloadRetentionDays < 0 {
		bad("payload_retention_days", "must be 0 (off) or more")
	}
	if c.MaxBodyBytes < 0 {
		bad("max_body_bytes", "must be positive")
	}
	if c.MaxInflightBodyBytes < 0 {
		bad("max_inflight_body_bytes", "must be positive")
	}
	if _, err := ParsePrefixes(c.TrustedProxies); err != nil {
		errs = append(errs, errors.New("trusted_proxies"+err.Error()))
	}
	switch c.Log.Format {
	case "", "text", "json":
	default:
		bad("log.format", "must be text or json, not %q", c.Log.Format)
	}
	switch c.Log.Level {
	case "", "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error, not %q", c.Log.Level)
	}
	if c.Workers.BatchSize < 0 {
		bad("workers.batch_size", "must be positive")
	}
	if c.Workers.Concurrency < 0 {
		bad("workers.concurrency", "must be positive")
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout", "must not be negative")
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
	switch strings.ToUpper(c.SQLite.Synchronous) {
	case "", "FULL", "NORMAL", "OFF", "EXTRA":
	default:
		bad("sqlite.synchronous", "must be FULL, NORMAL, OFF or EXTRA")
	}
	if len(c.Sources) == 0 {
		bad("sources", "at least one source is required")
	}
	seen := map[string]bool{}
	for i, s := range c.Sources {
		key := fmt.Sprintf("sources[%d]", i)
		if !sourceName.MatchString(s.Name) {
			bad(key+".name", "must be letters, digits, '_', '-' or '.', not %q", s.Name)
		} else if seen[s.Name] {
			bad(key+".name", "%q is used by another source", s.Name)
		}
		seen[s.Name] = true
		if s.Name != "" {
			key = fmt.Sprintf("sources[%d] (%s)", i, s.Name)
		}
		for j, sec := range s.Secrets {
			if sec == "" {
				bad(fmt.Sprintf("%s.secrets[%d]", key, j), "is empty")
			}
		}
		if _, err := verify.New(s.Verify()); err != nil {
			bad(key, "%v", err)
		}
		if s.MaxBodyBytes < 0 {
			bad(key+".max_body_bytes", "must be positive")
		}
		if c.MaxInflightBodyBytes > 0 && c.bodyLimit(s) > c.MaxInflightBodyBytes {
			bad("max_inflight_body_bytes", "%d is less than %s's body limit of %d bytes: its largest deliveries could never be received",
				c.MaxInflightBodyBytes, key, c.bodyLimit(s))
		}
		if _, err := ParsePrefixes(s.AllowIPs); err != nil {
			errs = append(errs, errors.New(key+".allow_ips"+err.Error()))
		}
		if s.MaxAttempts < 0 {
			bad(key+".max_attempts", "must be positive")
		}
		if s.BackoffMin < 0 || s.BackoffMax < 0 || s.Timeout < 0 {
			bad(key, "backoff_min, backoff_max and timeout must not be negative")
		}
		if s.BackoffMax > 0 && s.BackoffMin > s.BackoffMax {
			bad(key+".backoff_min", "is larger than backoff_max")
		}
		if s.Forward != "" && len(s.Exec) > 0 {
			bad(key, "forward and exec are exclusive; choose one target")
		}
		if s.Forward != "" && !strings.HasPrefix(s.Forward, "http://") && !strings.HasPrefix(s.Forward, "https://") {
			bad(key+".forward", "must be an http:// or https:// URL")
		}
	}
	return errors.Join(errs...)
}
