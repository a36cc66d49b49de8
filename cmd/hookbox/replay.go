package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/server"
)

func newReplayCmd(g *globalFlags) *cobra.Command {
	var (
		f           filterFlags
		includeDone bool
		dryRun      bool
		jsonOut     bool
		ifAttempts  int
		afterID     int64
		rate        int
		paceAfter   int
	)
	cmd := &cobra.Command{
		Use:   "replay [ID…]",
		Short: "Put events back in the queue: named ones, or every one a filter selects",
		Long: `replay sends events back to pending, due now (a large one at a pace, below),
with a fresh attempt budget; a running hookbox serve works them again. The row stays the same row, so the
dedupe memory is kept.

A large replay is paced, so that deliveries arriving while it drains are not
held behind all of it (workers take events in the order they fall due): the
first --rate events (100 by default, in id order) are due now, and the rest
--rate a second after them. A replay of up to --rate events is due at once.
Set --rate about what the target works per second: above it, new deliveries
wait behind what the target has not caught up with; below it, the replay
takes longer than it must. --rate 0 makes every event due now, however many:
new deliveries then wait until the whole replay has been worked.

Name events by id, or select them with filters (--status, --source, --type, --key,
--since, --until); at least one is required for a bulk replay. Dead and
pending events are replayed; done events only with --include-done (their work
runs again, so make sure it is safe to repeat). Events being worked right now
are never touched. --dry-run shows what would be replayed and changes nothing.

An event that fans out to several targets is replayed as its deliveries;
each one left alone (being worked right now, or done without
--include-done) is listed as skipped, by its own id, with its target.

--if-attempts N (one id) replays the event only while its attempts are still
N, as "events show" printed them (for an event with several targets, the sum
over its deliveries): a replay repeated after the first one ran, or after
someone else's, is then skipped as changed since you looked, and the command
exits 1.

A replay works in batches, each committed on its own. If one fails (the
database goes away, Ctrl-C), the batches before it stay replayed: the
command lists them, says that the rest were not replayed and where it
stopped, and exits 1. --after-id N (the id it printed) goes on from there;
with --json the same is in "stopped", "replayed_count", "resume_after_id"
and "rerun".`,
		Example: `  hookbox replay 42 43
  hookbox replay --status dead --source polar --since 24h --dry-run
  hookbox replay --status dead --source polar --since 24h
  hookbox replay --status dead --source polar --since 24h --rate 500
  hookbox replay 17 --include-done --json
  hookbox replay 17 --include-done --if-attempts 1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			p := hookbox.ReplayParams{IncludeDone: includeDone, DryRun: dryRun, AfterID: afterID}
			if afterID < 0 {
				return usagef("--after-id: want a positive id (a stopped replay's resume_after_id)")
			}
			if rate < 0 {
				return usagef("--rate: want events per second, a whole number from 0 (0: all due now), not %d", rate)
			}
			if paceAfter < 0 || paceAfter > hookbox.MaxPaceAfter {
				return usagef("--pace-after: want a count from 0 (a stopped replay's resume_pace_after), not %d", paceAfter)
			}
			p.Rate, p.PaceAfter = rate, paceAfter
			if rate == 0 {
				p.Rate = hookbox.ReplayAtOnce
			}
			switch {
			case len(args) > 0 && !f.empty():
				return usagef("name event ids or give filters, not both")
			case len(args) > 0:
				for _, a := range args {
					id, err := strconv.ParseInt(a, 10, 64)
					if err != nil || id <= 0 {
						return usagef("event id %q: want a positive whole number", a)
					}
					p.IDs = append(p.IDs, id)
				}
			case f.empty():
				return usagef("name event ids, or select events with --status, --source, --type, --key, --since or --until")
			default:
				if cmd.Flags().Changed("if-attempts") {
					return usagef("--if-attempts applies to one event named by id, not to a filter")
				}
				var err error
				if p.Filter, err = f.filter(time.Now()); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("if-attempts") {
				if len(p.IDs) != 1 || ifAttempts < 0 {
					return usagef("--if-attempts takes a whole number from 0 and one event id")
				}
				p.Expect = map[int64]int{p.IDs[0]: ifAttempts}
			}
			st, err := openOps(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			var bar *progress
			if !dryRun {
				bar = startProgress(cmd.ErrOrStderr(), "replaying")
				p.Progress = func(n int) { bar.update("replaying: %d replayed", n) }
			}
			res, err := st.Replay(cmd.Context(), p)
			bar.end()
			if res.Replayed == nil {
				res.Replayed = []int64{}
			}
			out := cmd.OutOrStdout()
			// Why each skipped event was left alone, read once by show for
			// its lines and then for the exit status.
			var skips map[int64]server.ReplaySkip
			show := func() error {
				skips = readSkips(cmd.Context(), st, p, res.Skipped)
				if jsonOut {
					return writeJSONOut(out, server.NewReplayReply(res, dryRun, func(id int64) string {
						return skipReason(skips[id])
					}))
				}
				if err := printReplay(out, res, dryRun, skips, p); err != nil {
					return err
				}
				if len(res.Replayed) == 0 && p.Filter.Status == hookbox.StatusDone && !includeDone {
					// Without it a done event is never a match: say so.
					fmt.Fprintln(out, "(done events are replayed only with --include-done: their work runs again)")
				}
				return nil
			}
			if err != nil && !dryRun {
				// The batches before the failure have committed.
				return stoppedReplay(out, p, res, err, jsonOut, show)
			}
			if err != nil {
				return err // a dry run changes nothing
			}
			if err := show(); err != nil || len(p.IDs) == 0 {
				return err
			}
			var errs []error
			if ids := skippedFor(res, skips, server.SkipMissing); len(ids) > 0 {
				errs = append(errs, fmt.Errorf("no such %s: %s", plural(len(ids), "event", "events"), idList(ids, 50)))
			}
			if ids := withoutPayload(res, skips); len(ids) > 0 {
				errs = append(errs, fmt.Errorf("not replayed: %s: the payload was cleared by payload retention", idList(ids, 50)))
			}
			if ids := skippedFor(res, skips, server.SkipChanged); len(ids) > 0 {
				errs = append(errs, fmt.Errorf("not replayed: %s: changed since you looked (--if-attempts)", idList(ids, 50)))
			}
			return errors.Join(errs...)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&includeDone, "include-done", false, "replay done events too (their work runs again)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show what would be replayed; change nothing")
	cmd.Flags().IntVar(&rate, "rate", hookbox.DefaultReplayRate, "events made due per second after the first second's worth, so new deliveries are not held behind a large replay (0: all due now)")
	cmd.Flags().Int64Var(&afterID, "after-id", 0, "replay only events with larger ids: go on where a replay that stopped part-way stopped (it prints the id)")
	cmd.Flags().IntVar(&paceAfter, "pace-after", 0, "pace the events after this many of a replay that stopped part-way (it prints the count with --after-id), so none is due before those it paced")
	cmd.Flags().IntVar(&ifAttempts, "if-attempts", 0, "replay the one event named only while its attempts are still N, as you saw them (else it is skipped, exit 1)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, `print {"replayed": [...], "skipped": [...], "skipped_reasons": {"ID": "why", ...}, "dry_run": bool}, and "no_payload": [...] when an event's payload was cleared; a replay that failed adds "error", "stopped", "replayed_count", "resume_after_id" and "rerun"`)
	return cmd
}

// stoppedReplay reports the replay p that failed with err after doing res
// (its committed batches) and returns err: in text, what show prints for
// a finished run, then that it stopped part-way and how to go on; with
// jsonOut, the reply of a finished run with what server.StopReplay adds.
func stoppedReplay(w io.Writer, p hookbox.ReplayParams, res hookbox.ReplayResult, err error, jsonOut bool, show func() error) error {
	stop := server.StopReplay(p, res, stopWhy(err), "--after-id %d", " --pace-after %d")
	if jsonOut {
		// Which of the named events were left alone is not read again:
		// the database has just failed.
		reply := server.NewReplayReply(res, false, nil)
		reply.ReplayStop = stop
		return errors.Join(err, writeJSONOut(w, reply))
	}
	if len(res.Replayed) == 0 {
		return err
	}
	if serr := show(); serr != nil {
		return errors.Join(err, serr)
	}
	if stop.ResumeAfterID != nil {
		fmt.Fprintln(w, partialNote)
	}
	fmt.Fprintln(w, stop.Rerun)
	return err
}

// printReplay writes what the replay p did, res, at its pace (Rate,
// PaceAfter), with why it left each of res.Skipped alone (skips, see
// readSkips).
func printReplay(w io.Writer, res hookbox.ReplayResult, dryRun bool, skips map[int64]server.ReplaySkip, p hookbox.ReplayParams) error {
	verb := "replayed"
	if dryRun {
		verb = "would replay"
	}
	switch n := len(res.Replayed); n {
	case 0:
		fmt.Fprintln(w, "nothing to replay")
	case 1:
		fmt.Fprintf(w, "%s 1 event: %d\n", verb, res.Replayed[0])
	default:
		fmt.Fprintf(w, "%s %d events: %s\n", verb, n, idList(res.Replayed, 50))
	}
	switch last := p.ReplayWait(p.PaceAfter + len(res.Replayed) - 1); {
	case last > 0 && p.PaceAfter > 0:
		fmt.Fprintf(w, "paced after the %d events of the replay it goes on from, %d a second (the last in %v)\n",
			p.PaceAfter, p.Rate, roundWait(last))
	case last > 0:
		fmt.Fprintf(w, "paced: the first %d due now, the rest %d a second after them (the last in %v; --rate changes it)\n",
			p.Rate, p.Rate, roundWait(last))
	}
	if n := len(res.NoPayload); n > 0 {
		fmt.Fprintf(w, "not replayed, %d %s whose payload was cleared by payload retention (a replay would send an empty body): %s\n",
			n, plural(n, "event", "events"), idList(res.NoPayload, 50))
	}
	for _, id := range res.Skipped {
		fmt.Fprintf(w, "skipped %d: %s\n", id, printable(skipReason(skips[id])))
	}
	if dryRun && len(res.Replayed) > 0 {
		fmt.Fprintln(w, "dry run: nothing was changed")
	}
	return nil
}

// roundWait rounds a wait for a person to read: to the second from ten
// seconds, else to the millisecond.
func roundWait(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// withoutPayload lists the named events of res that can never be replayed
// because their payload was cleared: those the store reported, and those
// it skipped for another reason first (done, without --include-done).
func withoutPayload(res hookbox.ReplayResult, skips map[int64]server.ReplaySkip) []int64 {
	ids := append(slices.Clone(res.NoPayload), skippedFor(res, skips, server.SkipNoPayload)...)
	slices.Sort(ids)
	return ids
}

// readSkips reads each of skipped, the events the replay p left alone,
// once, and finds why (server.ReplaySkipOf): the lines, the JSON reasons
// and the exit status all come from this one read.
func readSkips(ctx context.Context, st hookbox.Store, p hookbox.ReplayParams, skipped []int64) map[int64]server.ReplaySkip {
	skips := make(map[int64]server.ReplaySkip, len(skipped))
	for _, id := range skipped {
		if _, ok := skips[id]; !ok {
			skips[id] = server.ReplaySkipOf(ctx, st, p, id)
		}
	}
	return skips
}

// skippedFor lists the events of res.Skipped that the replay left alone
// for cause (skips, see readSkips), for the command to fail on: missing
// ones, so that naming a wrong id does not pass as "nothing to replay",
// those whose payload was cleared, or those that changed since the
// operator looked (--if-attempts).
func skippedFor(res hookbox.ReplayResult, skips map[int64]server.ReplaySkip, cause server.SkipCause) []int64 {
	var ids []int64
	for _, id := range res.Skipped {
		if skips[id].Cause == cause {
			ids = append(ids, id)
		}
	}
	return ids
}

// skipReason says, in the CLI's words, why a replay left an event it
// skipped alone (sk, from server.ReplaySkipOf): a named one, or a
// delivery of a named FanOut event (said with its event and target).
func skipReason(sk server.ReplaySkip) string {
	of := ""
	if e := sk.Event; e.Parent != 0 {
		of = fmt.Sprintf("delivery of event %d to target %s: ", e.Parent, e.Target)
	}
	switch sk.Cause {
	case server.SkipMissing:
		return "no such event"
	case server.SkipUnreadable:
		return "could not read it: " + sk.Detail
	case server.SkipNoPayload:
		return of + "its payload was cleared by payload retention; a replay would send an empty body"
	case server.SkipInFlight:
		return of + "it is being worked right now"
	case server.SkipChanged:
		return of + "it " + sk.Detail
	case server.SkipDone:
		return of + "it is done; pass --include-done to run it again"
	}
	return of + "it is " + string(sk.Event.Status)
}

// idList joins ids, eliding after max.
func idList(ids []int64, max int) string {
	var b strings.Builder
	for i, id := range ids {
		if i == max {
			fmt.Fprintf(&b, ", … (%d more)", len(ids)-max)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String()
}

// plural picks the word for n things.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
