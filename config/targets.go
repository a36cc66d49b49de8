package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/hookbox/hookbox/routing"
	"github.com/hookbox/hookbox/verify"
	"github.com/hookbox/hookbox/worker"
)

// StringList is a list of strings that may also be written as one value.
type StringList []string

var stringListType = reflect.TypeOf(StringList{})

// JSONTexts is a list of values compared as JSON text (a target's match
// values), which may also be written as one value. YAML's null and
// booleans, in any of YAML's spellings (~, Null, True, FALSE), are read
// as JSON writes them: null, true, false. Read as strings, a null became
// "" (or, alone, no value at all, matching nothing) and True stayed
// "True", which no JSON body holds.
type JSONTexts []string

var jsonTextsType = reflect.TypeOf(JSONTexts{})

// Target is one named target of a source: a forward or an exec, the filter
// that picks the events it gets, and the controls on how fast and in what
// order its deliveries run. Each event a target's filter matches gets a
// delivery of its own, with its own status, attempts and replay.
type Target struct {
	Name string `yaml:"name"`

	// What runs a delivery: one of forward and exec (see Source).
	Forward           string            `yaml:"forward"`
	ForwardHeaders    map[string]string `yaml:"forward_headers"`
	PermanentStatuses []int             `yaml:"permanent_statuses"`
	Exec              []string          `yaml:"exec"`
	ExecDir           string            `yaml:"exec_dir"`
	ExecEnv           []string          `yaml:"exec_env"`
	ExecInheritEnv    bool              `yaml:"exec_inherit_env"`
	// PermanentExitCodes, on an exec, are the exit codes that make the
	// delivery dead at once (see Source).
	PermanentExitCodes []int `yaml:"permanent_exit_codes"`
	// Sign, on a forward, signs each attempt with hookbox's own Standard
	// Webhooks secret and a fresh timestamp.
	Sign *Sign `yaml:"sign"`
	// GoHandler says the target has no forward or exec on purpose: a Go
	// program that embeds hookbox registers handlers for its deliveries
	// under the queue name "source/target" (worker.Pool.Handle or
	// HandlePhases with hookbox.QueueName).
	GoHandler bool `yaml:"go_handler"`

	// The filter: event-type globs, JSON paths with accepted values,
	// headers with accepted values. All set parts must match.
	Types   []string              `yaml:"types"`
	Match   map[string]JSONTexts  `yaml:"match"`
	Headers map[string]StringList `yaml:"headers"`

	// MaxConcurrency bounds this target's deliveries in flight in one
	// hookbox process (0: only the pool's workers.concurrency).
	MaxConcurrency int `yaml:"max_concurrency"`
	// Rate bounds the deliveries started per second in one hookbox
	// process (a token bucket with a burst of one second's worth; 0: no
	// bound).
	Rate float64 `yaml:"rate"`
	// OrderBy ("header:NAME" or a JSON path) runs deliveries with the same
	// key one at a time, in event order.
	OrderBy string `yaml:"order_by"`
	// OnDead is what a dead delivery does to its order key: "hold" (the
	// default: later deliveries wait until it is replayed) or "skip".
	OnDead string `yaml:"on_dead"`
	// CircuitAfter is how many failed attempts in a row pause the target
	// for a cool-down (default: the source's circuit_after, else 5; -1
	// turns circuit breaking off).
	CircuitAfter int `yaml:"circuit_after"`
	// CircuitCooldown is the first cool-down (default: the source's
	// circuit_cooldown, else 10s); it doubles each time the trial delivery
	// fails, up to 10 minutes (worker.MaxCooldown).
	CircuitCooldown Duration `yaml:"circuit_cooldown"`

	// Retries, overriding the source's.
	MaxAttempts int      `yaml:"max_attempts"`
	BackoffMin  Duration `yaml:"backoff_min"`
	BackoffMax  Duration `yaml:"backoff_max"`
	Timeout     Duration `yaml:"timeout"`
}

// Sign configures signed forwards.
type Sign struct {
	// Secret is a Standard Webhooks secret (whsec_ and base64).
	Secret string `yaml:"secret"`
	// DropSenderHeaders leaves out the sender's own signature headers:
	// those target.SenderSignatureHeader knows, and an hmac source's
	// header and timestamp_header. A standard-webhooks sender's are
	// replaced by hookbox's in any case (same names; see signWarnings).
	DropSenderHeaders bool `yaml:"drop_sender_headers"`
}

