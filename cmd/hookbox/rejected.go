package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/service"
)

func newRejectedCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rejected",
		Short: "List, inspect and re-check refused deliveries",
		Long: `rejected works on the log of refused deliveries: every 400, 401, 404, 408,
413 and 415 the receiver answered, with the source (or the unknown name asked
for), the time, the client's address, the reason, the headers (signature and
credential values masked) and the first bytes of the body. The log is bounded (see the
config's rejected section).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRejectedListCmd(g), newRejectedShowCmd(g), newRejectedRecheckCmd(g))
	return cmd
}

func newRejectedListCmd(g *globalFlags) *cobra.Command {
	var (
		source, since string
		status, limit int
		beforeID      int64
		jsonOut       bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List refused deliveries, newest first",
		Example: `  hookbox rejected list
  hookbox rejected list --source polar --status 401 --since 24h --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPage(cmd, limit, beforeID); err != nil {
				return err
			}
			if status != 0 && (status < 100 || status > 599) {
				return usagef("--status: want an HTTP status such as 401")
			}
			f := hookbox.RejectionFilter{Source: source, Status: status, Limit: limit, BeforeID: beforeID}
			var err error
			if f.Since, err = server.ParseTime(since, time.Now()); err != nil {
				return usagef("--since: %w", err)
			}
			show, st, err := openShowing(cmd, g)
			if err != nil {
				return err
			}
			defer st.Close()
			rs, err := st.Rejections(cmd.Context(), f)
			if err != nil {
				return err
			}
			views := make([]server.RejectionView, 0, len(rs))
			for _, rj := range rs {
				views = append(views, server.ViewRejection(rj, show, false))
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				return writeJSONOut(out, views)
			}
			if len(views) == 0 {
				fmt.Fprintln(out, "no rejected deliveries match")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRECEIVED\tSOURCE\tSTATUS\tFROM\tBYTES\tREASON")
			for _, v := range views {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", v.ID, v.ReceivedAt.UTC().Format(time.RFC3339), rejectedSource(v.Rejection),
					v.Status, printable(v.RemoteAddr), bodySize(v.Rejection), oneLine(v.Reason))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(views) == limit {
				fmt.Fprintf(out, "(first %d; more with --before-id %d or a larger --limit)\n", limit, views[len(views)-1].ID)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&source, "source", "", "only deliveries to this source (or unknown name)")
	fl.IntVar(&status, "status", 0, "only deliveries answered with this status (400, 401, 404, 408, 413, 415)")
	fl.StringVar(&since, "since", "", "only deliveries received at or after this: a duration back from now (24h, 7d) or a time (RFC 3339)")
	fl.IntVar(&limit, "limit", hookbox.DefaultListLimit, "the most deliveries to list")
	fl.Int64Var(&beforeID, "before-id", 0, "only deliveries with a lower id (the next page)")
	fl.BoolVar(&jsonOut, "json", false, "print a JSON array")
	return cmd
}

