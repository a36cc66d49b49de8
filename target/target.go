// Package target holds the work hookbox's binary does with an event when no
// Go handler is registered: Forward (POST it to a URL) and Exec (run a
// command). Both implement worker.Target and are driven by a worker.Pool,
// which applies the per-attempt timeout through the context, retries with
// backoff, and marks an event dead after its last attempt.
//
// Guarantees:
//
//   - Forward sends the stored body byte for byte with the sender's original
//     headers (signature headers included), so the app behind hookbox can
//     verify the provider's signature itself (a signed forward replaces a
//     Standard Webhooks sender's webhook-* headers with its own, of the
//     same names: see SignOptions). It leaves out the headers that
//     describe a connection rather than the message (hop-by-hop ones, every
//     Proxy-*, and those a Connection header names), Accept-Encoding (the
//     client asks for its own encodings and decompresses the reply) and
//     the routing and identity headers an app may trust from its own
//     proxy (Forwarded, X-Forwarded-*, X-Real-Ip, Via, X-Original-Url,
//     X-*-Method-Override, Content-Encoding, X-Remote-User,
//     X-Auth-Request-*, X-Amzn-Oidc-* and the like; ForwardHeader has the
//     list), so a sender cannot pose as a local client or a signed-in
//     user, or rewrite the method or URL the app sees. It adds an Idempotency-Key of "<source>:<delivery id>"
//     that is the same on every attempt and every redelivery, so the app
//     can make its effect safe to repeat, and the event's id (the sender's
//     202 reply's, for every target of the event alike) as
//     Hookbox-Event-Id.
//   - Forward treats only a 2xx reply as done. 408, 429, 5xx, other 4xx,
//     redirects (never followed, whatever http.Client it is given: a
//     followed one would carry the body, the signature and the extra
//     headers to another host), connection errors and timeouts are retried;
//     a Retry-After reply header (seconds or an HTTP date) delays the retry at
//     least that long, up to an hour (worker.MaxRetryAfter) or the policy's
//     BackoffMax if that is longer. Only the statuses listed as permanent
//     (410 Gone by default) make the event dead at once.
//   - Exec runs the command without a shell, with the body on stdin and the
//     event's fields in HOOKBOX_* environment variables. Its environment is
//     minimal unless InheritEnv is set: PATH, HOME, the configured extras
//     and those HOOKBOX_* fields, so that the secrets in hookbox's own
//     environment never reach the command or its output. Exit status 0 is
//     done; an exit code listed in PermanentExitCodes (none by default) is
//     a worker.Permanent error, the command's refusal of its event for
//     good; anything else is retried. The error gives the exit code and
//     the tail of the combined output. The command runs in its own process
//     group, and the whole group is killed when the attempt ends (its
//     timeout, a shutdown, or the command's own exit). On Linux, in a
//     program that called ExecSupervisor (hookbox's binary does), each
//     command runs under a supervisor, a child subreaper, that also kills
//     the processes that left the group (setsid, a daemon's
//     double fork), so no process of an attempt outlives it. Nor does one
//     outlive the program running Exec: the supervisor kills them all
//     when the program dies, even by SIGKILL, so the next process never
//     runs an event beside a command still running it. The supervisor
//     also kills them at the attempt's deadline itself, so the
//     timeout holds while the program is stopped (SIGSTOP, a debugger)
//     and extends no lease. Without one (other systems, or a program that
//     embeds hookbox and does not call it) a process that leaves the
//     group is not killed (a service manager that kills its unit's
//     processes, as systemd does at stop, gets it then), and only
//     KillRunning, called before exiting, kills the commands; on Linux
//     the command itself, but not what it started, is killed when the
//     program dies. When hookbox is PID 1 (a container without an
//     init), the killed processes are reparented to it; ReapOrphans reaps
//     them without taking the exit status of a command Exec waits for, so
//     none is left a zombie.
//   - An event whose payload was cleared (payload_retention_days) is never
//     sent or run with an empty body in its place: the attempt is a
//     worker.Permanent error that says why.
//   - Errors never contain the values of the extra headers Forward is
//     configured with (they are often shared secrets), nor the forward URL's
//     query or password (nor the Basic credential made of its userinfo; a
//     value under 4 bytes is masked only within the whole query or that
//     credential), nor, for Exec, the credentials written in its own
//     arguments (redact.ArgSecrets: "-u user:PASSWORD", "--token=X", a
//     URL's password), nor any secret of the Redactor the target is given
//     (see package redact): a reply body or an output tail that echoes one
//     shows redact.Mask instead, even where the cut that bounds the text
//     falls inside the secret.
package target

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/verify"
	"github.com/hookbox/hookbox/worker"
)

