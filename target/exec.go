package target

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/redact"
)

// DefaultOutputLimit is how much of a command's combined output Exec keeps
// (the tail) when ExecOptions.OutputLimit is zero.
const DefaultOutputLimit = 64 << 10

// errorSlack is room left in a failed attempt's error, beyond its output,
// for what masking secrets may add to its first part (the command's name).
const errorSlack = 32

// execWaitDelay bounds how long Exec waits, once the attempt is over, for a
// killed process to exit and for its output pipe to close. A variable only
// so that tests can make a wait on the output show as one that never ends.
var execWaitDelay = 2 * time.Second

// Environment variables Exec sets for the command, on top of PATH, HOME and
// ExecOptions.Env (or hookbox's whole environment with InheritEnv).
const (
	EnvSource         = "HOOKBOX_SOURCE"
	EnvDeliveryID     = "HOOKBOX_DELIVERY_ID"
	EnvEventID        = "HOOKBOX_EVENT_ID" // the event's id, for a named target's delivery too (hookbox.Event.EventID)
	EnvEventType      = "HOOKBOX_EVENT_TYPE"
	EnvAttempt        = "HOOKBOX_ATTEMPT"
	EnvIdempotencyKey = "HOOKBOX_IDEMPOTENCY_KEY"
	EnvTarget         = "HOOKBOX_TARGET" // the target's name; "" for a source's own exec
)

// ExecOptions configure an Exec target.
type ExecOptions struct {
	// Argv is the command and its arguments, run without a shell. A
	// relative path with a slash is resolved against Dir; a bare name is
	// looked up in PATH.
	Argv []string
	// Dir is the working directory ("" means hookbox's own; a relative
	// one is taken from hookbox's own). A missing Dir fails each attempt,
	// with an error that says so.
	Dir string
	// Env holds extra "NAME=value" entries for the command's environment.
	Env []string
	// InheritEnv passes hookbox's whole environment to the command, under
	// Env and the event's fields. Off by default: hookbox's environment
	// usually holds the secrets its config expands (webhook secrets, the
	// admin token, the database password), and a command that prints its
	// environment would put them in its output. Without it the command
	// gets only PATH (hookbox's, or defaultPath), HOME (when set), Env and
	// the event's HOOKBOX_* fields.
	InheritEnv bool
	// Redactor masks secrets in the errors Deliver returns (the output
	// tail above all). The credentials written in Argv
	// (redact.ArgSecrets: "-u user:PASSWORD", "--token=X", a URL's
	// password) are masked in any case, as a Forward masks its URL's.
	Redactor *redact.Redactor
	// OutputLimit is how many bytes of combined stdout and stderr are
	// kept: the last ones (default DefaultOutputLimit). A successful
	// attempt logs them at debug level (see Logger); a failed attempt's
	// error carries as many of the last ones as fit, with the rest of the
	// error, in worker.MaxErrorText (about 2 KiB), so that the worker
	// stores them whole, in one piece: the end of the output, cut only at
	// its front (marked "…").
	OutputLimit int
	// PermanentExitCodes are the exit codes, 1 to 255, with which the
	// command refuses its event for good (a payload it can never accept):
	// the attempt is then a worker.Permanent error, so the event is dead
	// at once, not retried, and not counted by the target's circuit. nil
	// means none: every exit code but 0 is retried.
	PermanentExitCodes []int
	// Logger, when it is enabled at debug level, gets the output tail of
	// each successful attempt (secrets masked, as in errors): a failed
	// attempt's output is in its error, a successful one's is otherwise
	// dropped. nil logs nothing.
	Logger *slog.Logger
}

// Exec runs a command per event, with the raw body on stdin. It is safe for
// concurrent use; each attempt runs its own process.
type Exec struct {
	argv    []string
	dir     string
	env     []string
	inherit bool
	red     *redact.Redactor
	limit   int
	log     *slog.Logger
	// permanent holds PermanentExitCodes.
	permanent map[int]bool
}

// NewExec validates opts and returns the target. Errors never quote Env
// values.
func NewExec(opts ExecOptions) (*Exec, error) {
	if len(opts.Argv) == 0 || opts.Argv[0] == "" {
		return nil, errors.New("exec: a command is required")
	}
	for i, a := range opts.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("exec: argument %d contains a NUL byte", i)
		}
	}
	for i, kv := range opts.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("exec: env[%d]: want NAME=value", i)
		}
	}
	permanent := map[int]bool{}
	for _, c := range opts.PermanentExitCodes {
		if !config.PermanentExitCodeAllowed(c) {
			return nil, fmt.Errorf("exec: permanent exit codes: %d is not an exit code a failed command ends with; list codes from 1 to 255", c)
		}
		permanent[c] = true
	}
	if opts.OutputLimit < 0 {
		return nil, errors.New("exec: output limit must not be negative")
	}
	if opts.OutputLimit == 0 {
		opts.OutputLimit = DefaultOutputLimit
	}
	if err := supported(); err != nil {
		return nil, err
	}
	return &Exec{
		argv:      append([]string(nil), opts.Argv...),
		dir:       opts.Dir,
		env:       append([]string(nil), opts.Env...),
		inherit:   opts.InheritEnv,
		red:       opts.Redactor.With(redact.ArgSecrets(opts.Argv)...),
		limit:     opts.OutputLimit,
		log:       opts.Logger,
		permanent: permanent,
	}, nil
}