// signWarnings names each signed forward target (sign) of a
// standard-webhooks source that keeps the sender's headers (no
// drop_sender_headers): hookbox's signature uses the sender's header
// names, webhook-id, webhook-timestamp and webhook-signature, so it
// replaces the sender's, and an app that verifies the provider's
// signature fails on every forward.
func (c *Config) signWarnings() []string {
	var ws []string
	for i, s := range c.Sources {
		if s.Scheme != verify.SchemeStandardWebhooks || svixNamesOnly[s.Provider] {
			continue
		}
		for j, t := range s.Targets {
			if t.Sign == nil || t.Sign.DropSenderHeaders || t.Forward == "" {
				continue
			}
			ws = append(ws, fmt.Sprintf("source %s, target %s: sign replaces the sender's webhook-id, webhook-timestamp and webhook-signature with hookbox's (a standard-webhooks sender that signs with these names, rather than svix-*, loses its own), so the app cannot verify the sender's signature; verify hookbox's in the app (with sign.secret) and set drop_sender_headers: true, or remove sign to forward the sender's", c.sourceLabel(i), c.targetLabel(i, j)))
		}
	}
	return ws
}

// svixNamesOnly holds the presets whose senders sign with svix-id,
// svix-timestamp and svix-signature only, which a signed forward's
// webhook-* headers do not replace (Svix itself may send either).
var svixNamesOnly = map[string]bool{"clerk": true, "resend": true}

// PermanentStatusAllowed reports whether status may be listed in
// permanent_statuses: a final reply that a forward counts as a failure,
// 300 to 599 (redirects are not followed). A 2xx is done, and a 1xx is
// never a final reply: the client waits past the others, and a 101
// Switching Protocols is always retried.
func PermanentStatusAllowed(status int) bool { return status >= 300 && status <= 599 }

// permanentStatusErrors checks the permanent_statuses of a source or
// target (named key in messages).
func permanentStatusErrors(key string, statuses []int) []error {
	var errs []error
	for i, s := range statuses {
		if !PermanentStatusAllowed(s) {
			errs = append(errs, fmt.Errorf("%s.permanent_statuses[%d]: %d is not a reply a forward fails with, so it would never make an event dead; list 3xx, 4xx or 5xx statuses (2xx is done, and 1xx is never final: a 101 is always retried)", key, i, s))
		}
	}
	return errs
}

// PermanentExitCodeAllowed reports whether code may be listed in
// permanent_exit_codes: an exit code a failed command can end with, 1 to
// 255. Exit 0 is done, and a command killed by a signal (a timeout, the
// OOM killer) has no exit code: it is always retried.
func PermanentExitCodeAllowed(code int) bool { return code >= 1 && code <= 255 }

// permanentExitCodeErrors checks the permanent_exit_codes of a source or
// target (named key in messages).
func permanentExitCodeErrors(key string, codes []int) []error {
	var errs []error
	for i, c := range codes {
		if !PermanentExitCodeAllowed(c) {
			errs = append(errs, fmt.Errorf("%s.permanent_exit_codes[%d]: %d is not an exit code a failed command ends with, so it would never make an event dead; list codes from 1 to 255 (0 is done, and a command killed by a signal has no exit code: it is always retried)", key, i, c))
		}
	}
	return errs
}

// DefaultCircuitAfter is how many failed attempts in a row open the
// circuit of a target, or of a source's own forward or exec, unless
// circuit_after says otherwise.
const DefaultCircuitAfter = 5

// DefaultCircuitCooldown is the first cool-down of an open circuit unless
// circuit_cooldown says otherwise.
const DefaultCircuitCooldown = 10 * time.Second

// Kind names what runs t's deliveries: forward, exec, or go (go_handler:
// a Go program's handlers).
func (t Target) Kind() string {
	switch {
	case t.Forward != "":
		return "forward"
	case len(t.Exec) > 0:
		return "exec"
	}
	return "go"
}

// Rule returns the routing rule of t.
func (t Target) Rule() routing.Rule {
	r := routing.Rule{Target: t.Name, Types: t.Types, OrderBy: t.OrderBy}
	if len(t.Match) > 0 {
		r.Match = map[string][]string{}
		for k, v := range t.Match {
			r.Match[k] = v
		}
	}
	if len(t.Headers) > 0 {
		r.Headers = map[string][]string{}
		for k, v := range t.Headers {
			r.Headers[k] = v
		}
	}
	return r
}

// Policy returns t's retry policy: its own keys, else its source's.
func (t Target) Policy(s Source) worker.Policy {
	p := s.Policy()
	p.Strict = false
	if t.MaxAttempts > 0 {
		p.MaxAttempts = t.MaxAttempts
	}
	if t.BackoffMin > 0 {
		p.BackoffMin = time.Duration(t.BackoffMin)
	}
	if t.BackoffMax > 0 {
		p.BackoffMax = time.Duration(t.BackoffMax)
	}
	if t.Timeout > 0 {
		p.Timeout = time.Duration(t.Timeout)
	}
	return p
}