// FromConfig returns the target configured for src: a *Forward when
// src.Forward is set, an *Exec when src.Exec is, and (nil, nil) when the
// source has neither (its events are then for Go handlers). red masks
// secrets in the target's errors; nil masks none. log gets an exec
// command's output of successful attempts at debug level; nil logs none.
func FromConfig(src config.Source, red *redact.Redactor, log *slog.Logger) (worker.Target, error) {
	if src.Forward == "" && len(src.Exec) == 0 {
		return nil, nil
	}
	t, err := build(config.Target{
		Forward: src.Forward, ForwardHeaders: src.ForwardHeaders, PermanentStatuses: src.PermanentStatuses,
		Exec: src.Exec, ExecDir: src.ExecDir, ExecEnv: src.ExecEnv, ExecInheritEnv: src.ExecInheritEnv,
		PermanentExitCodes: src.PermanentExitCodes,
	}, nil, red, log)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.Name, err)
	}
	return t, nil
}

// FromTarget returns the forward or exec of the named target t of source
// src (see config.Target); red and log as for FromConfig.
func FromTarget(src config.Source, t config.Target, red *redact.Redactor, log *slog.Logger) (worker.Target, error) {
	tg, err := build(t, senderHeaders(src), red, log)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", hookbox.QueueName(src.Name, t.Name), err)
	}
	return tg, nil
}

// senderHeaders returns the names of the signature headers src
// configures (an hmac source's header and timestamp_header), which a
// signed forward with drop_sender_headers leaves out with the ones
// SenderSignatureHeader knows.
func senderHeaders(src config.Source) []string {
	cfg := src.Verify() // with the provider's preset applied
	if cfg.Scheme != verify.SchemeHMAC {
		return nil
	}
	var names []string
	for _, name := range []string{cfg.Header, cfg.TimestampHeader} {
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

// build makes the Forward or Exec that t configures; sender names the
// source's own signature headers (see SignOptions.SenderHeaders).
func build(t config.Target, sender []string, red *redact.Redactor, log *slog.Logger) (worker.Target, error) {
	switch {
	case t.Forward != "" && len(t.Exec) > 0:
		return nil, errors.New("forward and exec are exclusive; choose one target")
	case t.Forward != "":
		opts := ForwardOptions{URL: t.Forward, Headers: t.ForwardHeaders, PermanentStatuses: t.PermanentStatuses, Redactor: red}
		if t.Sign != nil {
			opts.Sign = &SignOptions{Secret: t.Sign.Secret, DropSenderHeaders: t.Sign.DropSenderHeaders, SenderHeaders: sender}
		}
		return NewForward(opts)
	}
	return NewExec(ExecOptions{Argv: t.Exec, Dir: t.ExecDir, Env: t.ExecEnv, InheritEnv: t.ExecInheritEnv,
		PermanentExitCodes: t.PermanentExitCodes, Redactor: red, Logger: log})
}

// errPayloadCleared is why an event whose payload was cleared is not
// delivered: sending an empty body (with the sender's signature headers)
// would make the app fail to verify it, or worse act on nothing, and
// retrying cannot bring the payload back.
var errPayloadCleared = errors.New("payload was cleared by payload_retention_days; it cannot be delivered again")

// payloadCleared reports whether ev's payload was dropped by payload
// retention (a stored empty body is not).
func payloadCleared(ev *hookbox.Event) bool { return ev.PayloadCleared }

// checkPayload returns a permanent error, worded for the target named what,
// when ev's payload was cleared, and nil otherwise.
func checkPayload(what string, ev *hookbox.Event) error {
	if !payloadCleared(ev) {
		return nil
	}
	return worker.Permanent(fmt.Errorf("%s: event %d: %w", what, ev.ID, errPayloadCleared))
}
