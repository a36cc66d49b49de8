package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/server"
)

// targetInfo is one row of `hookbox targets list`.
type targetInfo struct {
	Name     string    `json:"name"` // source, or source/target
	Kind     string    `json:"kind"` // forward, exec, or "" for a name only the database knows
	Filter   string    `json:"filter,omitempty"`
	Controls string    `json:"controls,omitempty"`
	Paused   bool      `json:"paused"`
	PausedAt time.Time `json:"paused_at,omitzero"`
	Reason   string    `json:"reason,omitempty"`
	// Unworked counts, for a name the config does not work, the
	// unfinished deliveries that wait for it (listed with --config).
	Unworked int `json:"unworked,omitempty"`
}

func newTargetsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "targets",
		Short: "List, pause, resume and retire targets",
		Long: `A target is what works a source's events: the source's own forward or exec
(named like the source), or one of its named targets (named source/target).

A paused target's deliveries wait in the queue: workers claim none of them
until it is resumed, within a fraction of a second, in every hookbox process
on the database. Ingest goes on. Pauses are kept in the database.

A target removed from the config (or renamed) leaves the deliveries it had not
finished waiting: nothing works them. serve warns about them at start, and
targets list --config shows them; once no process runs a config that has the
target, targets retire ends them as dead.`,
		// Without Args and RunE cobra accepts any argument and prints the
		// help with exit 0, so a mistyped "targets pase x" looked like a
		// pause that worked to a script.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTargetsListCmd(g), newTargetsPauseCmd(g, true), newTargetsPauseCmd(g, false), newTargetsRetireCmd(g))
	return cmd
}

