package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
)

// Exit codes, as README's Commands section lists them.
const (
	exitOK      = 0
	exitFailure = 1 // the command was understood and failed
	exitUsage   = 2 // the command line is wrong: nothing was done
)

// usageError is a mistake in how a command was called (an unknown
// command or flag, a bad flag value, a wrong number of arguments):
// hookbox exits 2 with it, so that a script can tell it from a failure
// of the work itself (a database down), which exits 1.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef is a usageError with a message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// asUsage marks err, when there is one, as a usage error.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// run runs hookbox with args, writes an error to stderr, and returns the
// exit code: 0, exitFailure, or exitUsage. health exits 0 or 1 only:
// Docker's HEALTHCHECK reserves 2.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	// Errors may quote input (flags, a server's reply): escaped.
	fmt.Fprintln(stderr, "hookbox:", printableLines(err.Error()))
	if errors.As(err, new(usageError)) && (cmd == nil || cmd.CommandPath() != "hookbox health") {
		return exitUsage
	}
	return exitFailure
}

// markUsageErrors makes every way cobra refuses a command line a
// usageError: flag errors through the root's FlagErrorFunc (inherited by
// every command), argument errors by wrapping each command's Args. A
// command with subcommands refuses any argument as an unknown command,
// with suggestions; a command without them that takes no arguments says
// so, with the flag the argument was likely meant for (argHints).
func markUsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%w (%s --help lists its flags)", err, c.CommandPath())
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.HasSubCommands():
			c.Args = unknownSubcommand
		case c.Args != nil:
			c.Args = refineArgs(c.Args)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownSubcommand refuses any argument of a command that has
// subcommands: it can only be a mistyped one.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, set lazily by cobra itself
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	} else {
		msg += fmt.Sprintf(" (%s --help lists its commands)", c.CommandPath())
	}
	return usageError{errors.New(msg)}
}

// refineArgs wraps a command's argument check: its error is a usage
// error, and when the command would have taken the call without its
// arguments, the message says it takes none and suggests a flag.
func refineArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		err := check(c, args)
		if err == nil {
			return nil
		}
		if len(args) > 0 && check(c, nil) == nil {
			quoted := make([]string, len(args))
			for i, a := range args {
				quoted[i] = strconv.Quote(a)
			}
			msg := fmt.Sprintf("%s takes no arguments, but was given %s", c.CommandPath(), strings.Join(quoted, ", "))
			if hint := argHint(c.CommandPath(), args); hint != "" {
				msg += ": did you mean " + hint + "?"
			} else {
				msg += fmt.Sprintf(" (%s --help lists its flags)", c.CommandPath())
			}
			return usageError{errors.New(msg)}
		}
		return usageError{fmt.Errorf("%s: %w (usage: %s)", c.CommandPath(), err, c.UseLine())}
	}
}

// argHint suggests the flags that stray arguments of the command at path
// were most likely meant for, or "" when that is not clear.
func argHint(path string, args []string) string {
	a := args[0]
	numeric := func(s string) bool {
		n, err := strconv.ParseInt(s, 10, 64)
		return err == nil && n >= 0
	}
	if len(args) == 1 && (strings.HasSuffix(a, ".yaml") || strings.HasSuffix(a, ".yml")) {
		return "--config " + a
	}
	switch path {
	case "hookbox purge":
		if len(args) == 1 && numeric(a) {
			return "--days " + a
		}
	case "hookbox rejected recheck":
		var ids []string
		for _, x := range args {
			if !numeric(x) {
				return ""
			}
			ids = append(ids, "--id "+x)
		}
		return strings.Join(ids, " ")
	case "hookbox events list":
		switch {
		case len(args) != 1:
		case hookbox.Status(a).Valid():
			return "--status " + a
		case numeric(a):
			return "hookbox events show " + a
		case hookbox.ValidQueueName(a):
			return "--source " + a
		}
	case "hookbox rejected list":
		switch {
		case len(args) != 1:
		case numeric(a) && len(a) == 3:
			return "--status " + a
		case numeric(a):
			return "hookbox rejected show " + a
		case hookbox.ValidQueueName(a):
			return "--source " + a
		}
	case "hookbox tail":
		switch {
		case len(args) != 1:
		case numeric(a):
			return "--lines " + a
		case hookbox.ValidQueueName(a):
			return "--source " + a
		}
	case "hookbox send":
		if len(args) != 1 {
			return ""
		}
		if info, err := os.Stat(a); err == nil && info.Mode().IsRegular() {
			return "--file " + a
		}
		if hookbox.ValidQueueName(a) {
			return "--source " + a
		}
	}
	return ""
}
