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
	// AllowIdenticalBodies turns off deduplication by body for a source
	// whose signature covers the body but not the delivery id (github,
	// hmac, none): by default a body already stored for the source is a
	// duplicate whatever id it comes with, since anyone who captured one
	// delivery could send it again under a fresh id. Set it for senders
	// that really send identical bodies as new deliveries.
	AllowIdenticalBodies bool `yaml:"allow_identical_bodies"`
}

// DedupesByBody reports whether deliveries of s are also deduplicated by
// the SHA-256 of their body: for schemes that sign no timestamp and no id
// (github, hmac, none), unless allow_identical_bodies is set.
func (s Source) DedupesByBody() bool {
	if s.AllowIdenticalBodies {
		return false
	}
	switch s.Scheme {
	case "github", "hmac", "none":
		return true
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
