package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/service"
)

// tailWindow is how far back, by receipt time, tail looks for events it
// has not shown yet: on PostgreSQL, concurrent transactions may commit a
// lower id after a higher one, so the newest id seen is no safe bookmark.
const tailWindow = 30 * time.Second

// tailPage is how many events one read of tail fetches.
const tailPage = 500

func newTailCmd(g *globalFlags) *cobra.Command {
	var (
		source     string
		typ        string
		lines      int
		interval   time.Duration
		jsonOut    bool
		eventsOnly bool
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print new events as they are stored, until Ctrl-C",
		Long: `tail prints the newest events (--lines, 10 by default), then every new event
as it is stored, one line each, until interrupted. It reads the database
(--db, HOOKBOX_DB or the config's db), so it sees the events of every hookbox
sharing it; on PostgreSQL it wakes as soon as one commits, elsewhere it looks
every --interval. Each event is shown once, with the status it had when first
seen. Deliveries hookbox refuses (see hookbox rejected) are followed too, on
lines marked REJECTED (not with --type, which they have none of, nor with
--events-only). --json prints one JSON object per line: an event, or
{"rejected": …} with its headers' signature values masked.`,
		Example: `  hookbox tail --config hookbox.yaml
  hookbox tail --source stripe --type invoice.paid
  hookbox tail --db postgres://hookbox@db/hookbox --json | jq .`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := errors.Join(server.CheckFilterText("--source", source), server.CheckFilterText("--type", typ)); err != nil {
				return err
			}
			if lines < 0 || lines > server.MaxListLimit {
				return fmt.Errorf("--lines: want 0 to %d", server.MaxListLimit)
			}
			if interval <= 0 {
				return errors.New("--interval: want a positive duration, like 1s")
			}
			st, err := openDB(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			cfg, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			t := &tailer{st: st, filter: hookbox.Filter{Source: source, EventType: typ}, out: cmd.OutOrStdout(), json: jsonOut,
				seen: map[int64]time.Time{}, rejections: typ == "" && !eventsOnly, show: service.HeaderShower(cfg),
				seenRejected: map[int64]time.Time{}}
			return t.run(cmd.Context(), lines, interval)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&source, "source", "", "only events of this source")
	fl.StringVar(&typ, "type", "", "only events of this event type")
	fl.IntVarP(&lines, "lines", "n", 10, "how many of the newest events to print first")
	fl.DurationVar(&interval, "interval", time.Second, "how often to look for new events (PostgreSQL also wakes at each commit)")
	fl.BoolVar(&jsonOut, "json", false, "print one JSON object per line")
	fl.BoolVar(&eventsOnly, "events-only", false, "leave out refused deliveries")
	return cmd
}

// tailer follows new events of one filter.
type tailer struct {
	st     hookbox.Store
	filter hookbox.Filter
	out    io.Writer
	json   bool
	// seen holds the events already printed or passed over, by id, with
	// their receipt time, for as long as they are inside tailWindow.
	seen map[int64]time.Time

	// rejections says whether refused deliveries are followed too;
	// seenRejected is seen for them; show masks their headers.
	rejections   bool
	seenRejected map[int64]time.Time
	show         func(http.Header) http.Header
}

// run prints the newest lines events, then new events until ctx ends.
func (t *tailer) run(ctx context.Context, lines int, interval time.Duration) error {
	// Everything already in the window is old news: mark it seen before
	// reading the newest, so that an event stored in between is either
	// among the newest printed or found by the next look, never lost.
	if _, err := t.fresh(ctx, time.Now()); err != nil {
		return err
	}
	if _, err := t.freshRejected(ctx, time.Now()); err != nil {
		return err
	}
	f := t.filter
	f.Limit = max(lines, 1)
	newest, err := t.st.Events(ctx, f)
	if err != nil {
		return err
	}
	if len(newest) > lines {
		newest = newest[:lines]
	}
	if err := t.print(newest); err != nil {
		return err
	}
	wake := make(chan struct{}, 1)
	go t.st.Listen(ctx, func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-wake:
		}
		evs, err := t.fresh(ctx, time.Now())
		var rjs []hookbox.Rejection
		if err == nil {
			rjs, err = t.freshRejected(ctx, time.Now())
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := t.print(evs); err != nil {
			return err
		}
		if err := t.printRejected(rjs); err != nil {
			return err
		}
	}
}

// freshRejected is fresh for refused deliveries (none unless t follows
// them): those received within tailWindow and not seen before, oldest
// first, marked seen.
func (t *tailer) freshRejected(ctx context.Context, now time.Time) ([]hookbox.Rejection, error) {
	if !t.rejections {
		return nil, nil
	}
	since := now.Add(-tailWindow)
	for id, at := range t.seenRejected {
		if at.Before(since) {
			delete(t.seenRejected, id)
		}
	}
	var out []hookbox.Rejection
	var before int64
	for {
		rjs, err := t.st.Rejections(ctx, hookbox.RejectionFilter{Source: t.filter.Source, Since: since, BeforeID: before, Limit: tailPage})
		if err != nil {
			return nil, err
		}
		unseen := 0
		for _, rj := range rjs {
			if _, ok := t.seenRejected[rj.ID]; !ok {
				unseen++
				t.seenRejected[rj.ID] = rj.ReceivedAt
				out = append(out, rj)
			}
		}
		if len(rjs) < tailPage || unseen == 0 {
			break
		}
		before = rjs[len(rjs)-1].ID
	}
	slices.SortFunc(out, func(a, b hookbox.Rejection) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// printRejected writes refused deliveries, oldest first, their headers
// masked in JSON.
func (t *tailer) printRejected(rjs []hookbox.Rejection) error {
	for _, rj := range rjs {
		var err error
		if t.json {
			var b []byte
			v := server.ViewRejection(rj, t.show, false)
			if b, err = json.Marshal(map[string]any{"rejected": v}); err == nil {
				_, err = t.out.Write(append(b, '\n'))
			}
		} else {
			_, err = fmt.Fprintf(t.out, "%s  REJECTED  %s  %d  %s  from %s\n", rj.ReceivedAt.UTC().Format(time.RFC3339Nano),
				rejectedSource(rj), rj.Status, oneLine(rj.Reason), printable(rj.RemoteAddr))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fresh returns the events received within tailWindow of now that were
// not seen before, oldest first, and marks them seen. It reads newest
// first, a page at a time, and stops at a page it has seen all of.
func (t *tailer) fresh(ctx context.Context, now time.Time) ([]hookbox.Event, error) {
	since := now.Add(-tailWindow)
	for id, at := range t.seen {
		if at.Before(since) {
			delete(t.seen, id)
		}
	}
	var out []hookbox.Event
	var before int64
	for {
		f := t.filter
		f.Since, f.BeforeID, f.Limit = since, before, tailPage
		evs, err := t.st.Events(ctx, f)
		if err != nil {
			return nil, err
		}
		unseen := 0
		for _, e := range evs {
			if _, ok := t.seen[e.ID]; !ok {
				unseen++
				t.seen[e.ID] = e.CreatedAt
				out = append(out, e)
			}
		}
		if len(evs) < tailPage || unseen == 0 {
			break
		}
		before = evs[len(evs)-1].ID
	}
	slices.SortFunc(out, byID)
	return out, nil
}

// print writes events, given newest first or oldest first, oldest first.
func (t *tailer) print(evs []hookbox.Event) error {
	evs = slices.Clone(evs)
	slices.SortFunc(evs, byID)
	for _, e := range evs {
		t.seen[e.ID] = e.CreatedAt
		var err error
		if t.json {
			var b []byte
			if b, err = json.Marshal(e); err == nil {
				_, err = t.out.Write(append(b, '\n'))
			}
		} else {
			_, err = fmt.Fprintf(t.out, "%s  %d  %s  %s  %s  attempts=%d  %s\n", e.CreatedAt.UTC().Format(time.RFC3339Nano), e.ID,
				printable(e.Source), orDash(printable(e.EventType)), e.Status, e.Attempts, eventDeliveryID(e))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// byID orders events by id, oldest first.
func byID(a, b hookbox.Event) int { return cmp.Compare(a.ID, b.ID) }