func newRejectedShowCmd(g *globalFlags) *cobra.Command {
	var jsonOut, body bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one refused delivery with its headers and kept body",
		Long: `show prints one refused delivery: why, from where, its headers (signature and
credential values masked) and how much of its body was kept. --body prints
only the kept body, byte for byte; --json prints it all, the body in base64.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usagef("rejected delivery id %q: want a positive whole number", args[0])
			}
			if jsonOut && body {
				return usagef("--body and --json are exclusive")
			}
			show, st, err := openShowing(cmd, g)
			if err != nil {
				return err
			}
			defer st.Close()
			rj, err := st.Rejection(cmd.Context(), id)
			if errors.Is(err, hookbox.ErrNotFound) {
				return fmt.Errorf("no rejected delivery %d (the log keeps a bounded number)", id)
			}
			if err != nil {
				return err
			}
			v := server.ViewRejection(rj, show, true)
			out := cmd.OutOrStdout()
			switch {
			case body:
				return writeBody(out, v.Body)
			case jsonOut:
				return writeJSONOut(out, v)
			}
			return printRejection(out, v)
		},
	}
	cmd.Flags().BoolVar(&body, "body", false, "print only the kept body, exactly as received (escaped on a terminal: pipe it for the bytes)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the delivery as JSON (body in base64)")
	return cmd
}

// openShowing opens the database as openDB does and returns how to show
// stored headers under the --config given (signature and credential values
// and its secrets masked).
func openShowing(cmd *cobra.Command, g *globalFlags) (func(http.Header) http.Header, hookbox.Store, error) {
	cfg, err := g.loadConfig(false)
	if err != nil {
		return nil, nil, err
	}
	st, err := openDB(cmd.Context(), g)
	if err != nil {
		return nil, nil, err
	}
	return service.HeaderShower(cfg), st, nil
}

func printRejection(w io.Writer, v server.RejectionView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%d\n", v.ID)
	fmt.Fprintf(tw, "source\t%s\n", rejectedSource(v.Rejection))
	fmt.Fprintf(tw, "received\t%s\n", v.ReceivedAt.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "from\t%s\n", orDash(printable(v.RemoteAddr)))
	fmt.Fprintf(tw, "status\t%d\n", v.Status)
	fmt.Fprintf(tw, "reason\t%s\n", oneLine(v.Reason))
	fmt.Fprintf(tw, "body\t%s\n", bodySize(v.Rejection))
	if v.AdmittedEventID != 0 {
		fmt.Fprintf(tw, "admitted\tas event %d by a re-check\n", v.AdmittedEventID)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printHeaders(w, v.Header)
	if v.Body != nil {
		fmt.Fprintf(w, "\nbody (hookbox rejected show %d --body prints it as received)\n  %s\n", v.ID, oneLine(string(v.Body)))
	}
	return nil
}

// rejectedSource names the source of a rejection as printed.
func rejectedSource(rj hookbox.Rejection) string {
	if rj.UnknownSource {
		return printable(rj.Source) + " (unknown)"
	}
	return printable(rj.Source)
}

// bodySize says how large the body was and how much of it is kept.
func bodySize(rj hookbox.Rejection) string {
	switch {
	case rj.BodySize < 0:
		return "unknown size, not read"
	case rj.BodyComplete:
		return fmt.Sprintf("%d bytes, kept whole", rj.BodySize)
	case rj.Body != nil:
		return fmt.Sprintf("%d bytes, first %d kept", rj.BodySize, len(rj.Body))
	}
	return fmt.Sprintf("%d bytes, not kept", rj.BodySize)
}

func newRejectedRecheckCmd(g *globalFlags) *cobra.Command {
	var (
		ids     []int64
		dry     bool
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "recheck",
		Short: "Verify refused deliveries again against the current config and store those that pass",
		Long: `recheck verifies the kept refused deliveries (all, or those named by --id)
again against the sources of --config, judging signed timestamps against the
time each was received, and stores those that now pass as ordinary events,
deduplicated as usual. Use it after fixing a source's secret. Only deliveries
whose whole body was kept can pass. A running hookbox serve on SQLite picks
the new events up at its next poll; POST /admin/rejected/recheck wakes it at
once.

A re-check stores what passes 100 deliveries at a time, each page committed
on its own. If one fails, the pages before it stay stored: the command lists
what it admitted, says that it stopped part-way, and exits 1; with --json the
same is in "stopped", "admitted_count", "error" and "rerun". Running it again
is safe: what it admitted is not stored twice.`,
		Example: `  hookbox rejected recheck --config hookbox.yaml --dry-run
  hookbox rejected recheck --config hookbox.yaml --id 12 --id 13`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.loadConfig(true)
			if err != nil {
				return err
			}
			sources, err := service.RecheckSources(cfg)
			if err != nil {
				return err
			}
			st, err := openDB(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := rejected.Recheck(cmd.Context(), st, sources, rejected.RecheckParams{IDs: ids, DryRun: dry})
			out := cmd.OutOrStdout()
			show := func() error {
				if jsonOut {
					return writeJSONOut(out, res)
				}
				printRecheck(out, res, dry)
				return nil
			}
			if err != nil && dry {
				return err // a dry run stores nothing
			}
			if err != nil {
				// The pages before the failure were stored.
				stop := server.StopRecheck(res, stopWhy(err))
				return stoppedRun(out, err, len(res.Admitted) > 0, jsonOut, server.RecheckReply{RecheckResult: res, RecheckStop: stop}, show, stop.Rerun)
			}
			if err := show(); err != nil {
				return err
			}
			// A named id that is not in the log fails the command, as
			// rejected show of it does, after the others are reported.
			var missing []int64
			for _, r := range res.Refused {
				if r.Reason == rejected.ReasonNotFound {
					missing = append(missing, r.RejectionID)
				}
			}
			if len(missing) > 0 {
				return fmt.Errorf("no rejected %s %s (the log keeps a bounded number)", plural(len(missing), "delivery", "deliveries"), idList(missing, 50))
			}
			return nil
		},
	}
	cmd.Flags().Int64SliceVar(&ids, "id", nil, "re-check only this rejected delivery (repeatable)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "say what would pass, store nothing")
	cmd.Flags().BoolVar(&jsonOut, "json", false, `print the result as JSON; a re-check that failed adds "error", "stopped", "admitted_count" and "rerun"`)
	return cmd
}

// printRecheck writes what a re-check did (or, dry, would do).
func printRecheck(w io.Writer, res rejected.RecheckResult, dry bool) {
	verb := "admitted"
	if dry {
		verb = "would admit"
	}
	for _, a := range res.Admitted {
		switch {
		case dry:
			fmt.Fprintf(w, "%d: passes now\n", a.RejectionID)
		case a.Duplicate:
			fmt.Fprintf(w, "%d: passes; already stored as event %d\n", a.RejectionID, a.EventID)
		default:
			fmt.Fprintf(w, "%d: passes; stored as event %d\n", a.RejectionID, a.EventID)
		}
	}
	for _, r := range res.Refused {
		fmt.Fprintf(w, "%d: %s\n", r.RejectionID, oneLine(r.Reason))
	}
	fmt.Fprintf(w, "%s %d, refused %d\n", verb, len(res.Admitted), len(res.Refused))
}
