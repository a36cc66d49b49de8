package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	esc "github.com/hookbox/hookbox/internal/printable"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/service"
)

// openDB opens the store the global flags name (--db, HOOKBOX_DB, the
// config's db, the default), for commands that read or change events. It
// opens an existing hookbox database only: a mistyped path or a database
// hookbox never migrated is an error saying to run hookbox migrate, not a
// new empty database that matches no events. A value hookbox cannot open
// is refused as serve refuses it (checkDBURL); on PostgreSQL, each
// statement is bounded by --db-timeout (cliStoreOptions).
func openDB(ctx context.Context, g *globalFlags) (hookbox.Store, error) {
	dbURL, err := checkDBURL(g)
	if err != nil {
		return nil, err
	}
	opts, err := cliStoreOptions(g)
	if err != nil {
		return nil, err
	}
	return service.OpenStore(ctx, dbURL, opts)
}

// checkDBURL returns the database URL the global flags name (or the
// config's db, loaded for it), or config.CheckDB's reason why hookbox
// cannot open it, as serve gives it: never the value, which may hold a
// password.
func checkDBURL(g *globalFlags) (string, error) {
	cfg, err := g.loadConfig(false)
	if err != nil {
		return "", err
	}
	dbURL := g.dbURL(cfg)
	if err := config.CheckDB(dbURL); err != nil {
		return "", fmt.Errorf("database (--db, HOOKBOX_DB or db:): %w", err)
	}
	return dbURL, nil
}

// opsStore is a store with its operator side (replay, purge).
type opsStore interface {
	hookbox.Store
	hookbox.Ops
}

// openOps opens the store as openDB does, or returns an error naming a
// store without an operator side.
func openOps(ctx context.Context, g *globalFlags) (opsStore, error) {
	st, err := openDB(ctx, g)
	if err != nil {
		return nil, err
	}
	ops, ok := st.(opsStore)
	if !ok {
		st.Close()
		return nil, fmt.Errorf("this database's store (%T) does not support replay and purge", st)
	}
	return ops, nil
}

// filterFlags are the event filters shared by events list and replay.
type filterFlags struct {
	source, status, eventType, key, since, until string
}

func (f *filterFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.source, "source", "", "only events of this source")
	fl.StringVar(&f.status, "status", "", "only events in this status: pending, processing, done, dead or stored (nothing works them)")
	fl.StringVar(&f.eventType, "type", "", "only events of this event type")
	fl.StringVar(&f.key, "key", "", "only deliveries with this order key (of a target with order_by)")
	fl.StringVar(&f.since, "since", "", "only events received at or after this: a duration back from now (24h, 7d) or a time (RFC 3339)")
	fl.StringVar(&f.until, "until", "", "only events received before this: a duration back from now or a time")
}

func (f *filterFlags) empty() bool {
	return f.source == "" && f.status == "" && f.eventType == "" && f.key == "" && f.since == "" && f.until == ""
}

func (f *filterFlags) filter(now time.Time) (hookbox.Filter, error) {
	out := hookbox.Filter{Source: f.source, EventType: f.eventType, Status: hookbox.Status(f.status), OrderKey: f.key}
	if err := errors.Join(server.CheckFilterText("--source", f.source), server.CheckFilterText("--type", f.eventType),
		server.CheckFilterText("--key", f.key)); err != nil {
		return out, asUsage(err)
	}
	if out.Status != "" && !out.Status.Valid() {
		return out, usagef("--status: want pending, processing, done, dead or stored, not %q", f.status)
	}
	var err error
	if out.Since, err = server.ParseTime(f.since, now); err != nil {
		return out, usagef("--since: %w", err)
	}
	if out.Until, err = server.ParseTime(f.until, now); err != nil {
		return out, usagef("--until: %w", err)
	}
	return out, nil
}

// checkPage refuses a listing's paging flags out of range: --limit
// outside 1 to server.MaxListLimit, or a --before-id given that names no
// page (0 or below), which the store would ignore and list the first page
// (the admin API refuses such a before_id too).
func checkPage(cmd *cobra.Command, limit int, beforeID int64) error {
	if limit <= 0 || limit > server.MaxListLimit {
		return usagef("--limit: want 1 to %d", server.MaxListLimit)
	}
	if cmd.Flags().Changed("before-id") && beforeID <= 0 {
		return usagef("--before-id: want a positive id (the last id of the page before), not %d", beforeID)
	}
	return nil
}

func newEventsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List and inspect stored events; skip a dead delivery",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newEventsListCmd(g), newEventsShowCmd(g), newEventsSkipCmd(g))
	return cmd
}