func newTargetsListCmd(g *globalFlags) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the configured targets and which are paused",
		Example: `  hookbox --config hookbox.yaml targets list
  hookbox --config hookbox.yaml targets list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			st, err := openDB(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			paused, err := st.Paused(cmd.Context())
			if err != nil {
				return err
			}
			rows := configuredTargets(cfg)
			for _, p := range paused {
				i := slices.IndexFunc(rows, func(r targetInfo) bool { return r.Name == p.Name })
				if i < 0 {
					rows = append(rows, targetInfo{Name: p.Name})
					i = len(rows) - 1
				}
				rows[i].Paused, rows[i].PausedAt, rows[i].Reason = true, p.PausedAt, p.Reason
			}
			if g.configPath != "" {
				if rows, err = addUnworked(cmd.Context(), st, rows); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				if rows == nil {
					rows = []targetInfo{}
				}
				return writeJSONOut(out, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(out, "no targets (pass --config FILE to list the configured ones)")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tFILTER\tCONTROLS\tPAUSED")
			for _, r := range rows {
				state := "no"
				if r.Paused {
					state = "since " + r.PausedAt.UTC().Format(time.RFC3339)
					if r.Reason != "" {
						state += " (" + r.Reason + ")"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, dash(r.Kind), dash(r.Filter), dash(r.Controls), state)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, r := range rows {
				if r.Unworked > 0 {
					fmt.Fprintf(out, "%s is not a target of %s, and %s of it %s: %s\n", r.Name, printable(g.configPath),
						count(r.Unworked, "unfinished delivery", "unfinished deliveries"), plural(r.Unworked, "waits", "wait"), retireHint(r.Name, r.Unworked))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print a JSON array")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// configuredTargets lists what works each source's events in cfg.
func configuredTargets(cfg *config.Config) []targetInfo {
	var rows []targetInfo
	for _, src := range cfg.Sources {
		switch {
		case src.Forward != "":
			rows = append(rows, targetInfo{Name: src.Name, Kind: "forward"})
		case len(src.Exec) > 0:
			rows = append(rows, targetInfo{Name: src.Name, Kind: "exec"})
		case src.WorkedAsItself():
			// Its events wait under its own name for a Go program's
			// handlers (config.NoTargetWarnings), as a go_handler
			// target's deliveries do under theirs.
			rows = append(rows, targetInfo{Name: src.Name, Kind: "go"})
		}
		for _, t := range src.Targets {
			r := targetInfo{Name: hookbox.QueueName(src.Name, t.Name), Kind: t.Kind()}
			var filter, ctl []string
			if len(t.Types) > 0 {
				filter = append(filter, "types "+strings.Join(t.Types, ","))
			}
			for _, k := range sortedKeys(t.Match) {
				filter = append(filter, k+"="+strings.Join(t.Match[k], "|"))
			}
			for _, k := range sortedKeys(t.Headers) {
				filter = append(filter, "header "+k+"="+strings.Join(t.Headers[k], "|"))
			}
			if t.MaxConcurrency > 0 {
				ctl = append(ctl, fmt.Sprintf("max_concurrency %d", t.MaxConcurrency))
			}
			if t.Rate > 0 {
				ctl = append(ctl, fmt.Sprintf("rate %g/s", t.Rate))
			}
			if t.OrderBy != "" {
				ctl = append(ctl, "order_by "+t.OrderBy)
			}
			if t.Sign != nil {
				ctl = append(ctl, "signed")
			}
			r.Filter, r.Controls = strings.Join(filter, " "), strings.Join(ctl, ", ")
			rows = append(rows, r)
		}
	}
	return rows
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func newTargetsPauseCmd(g *globalFlags, pause bool) *cobra.Command {
	var reason string
	use, short := "pause NAME", "Pause a target: its deliveries wait until resumed"
	if !pause {
		use, short = "resume NAME", "Resume a paused target"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

NAME is a source (its own forward or exec) or source/target. With --config,
NAME must be a configured target. Pausing a paused target keeps its first
pause and reason (resume, then pause, to change the reason); resuming one
that is not paused says so and exits 0. A NAME that neither --config nor
the database knows (no delivery of it is stored) is paused or resumed all
the same, with a warning: it is most likely a typo.`,
		Example: "  hookbox --config hookbox.yaml targets " + strings.Fields(use)[0] + " shop/billing",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !hookbox.ValidQueueName(name) {
				return usagef("%q is not a target name: write SOURCE or SOURCE/TARGET", name)
			}
			cfg, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			if known := configuredTargets(cfg); len(known) > 0 && pause &&
				!slices.ContainsFunc(known, func(r targetInfo) bool { return r.Name == name }) {
				var names []string
				for _, r := range known {
					names = append(names, r.Name)
				}
				err := fmt.Errorf("no target %s in %s; the configured ones are: %s", name, g.configPath, strings.Join(names, ", "))
				return withUnworkedHint(cmd.Context(), g, name, err)
			}
			st, err := openOps(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			out := cmd.OutOrStdout()
			if pause {
				paused, err := st.Paused(cmd.Context())
				if err != nil {
					return err
				}
				if i := slices.IndexFunc(paused, func(p hookbox.Pause) bool { return p.Name == name }); i >= 0 {
					// The store keeps a name's first pause and its reason.
					printAlreadyPaused(out, paused[i], reason, cmd.Flags().Changed("reason"))
					return nil
				}
				if err := st.PauseTarget(cmd.Context(), name, reason); err != nil {
					return err
				}
				fmt.Fprintf(out, "paused %s: its deliveries wait until `hookbox targets resume %s`\n", name, name)
				warnUnknownName(cmd, g, st, cfg, name)
				return nil
			}
			ok, err := st.ResumeTarget(cmd.Context(), name)
			if err != nil {
				return err
			}
			if !ok {
				// Resume is idempotent: a script that makes sure a target
				// runs can tell this (exit 0) from a failure (exit 1).
				fmt.Fprintf(out, "%s was not paused: nothing to resume\n", name)
				warnUnknownName(cmd, g, st, cfg, name)
				return nil
			}
			fmt.Fprintf(out, "resumed %s\n", name)
			return nil
		},
	}
	if pause {
		cmd.Flags().StringVar(&reason, "reason", "", "why, shown by targets list")
	}
	return cmd
}