// Circuit returns after how many failures in a row t's circuit opens (0:
// never) and its first cool-down: its own keys, else its source's.
func (t Target) Circuit(s Source) (after int, cooldown time.Duration) {
	after, cooldown = t.CircuitAfter, time.Duration(t.CircuitCooldown)
	if after == 0 {
		after = s.CircuitAfter
	}
	if cooldown <= 0 {
		cooldown = time.Duration(s.CircuitCooldown)
	}
	return circuit(after, Duration(cooldown))
}

// circuit fills the defaults of circuit_after and circuit_cooldown: after
// is 0 when circuit breaking is off (-1).
func circuit(after int, cooldown Duration) (int, time.Duration) {
	switch {
	case after == 0:
		after = DefaultCircuitAfter
	case after < 0:
		after = 0
	}
	if cooldown <= 0 {
		cooldown = Duration(DefaultCircuitCooldown)
	}
	return after, time.Duration(cooldown)
}

// validateTargets checks the targets of source s (named key in messages).
func validateTargets(key string, s Source) []error {
	var errs []error
	bad := func(k, format string, args ...any) {
		errs = append(errs, fmt.Errorf(k+": "+format, args...))
	}
	if len(s.Targets) > 0 && (s.Forward != "" || len(s.Exec) > 0) {
		bad(key, "has targets and a forward or exec of its own; move the forward or exec into targets")
	}
	if len(s.Targets) > 0 && s.StoreOnly {
		bad(key+".store_only", "is set but the source has targets; remove one or the other")
	}
	if len(s.Targets) > 0 && s.Strict {
		bad(key+".strict", "does not apply to targets; give each target order_by instead")
	}
	for i, t := range s.Targets {
		k := fmt.Sprintf("%s.targets[%d]", key, i) // names: Config.nameErrors
		switch {
		case t.GoHandler && (t.Forward != "" || len(t.Exec) > 0):
			bad(k+".go_handler", "is set but the target has a forward or exec; remove one or the other")
		case t.GoHandler:
		case t.Forward == "" && len(t.Exec) == 0:
			bad(k, "needs a forward URL or an exec command (or go_handler: true, for a Go program's handlers)")
		case t.Forward != "" && len(t.Exec) > 0:
			bad(k, "forward and exec are exclusive; choose one, or make two targets")
		case t.Forward != "" && !strings.HasPrefix(t.Forward, "http://") && !strings.HasPrefix(t.Forward, "https://"):
			bad(k+".forward", "must be an http:// or https:// URL")
		default:
			if problem := forwardURLProblem(t.Forward); problem != "" {
				bad(k+".forward", "%s", problem)
			}
		}
		if t.Forward != "" {
			errs = append(errs, permanentStatusErrors(k, t.PermanentStatuses)...)
		}
		if len(t.Exec) > 0 {
			errs = append(errs, permanentExitCodeErrors(k, t.PermanentExitCodes)...)
		}
		if t.Sign != nil {
			if t.Forward == "" {
				bad(k+".sign", "applies to a forward only")
			}
			_, err := verify.New(verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{t.Sign.Secret}})
			if problem := edgeSpace(t.Sign.Secret); problem != "" {
				bad(k+".sign.secret", "%s", problem)
			} else if err != nil || !strings.HasPrefix(t.Sign.Secret, "whsec_") {
				bad(k+".sign.secret", "must be a Standard Webhooks secret: whsec_ followed by base64 (generate one with: echo whsec_$(head -c 32 /dev/urandom | base64))")
			}
		}
		if err := t.Rule().Check(); err != nil {
			bad(k, "%v", err)
		}
		if t.MaxConcurrency < 0 {
			bad(k+".max_concurrency", "must be positive (0: no limit of its own)")
		}
		if t.Rate < 0 {
			bad(k+".rate", "must be positive (deliveries per second; 0: no limit)")
		}
		switch t.OnDead {
		case "", "hold", "skip":
		default:
			bad(k+".on_dead", "must be hold or skip")
		}
		if t.OnDead != "" && t.OrderBy == "" {
			bad(k+".on_dead", "applies with order_by only")
		}
		if t.CircuitAfter < -1 {
			bad(k+".circuit_after", "must be a count of failures, or -1 for no circuit breaking")
		}
		if t.MaxAttempts < 0 {
			bad(k+".max_attempts", "must be positive")
		}
		if t.BackoffMin < 0 || t.BackoffMax < 0 || t.Timeout < 0 || t.CircuitCooldown < 0 {
			bad(k, "backoff_min, backoff_max, timeout and circuit_cooldown must not be negative")
		} else if p := t.Policy(s); p.BackoffMax > 0 && p.BackoffMin > p.BackoffMax {
			// As a source's (validate): the worker would raise
			// backoff_max to backoff_min without a word.
			bad(k+".backoff_min", "is larger than backoff_max (%s against %s, each the target's own, else its source's); raise backoff_max or lower backoff_min",
				p.BackoffMin, p.BackoffMax)
		}
	}
	return errs
}