func newEventsListCmd(g *globalFlags) *cobra.Command {
	var (
		f        filterFlags
		limit    int
		beforeID int64
		jsonOut  bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List events, newest first",
		Long: `list prints stored events, newest first, as a table or, with --json, as one
JSON array of event objects (id, source, delivery_id, status, event_type,
attempts, created_at, …), the same objects the admin API returns. Payloads are
not listed; see "hookbox events show ID --payload".`,
		Example: `  hookbox events list --status dead
  hookbox events list --source polar --since 24h --limit 20
  hookbox events list --db postgres://hookbox@db/hookbox --type invoice.paid --json
  hookbox events list --since 2025-01-02T00:00:00Z --until 2025-01-03T00:00:00Z`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			filter, err := f.filter(time.Now())
			if err != nil {
				return err
			}
			if err := checkPage(cmd, limit, beforeID); err != nil {
				return err
			}
			filter.Limit, filter.BeforeID = limit, beforeID
			show, st, err := openShowing(cmd, g)
			if err != nil {
				return err
			}
			defer st.Close()
			evs, err := st.Events(cmd.Context(), filter)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				if evs == nil {
					evs = []hookbox.Event{}
				}
				server.ShowHeaders(evs, show)
				return writeJSONOut(out, evs)
			}
			if len(evs) == 0 {
				fmt.Fprintln(out, "no events match")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			// A KEY column only when a listed delivery has an order key.
			keyed := slices.ContainsFunc(evs, func(e hookbox.Event) bool { return e.OrderKey != "" })
			head := "ID\tSOURCE\tSTATUS\tATTEMPTS\tTYPE\tCREATED\tDELIVERY ID"
			if keyed {
				head += "\tKEY"
			}
			fmt.Fprintln(tw, head)
			for _, e := range evs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s", e.ID, printable(e.Source), printable(string(e.Status)), e.Attempts,
					orDash(printable(e.EventType)), e.CreatedAt.UTC().Format(time.RFC3339), eventDeliveryID(e))
				if keyed {
					fmt.Fprintf(tw, "\t%s", orDash(oneLine(e.OrderKey)))
				}
				fmt.Fprintln(tw)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(evs) == limit {
				fmt.Fprintf(out, "(first %d; more with --before-id %d or a larger --limit)\n", limit, evs[len(evs)-1].ID)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", hookbox.DefaultListLimit, "the most events to list")
	cmd.Flags().Int64Var(&beforeID, "before-id", 0, "only events with a lower id (the next page)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print a JSON array of event objects")
	return cmd
}

func newEventsShowCmd(g *globalFlags) *cobra.Command {
	var payload, jsonOut bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one event with its attempts, or its payload as received",
		Long: `show prints one event: its fields, the headers kept with it and every
recorded attempt. An attempt that recorded no outcome (its process was killed
or crashed during it, and the event was run again) is listed as "unknown":
whether its work took effect is not known. --payload prints only the payload, byte for byte as it was
received (pipe it to a file or jq). --json prints {"event": …, "attempts": […],
"payload": base64, "replay_attempts": N}, as GET /admin/events/{id} returns
it, with "deliveries": […] for an event with several targets and "held_by":
ID for a pending delivery waiting behind a dead one of its order key.`,
		Example: `  hookbox events show 42
  hookbox events show 42 --payload | jq .
  hookbox events show 42 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usagef("event id %q: want a positive whole number", args[0])
			}
			if payload && jsonOut {
				return usagef("--payload and --json are exclusive")
			}
			show, st, err := openShowing(cmd, g)
			if err != nil {
				return err
			}
			defer st.Close()
			d, err := server.LoadEventDetail(cmd.Context(), st, id)
			if errors.Is(err, hookbox.ErrNotFound) {
				return fmt.Errorf("no event %d", id)
			}
			if err != nil {
				return err
			}
			d.Show(show)
			out := cmd.OutOrStdout()
			switch {
			case payload:
				if d.Event.PayloadCleared {
					return fmt.Errorf("event %d: the payload was cleared by payload retention (the id and status are kept)", id)
				}
				return writeBody(out, d.Payload)
			case jsonOut:
				return server.EncodeEventDetail(out, d, true)
			}
			return printEvent(out, d)
		},
	}
	cmd.Flags().BoolVar(&payload, "payload", false, "print only the payload, exactly as received (escaped on a terminal: pipe it for the bytes)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the event, its attempts and its payload (base64) as JSON")
	return cmd
}

func printEvent(w io.Writer, d server.EventDetail) error {
	e := d.Event
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(tw, "id\t%d\n", e.ID)
	fmt.Fprintf(tw, "source\t%s\n", printable(e.Source))
	fmt.Fprintf(tw, "delivery id\t%s\n", eventDeliveryID(e))
	fmt.Fprintf(tw, "type\t%s\n", orDash(printable(e.EventType)))
	fmt.Fprintf(tw, "status\t%s\n", printable(string(e.Status)))
	if e.FanOut && d.ReplayAttempts != nil {
		fmt.Fprintf(tw, "attempts\t%d (its deliveries' attempts; replay --if-attempts takes this)\n", *d.ReplayAttempts)
	} else {
		fmt.Fprintf(tw, "attempts\t%d\n", e.Attempts)
	}
	if e.Status == hookbox.StatusPending || e.Status == hookbox.StatusProcessing {
		fmt.Fprintf(tw, "next attempt\t%s\n", ts(e.NextAttemptAt))
	}
	if e.LeaseOwner != "" {
		fmt.Fprintf(tw, "leased by\t%s\n", printable(e.LeaseOwner))
	}
	if e.OrderKey != "" {
		fmt.Fprintf(tw, "order key\t%s\n", printable(e.OrderKey))
	}
	if d.HeldBy != 0 {
		fmt.Fprintf(tw, "waits behind\tdead delivery %d, the first of its order key, if the target keeps the keys of dead deliveries "+
			"(on_dead: hold, the default; under skip it waits for nothing): hookbox replay %d runs it again first; "+
			"hookbox events skip %d --if-attempts N (N: its attempts, from hookbox events show %d) ends it for good and releases the key\n",
			d.HeldBy, d.HeldBy, d.HeldBy, d.HeldBy)
	}
	if e.LastError != "" {
		fmt.Fprintf(tw, "last error\t%s\n", oneLine(e.LastError))
	}
	fmt.Fprintf(tw, "created\t%s\n", ts(e.CreatedAt))
	fmt.Fprintf(tw, "updated\t%s\n", ts(e.UpdatedAt))
	if e.PayloadCleared {
		fmt.Fprintf(tw, "payload\tcleared by payload retention\n")
	} else {
		fmt.Fprintf(tw, "payload\t%d bytes (hookbox events show %d --payload prints them)\n", len(d.Payload), e.ID)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printHeaders(w, e.Header)
	if e.FanOut {
		fmt.Fprintln(w, "\ndeliveries")
		if len(d.Deliveries) == 0 {
			// Nothing to replay either: say so rather than hint at it.
			fmt.Fprintln(w, "  none: no target takes this event (no target's filter matched it, or its source is store_only)")
			return nil
		}
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, x := range d.Deliveries {
			fmt.Fprintf(tw, "  %d\t%s\t%s\tattempts %d\t%s\n", x.ID, printable(x.Target), printable(string(x.Status)),
				x.Attempts, orDash(oneLine(x.LastError)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "  (hookbox events show ID shows one; hookbox replay %d replays the failed ones)\n", e.ID)
		return nil
	}
	if e.Target != "" {
		fmt.Fprintf(w, "\ndelivery of event %d to target %s\n", e.Parent, printable(e.Target))
	}
	fmt.Fprintln(w, "\nattempts")
	if len(d.Attempts) == 0 {
		fmt.Fprintln(w, "  none yet")
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tOUTCOME\tSTARTED\tTOOK\tERROR")
	for _, a := range d.Attempts {
		took := "-"
		if dur, ok := a.Took(); ok {
			took = dur.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", a.Attempt, printable(string(a.Outcome)), ts(a.StartedAt),
			took, orDash(oneLine(a.Error)))
	}
	return tw.Flush()
}

// printHeaders prints h under a "headers" heading, sorted by name,
// escaped (see printable); nothing when h is empty.
func printHeaders(w io.Writer, h http.Header) {
	if len(h) == 0 {
		return
	}
	fmt.Fprintln(w, "\nheaders")
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			fmt.Fprintf(w, "  %s: %s\n", printable(http.CanonicalHeaderKey(k)), printable(v))
		}
	}
}

// eventDeliveryID is the delivery id as printed, escaped (see printable).
func eventDeliveryID(e hookbox.Event) string {
	if e.IDIsHash {
		return printable(e.DeliveryID) + " (body hash)"
	}
	return printable(e.DeliveryID)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table row on one line, escaped (see printable) and cut
// after 200 bytes at a rune boundary.
func oneLine(s string) string {
	s = printable(s)
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// writeJSONOut writes v as indented JSON, with what does not print in
// its strings (text from senders, apps and the database) written as \u
// escapes, which decode to the same text (printable.JSON).
func writeJSONOut(w io.Writer, v any) error {
	enc := json.NewEncoder(esc.JSONWriter(w))
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
