package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/server"
)

func newPurgeCmd(g *globalFlags) *cobra.Command {
	var (
		days        int
		dryRun      bool
		includeDead bool
		jsonOut     bool
	)
	cmd := &cobra.Command{
		Use:   "purge --days N",
		Short: "Delete finished events older than N days",
		Long: `purge deletes done events whose last change is more than --days days old,
in small batches, and stored ones (of store_only sources, or that no named
target wanted: nothing works them, so they are finished on arrival) received
that long ago. Pending and processing events are never deleted; dead events
are kept unless --include-dead (their work never succeeded).

What it costs: a purged event's id is forgotten, so a redelivery of a purged
id would be stored and processed again. Keep --days longer than any sender
retries or redelivers (days, for most providers).

serve runs the same purge every hour when retention_days (or RETENTION_DAYS)
is set. --dry-run counts what would be deleted and deletes nothing.

A purge works in batches, each committed on its own. If one fails (the
database goes away, Ctrl-C), the batches before it stay deleted: the command
prints how many, that the rest were not deleted, and exits 1; with --json the
same is in "stopped", "deleted_count", "error" and "rerun". Running the same
purge again is safe: it deletes only what is still finished and old.`,
		Example: `  hookbox purge --days 30 --dry-run
  hookbox purge --days 30
  hookbox purge --days 90 --include-dead --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("days") {
				return usagef("--days is required: finished events older than this many days are deleted")
			}
			before, err := hookbox.DaysAgo(time.Now(), days)
			if err != nil {
				return usagef("--days: %w", err)
			}
			st, err := openOps(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			pp := hookbox.PurgeParams{Before: before, IncludeDead: includeDead, DryRun: dryRun}
			var bar *progress
			if !dryRun {
				bar = startProgress(cmd.ErrOrStderr(), "purging")
				pp.Progress = func(r hookbox.PurgeResult) { bar.update("purging: %d deleted", r.Total()) }
			}
			res, err := st.Purge(cmd.Context(), pp)
			bar.end()
			out := cmd.OutOrStdout()
			show := func(kept int) error {
				if jsonOut {
					return writeJSONOut(out, server.PurgeReply{PurgeResult: res, Before: before.UTC(), DryRun: dryRun,
						IncludeDead: includeDead, Note: server.PurgeNote})
				}
				printPurge(out, res, before, includeDead, dryRun, kept)
				return nil
			}
			if err != nil && dryRun {
				return err // a dry run deletes nothing
			}
			if err != nil {
				// The batches before the failure have committed.
				stop := server.StopPurge(res, stopWhy(err))
				reply := server.PurgeReply{PurgeResult: res, Before: before.UTC(), IncludeDead: includeDead, Note: server.PurgeNote, PurgeStop: stop}
				return stoppedRun(out, err, res.Total() > 0, jsonOut, reply, func() error { return show(0) }, stop.Rerun)
			}
			kept := 0
			if !includeDead && !jsonOut {
				k, err := st.Purge(cmd.Context(), hookbox.PurgeParams{Before: before, IncludeDead: true, DryRun: true})
				if err == nil {
					kept = k.Dead
				}
			}
			return show(kept)
		},
	}
	cmd.Flags().IntVar(&days, "days", 0, "delete finished events whose last change is older than this many days (required)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be deleted; delete nothing")
	cmd.Flags().BoolVar(&includeDead, "include-dead", false, "delete old dead events too")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the counts as JSON; a purge that failed adds \"error\", \"stopped\", \"deleted_count\" and \"rerun\"")
	return cmd
}

// printPurge writes what a purge of the events last changed before before
// did (or, dry, would do); kept counts the old dead events it left, which
// --include-dead would delete too.
func printPurge(w io.Writer, res hookbox.PurgeResult, before time.Time, includeDead, dryRun bool, kept int) {
	verb := "deleted"
	if dryRun {
		verb = "would delete"
	}
	// Stored events are named apart: counted as done, a purge of one done
	// event and one stored event said "deleted 2 done events".
	counts := []string{fmt.Sprintf("%d done events", res.Done)}
	if res.Stored > 0 {
		counts = append(counts, fmt.Sprintf("%d stored events", res.Stored))
	}
	if includeDead {
		counts = append(counts, fmt.Sprintf("%d dead events", res.Dead))
	}
	list := counts[0]
	if n := len(counts); n > 1 {
		list = strings.Join(counts[:n-1], ", ") + " and " + counts[n-1]
	}
	fmt.Fprintf(w, "%s %s last changed before %s\n", verb, list, before.UTC().Format(time.RFC3339))
	if kept > 0 {
		fmt.Fprintf(w, "kept %d dead events as old (--include-dead deletes them too)\n", kept)
	}
	fmt.Fprintln(w, "pending and processing events are never purged")
	if res.Total() > 0 {
		fmt.Fprintf(w, "note: %s\n", server.PurgeNote)
	}
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing was deleted")
	}
}