// printAlreadyPaused says that p's target was already paused, and that a
// new reason (given, when set) was not recorded.
func printAlreadyPaused(w io.Writer, p hookbox.Pause, reason string, set bool) {
	since := p.PausedAt.UTC().Format(time.RFC3339)
	was := ""
	if p.Reason != "" {
		was = fmt.Sprintf(" (%s)", printable(p.Reason))
	}
	fmt.Fprintf(w, "%s was already paused, since %s%s: left as it was\n", p.Name, since, was)
	if set && reason != p.Reason {
		fmt.Fprintf(w, "the reason was not changed: a pause keeps its first reason; to record the new one, run `hookbox targets resume %s` and pause it again\n", p.Name)
	}
}

// warnUnknownName warns on stderr when neither cfg nor the database
// knows the queue name: no target of cfg works it and no event or
// delivery of it is stored. That is most likely a typo (shop/biling for
// shop/billing), which paused or resumed nothing the operator meant. It
// is a warning, not an error: a name can be paused ahead of its first
// delivery (a target about to be deployed), and a real target whose
// deliveries have all been purged looks the same.
// unknownNameLook bounds warnUnknownName's look for a stored delivery.
const unknownNameLook = 3 * time.Second

func warnUnknownName(cmd *cobra.Command, g *globalFlags, st opsStore, cfg *config.Config, name string) {
	if worksName(cfg, name) {
		return
	}
	names, err := st.UnfinishedTargets(cmd.Context())
	if err != nil || slices.Contains(names, name) {
		return
	}
	// A source with targets has its deliveries queued under its targets'
	// names: a pause of the source's name holds none of them.
	var of []string
	for _, n := range names {
		if strings.HasPrefix(n, name+"/") {
			of = append(of, n)
		}
	}
	if len(of) > 0 {
		if len(of) > 5 {
			of = append(of[:5], "…")
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: the deliveries of %s's targets (%s) are queued under the targets' own names, which this does not pause or resume: name each target (SOURCE/TARGET)\n",
			printable(name), printable(strings.Join(of, ", ")))
		return
	}
	// The look is bounded: on a large table a name no row has may take
	// PostgreSQL a while to rule out, and the warning is only a help.
	ctx, cancel := context.WithTimeout(cmd.Context(), unknownNameLook)
	defer cancel()
	evs, err := st.Events(ctx, hookbox.Filter{Source: name, Limit: 1})
	if err != nil || len(evs) > 0 {
		return
	}
	what := "the database holds no event or delivery of it"
	hint := "`hookbox targets list --config FILE` lists the configured targets"
	if g.configPath != "" {
		what = "it is not a target of " + printable(g.configPath) + " and " + what
		hint = "`hookbox targets list --config " + printable(g.configPath) + "` lists them"
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "warning: nothing has the name %s: %s; a typo? (%s)\n", name, what, hint)
}

// worksName reports whether cfg has a target that works the queue name:
// a source's own forward or exec, a named target, or what a Go program's
// handlers work (a go_handler target, a source with no forward, exec or
// targets that is not store_only: the program that runs this config
// works it).
func worksName(cfg *config.Config, name string) bool {
	return slices.ContainsFunc(configuredTargets(cfg), func(r targetInfo) bool { return r.Name == name })
}

// addUnworked adds to rows (the config's targets) each queue name with
// unfinished deliveries that no target of the config works, with their
// count.
func addUnworked(ctx context.Context, st hookbox.Store, rows []targetInfo) ([]targetInfo, error) {
	names, err := st.UnfinishedTargets(ctx)
	if err != nil {
		return rows, err
	}
	now := time.Now()
	for _, name := range names {
		i := slices.IndexFunc(rows, func(r targetInfo) bool { return r.Name == name })
		if i >= 0 && rows[i].Kind != "" {
			continue // configured
		}
		b, err := st.TargetBacklog(ctx, name, now)
		if err != nil {
			return rows, err
		}
		if b.Unfinished() == 0 {
			continue
		}
		if i < 0 {
			rows = append(rows, targetInfo{Name: name})
			i = len(rows) - 1
		}
		rows[i].Unworked = b.Unfinished()
	}
	return rows, nil
}

