package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
)

func newRestoreIDsCmd(g *globalFlags) *cobra.Command {
	var (
		gap     int64
		after   int64
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "restore-ids",
		Short: "After a restore from a backup, move event ids past those handed out before it",
		Long: `restore-ids is a step of every restore from a backup (and of a point-in-time
recovery). A restored database knows only the event ids handed out up to its
backup, and would hand the later ones out again, to other deliveries: the ids
in senders' 202 replies, Hookbox-Event-Id, HOOKBOX_EVENT_ID, log lines and
traces would each name two events. restore-ids moves the ids forward, past
--gap ids beyond the largest the database knows of (default 1,000,000), or
past --after ID, an id known to have been handed out (from the logs, or the
senders' replies), whichever is larger. It never moves ids back; run again, it
skips another gap.

Run it after the restore and before hookbox starts on the database. On
PostgreSQL it sets the id sequence (events_id_seq). On SQLite, which gives a
new event the largest id in the table plus one, it stores a placeholder event
(source "hookbox restore-ids", status stored) that holds the new floor; the
first event stored after it deletes it. Until then it shows in events list.`,
		Example: `  hookbox restore-ids --db sqlite:/var/lib/hookbox/hookbox.db
  hookbox restore-ids --after 151192 --db "$HOOKBOX_DB"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p := hookbox.IDFloorParams{Gap: gap, After: after}
			if cmd.Flags().Changed("after") && !cmd.Flags().Changed("gap") {
				p.Gap = 0
			}
			if p.Gap < 0 || p.After < 0 {
				return usagef("--gap and --after take a number of 0 or more")
			}
			st, err := openDB(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			f, err := st.RaiseIDFloor(cmd.Context(), p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(f); err != nil {
					return err
				}
				return st.Close()
			}
			if !f.Moved {
				fmt.Fprintf(w, "nothing to do: the database has handed out ids up to %d, at or past the floor asked for; new events get ids above %d\n", f.Known, f.Floor)
				return st.Close()
			}
			fmt.Fprintf(w, "new events get ids above %d (the largest id this database knew of was %d)\n", f.Floor, f.Known)
			if _, pg := st.(*postgres.Store); !pg {
				fmt.Fprintf(w, "a placeholder event (source %q) holds id %d until the next event is stored\n", hookbox.IDFloorSource, f.Floor+1)
			}
			return st.Close()
		},
	}
	cmd.Flags().Int64Var(&gap, "gap", hookbox.DefaultIDGap, "move ids this far past the largest the database knows of")
	cmd.Flags().Int64Var(&after, "after", 0, "an id handed out before the restore: new ids are above it (alone, it replaces --gap)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print what it did as JSON")
	return cmd
}
