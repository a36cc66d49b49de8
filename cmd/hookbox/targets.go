package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
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
}

func newTargetsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "targets",
		Short: "List, pause and resume targets",
		Long: `A target is what works a source's events: the source's own forward or exec
(named like the source), or one of its named targets (named source/target).

A paused target's deliveries wait in the queue: workers claim none of them
until it is resumed, within a fraction of a second, in every hookbox process
on the database. Ingest goes on. Pauses are kept in the database.`,
		// Without Args and RunE cobra accepts any argument and prints the
		// help with exit 0, so a mistyped "targets pase x" looked like a
		// pause that worked to a script.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTargetsListCmd(g), newTargetsPauseCmd(g, true), newTargetsPauseCmd(g, false))
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
			return tw.Flush()
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
NAME must be a configured target.`,
		Example: "  hookbox --config hookbox.yaml targets " + strings.Fields(use)[0] + " shop/billing",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !hookbox.ValidQueueName(name) {
				return fmt.Errorf("%q is not a target name: write SOURCE or SOURCE/TARGET", name)
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
				return fmt.Errorf("no target %s in %s; the configured ones are: %s", name, g.configPath, strings.Join(names, ", "))
			}
			st, err := openOps(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			out := cmd.OutOrStdout()
			if pause {
				if err := st.PauseTarget(cmd.Context(), name, reason); err != nil {
					return err
				}
				fmt.Fprintf(out, "paused %s: its deliveries wait until `hookbox targets resume %s`\n", name, name)
				return nil
			}
			ok, err := st.ResumeTarget(cmd.Context(), name)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s was not paused", name)
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