// retireHint says what to do about the n unfinished deliveries of a
// target no longer in the config.
func retireHint(name string, n int) string {
	return "once no process runs a config that has it, `hookbox --config FILE targets retire " + name + "` ends " +
		plural(n, "it", "them") + " as dead"
}

// withUnworkedHint adds to err, about a name the config does not have,
// how many unfinished deliveries of that name wait and how to end them,
// when there are any: a target removed from the config leaves them.
func withUnworkedHint(ctx context.Context, g *globalFlags, name string, err error) error {
	st, oerr := openDB(ctx, g)
	if oerr != nil {
		return err
	}
	defer st.Close()
	b, berr := st.TargetBacklog(ctx, name, time.Now())
	if berr != nil || b.Unfinished() == 0 {
		return err
	}
	n := b.Unfinished()
	return fmt.Errorf("%w\n%s of %s %s, and no target of the config works %s: %s", err,
		count(n, "unfinished delivery", "unfinished deliveries"), name, plural(n, "waits", "wait"), plural(n, "it", "them"), retireHint(name, n))
}

// count writes n with the word for n things.
func count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + plural(n, one, many)
}

func newTargetsRetireCmd(g *globalFlags) *cobra.Command {
	var dryRun, jsonOut, yes bool
	cmd := &cobra.Command{
		Use:   "retire NAME",
		Short: "End the unfinished deliveries of a target removed from the config, as dead",
		Long: `retire ends the deliveries of a target (or of a source worked as itself) that
no process works any more: a target removed from the config, or renamed,
leaves the deliveries it had not finished pending, and nothing claims them.
serve warns about them at start, and targets list --config shows them.

Each pending delivery of NAME, and each processing one whose lease has ended,
becomes dead, with an error saying it was retired: its event can then finish,
be purged (purge --days N --include-dead) and stop counting in
hookbox_oldest_due_seconds. Nothing is deleted: hookbox replay sends them
again if the target comes back. A delivery a worker is running now is left
alone and counted; run retire again once it ends.

Nothing retires deliveries on its own: during a rolling deploy, a process of
the older config still works them. Retire once every process runs the new
config. With --config, a NAME the config still has is refused. Without it,
nothing can check that: retire then says what it would end and exits 2,
unless --yes says you know that no running config has NAME. --dry-run
counts what would be ended and changes nothing. A NAME with no unfinished
delivery is refused (exit 1): there is nothing to retire, or it is a typo.`,
		Example: `  hookbox --config hookbox.yaml targets list
  hookbox --config hookbox.yaml targets retire shop/billing --dry-run
  hookbox --config hookbox.yaml targets retire shop/billing
  hookbox targets retire shop/billing --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := server.CheckFilterText("NAME", name); err != nil || name == "" {
				return usagef("%q is not a target name: write SOURCE or SOURCE/TARGET", name)
			}
			cfg, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			if g.configPath != "" && worksName(cfg, name) {
				return fmt.Errorf("%s is a target of %s: its deliveries are worked; remove it from the config, and retire it once every process runs the new config (or pause it: hookbox targets pause %s)",
					name, printable(g.configPath), name)
			}
			st, err := openOps(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			out := cmd.OutOrStdout()
			if g.configPath == "" && !dryRun && !yes {
				// Nothing here can tell whether a running process works
				// NAME: a paused target's deliveries have no lease, so
				// none would even count as in flight.
				res, err := st.RetireTarget(cmd.Context(), hookbox.RetireParams{Name: name, Reason: hookbox.RetireReason(name), DryRun: true})
				if err != nil {
					return err
				}
				if res.Ended == 0 && res.InFlight == 0 {
					return nothingToRetire(cmd.Context(), st, name)
				}
				if jsonOut {
					if err := writeJSONOut(out, server.RetireReply{Name: name, RetireResult: res, DryRun: true}); err != nil {
						return err
					}
				} else {
					printRetire(out, name, res, true)
				}
				return usagef("without --config, hookbox cannot tell whether a running process still works %s, and retire ends its deliveries as dead all the same: "+
					"pass --config with the config every process runs, to have that checked; or, once you know none has %s, run again with --yes", name, name)
			}
			p := hookbox.RetireParams{Name: name, Reason: hookbox.RetireReason(name), DryRun: dryRun}
			var bar *progress
			if !dryRun {
				bar = startProgress(cmd.ErrOrStderr(), "retiring")
				p.Progress = func(n int) { bar.update("retiring: %d ended", n) }
			}
			res, err := st.RetireTarget(cmd.Context(), p)
			bar.end()
			show := func() error {
				if jsonOut {
					return writeJSONOut(out, server.RetireReply{Name: name, RetireResult: res, DryRun: dryRun})
				}
				printRetire(out, name, res, dryRun)
				return nil
			}
			if err != nil && dryRun {
				return err // a dry run ends nothing
			}
			if err != nil {
				// The slices before the failure have committed.
				stop := server.StopRetire(res, stopWhy(err))
				reply := server.RetireReply{Name: name, RetireResult: res, RetireStop: stop}
				return stoppedRun(out, err, res.Ended > 0, jsonOut, reply, show, stop.Rerun)
			}
			if res.Ended == 0 && res.InFlight == 0 {
				if jsonOut {
					if err := show(); err != nil {
						return err
					}
				}
				return nothingToRetire(cmd.Context(), st, name)
			}
			return show()
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "without --config: retire although nothing can check that no running process works NAME")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be ended; change nothing")
	cmd.Flags().BoolVar(&jsonOut, "json", false, `print {"name", "ended", "in_flight", "dry_run"}; a retire that failed adds "error", "stopped", "ended_count" and "rerun"`)
	return cmd
}

// nothingToRetire is retire's error for a name with no unfinished
// delivery; it says whether any delivery of the name is stored at all.
func nothingToRetire(ctx context.Context, st hookbox.Store, name string) error {
	ctx, cancel := context.WithTimeout(ctx, unknownNameLook)
	defer cancel()
	if evs, err := st.Events(ctx, hookbox.Filter{Source: name, Limit: 1}); err == nil && len(evs) == 0 {
		return fmt.Errorf("nothing to retire: the database holds no delivery of %s; a typo? (`hookbox targets list --config FILE` lists the names with unfinished deliveries)", name)
	}
	return fmt.Errorf("nothing to retire: no unfinished deliveries of %s", name)
}

// printRetire writes what a retire of name did (or, dry, would do).
func printRetire(w io.Writer, name string, res hookbox.RetireResult, dryRun bool) {
	switch {
	case res.Ended == 0 && res.InFlight == 0:
		fmt.Fprintf(w, "nothing to retire: no unfinished deliveries of %s\n", name)
		return
	case dryRun:
		fmt.Fprintf(w, "would end %s of %s as dead\n", count(res.Ended, "delivery", "deliveries"), name)
	default:
		them := plural(res.Ended, "it", "them")
		fmt.Fprintf(w, "ended %s of %s as dead; `hookbox replay --status dead --source %s` sends %s again if %s comes back, "+
			"`hookbox purge --days N --include-dead` deletes %s\n", count(res.Ended, "delivery", "deliveries"), name, name, them, name, them)
	}
	if res.InFlight > 0 {
		fmt.Fprintf(w, "left %s a worker is running now (a process that still has %s); run retire again once %s\n",
			count(res.InFlight, "delivery", "deliveries"), name, plural(res.InFlight, "it ends", "they end"))
	}
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing was changed")
	}
}