// Deliver runs the command for ev and waits for it. Exit status 0 is nil;
// an exit code listed in PermanentExitCodes is a worker.Permanent error;
// anything else is an error to retry. Either gives the exit code (or
// signal) and the tail of the output, with the Redactor's secrets masked. When ctx
// ends first, the command's whole process group is killed and the error
// says so. An event whose payload was cleared is a worker.Permanent error,
// and the command is not run.
func (e *Exec) Deliver(ctx context.Context, ev *hookbox.Event) error {
	if err := checkPayload("exec: "+e.name(), ev); err != nil {
		return err
	}
	return e.red.Error(e.run(ctx, ev))
}

// logOutput logs the output of a successful attempt at debug level, when
// the logger wants it.
func (e *Exec) logOutput(ctx context.Context, ev *hookbox.Event, out *tailBuffer) {
	if e.log == nil || !e.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	e.log.LogAttrs(ctx, slog.LevelDebug, "exec output", slog.String("command", e.name()), slog.String("source", ev.Source),
		slog.Int64("event_id", ev.ID), slog.Int("attempt", ev.Attempts), slog.Int64("bytes", out.total), slog.String("output", out.String()))
}

// defaultPath is the command's PATH when hookbox has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// environ returns the command's environment for ev: the parent's (all of
// it with InheritEnv, else only PATH and HOME), then the configured
// extras, then the event's fields (later entries win).
func (e *Exec) environ(parent []string, ev *hookbox.Event) []string {
	env := make([]string, 0, len(parent)+len(e.env)+6)
	if e.inherit {
		env = append(env, parent...)
	} else {
		path := defaultPath
		for _, kv := range parent {
			switch name, value, _ := strings.Cut(kv, "="); name {
			case "PATH":
				if value != "" {
					path = value
				}
			case "HOME":
				env = append(env, kv)
			}
		}
		env = append(env, "PATH="+path)
	}
	env = append(env, e.env...)
	return append(env,
		EnvSource+"="+ev.SourceName(),
		EnvTarget+"="+ev.Target,
		EnvDeliveryID+"="+ev.DeliveryID,
		EnvEventID+"="+strconv.FormatInt(ev.EventID(), 10),
		EnvEventType+"="+ev.EventType,
		EnvAttempt+"="+strconv.Itoa(ev.Attempts),
		EnvIdempotencyKey+"="+effect.IdempotencyKey(ev),
	)
}

// name is how errors refer to the command: its base name only, since
// arguments may carry secrets.
func (e *Exec) name() string { return filepath.Base(e.argv[0]) }

// tailBuffer keeps the last limit bytes written to it, and enough before
// them to mask a secret the cut would split. Not safe for concurrent use.
type tailBuffer struct {
	buf   []byte
	limit int
	red   *redact.Redactor
	total int64
	// front: output was dropped before buf, whose start may be inside a
	// secret.
	front bool
}

// keep is how many bytes the buffer holds on to.
func (t *tailBuffer) keep() int { return t.limit + t.red.Longest() }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.total += int64(len(p))
	// Control bytes but newline and tab are never shown: dropped here, as
	// written (ASCII, never part of a longer UTF-8 sequence), so that the
	// cut in Last is made in the text shown, and a secret they split
	// ("s3cr\x00et") is one there.
	for _, c := range p {
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			continue
		}
		t.buf = append(t.buf, c)
	}
	if keep := t.keep(); len(t.buf) > 2*keep {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-keep:]...)
		t.front = true
	}
	return len(p), nil
}

// String returns the kept tail, as Last(limit) does.
func (t *tailBuffer) String() string { return t.Last(t.limit) }

// Last returns the last n bytes of output (n at most limit) with secrets
// masked (one that dropping control bytes put together too), made safe
// to store (valid UTF-8, no NUL or other controls but newline and tab),
// trimmed of white space at its ends, and cut again at the front to n
// bytes when masking or making it valid lengthened it, prefixed by "…"
// when output was cut. A
// secret the cut would split is masked whole, though the mask may then be
// cut in turn.
func (t *tailBuffer) Last(n int) string {
	n = min(n, t.limit)
	raw := t.buf
	// Trailing white space and control bytes (all ASCII) are dropped
	// anyway: trimmed first, so that they take none of the n bytes.
	for len(raw) > 0 && droppedAtEnd(raw[len(raw)-1]) {
		raw = raw[:len(raw)-1]
	}
	// The cut is made in the bytes as written, where Tail keeps the
	// Longest bytes before the window as context only: a secret the
	// cut splits is masked whole, and one cut off by the buffer's own
	// start (output dropped before it) is never shown in part. Cutting
	// after bytes were dropped would let the window reach into that
	// context.
	ctx := t.red.Longest()
	m := n
	front := t.front
	if front {
		m = min(m, max(len(raw)-ctx, 0))
	}
	b := raw
	if keep := m + ctx; len(b) > keep {
		b = b[len(b)-keep:]
	}
	s := t.red.Tail(string(b), m)
	cut := t.total > int64(n) || len(b) > m
	if (front || len(b) > m) && !strings.HasPrefix(s, redact.Mask) {
		// Cut inside a rune, perhaps: start on the next.
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
	}
	// Control bytes never reached buf (Write), so a secret they split is
	// whole there and Tail masked it; what is left is made valid UTF-8,
	// which may lengthen it: cut again to n bytes, on a rune's start.
	safe := strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	start := max(len(safe)-n, 0)
	for start < len(safe) && !utf8.RuneStart(safe[start]) {
		start++
	}
	if start > 0 {
		safe, cut = safe[start:], true
	}
	safe = strings.TrimSpace(safe)
	if cut {
		safe = "…" + safe
	}
	return safe
}

// droppedAtEnd reports whether Last drops byte c at the end of the output:
// ASCII white space or a control byte.
func droppedAtEnd(c byte) bool { return c < 0x20 || c == 0x7f || c == ' ' }
