package main

import (
	"errors"
	"fmt"
	"io"
	"os/user"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/routing"
	"github.com/hookbox/hookbox/server"
)

func newEventsSkipCmd(g *globalFlags) *cobra.Command {
	var (
		reason     string
		jsonOut    bool
		ifAttempts int
	)
	cmd := &cobra.Command{
		Use:   "skip ID",
		Short: "End one dead delivery for good, so that it no longer holds its order key",
		Long: `skip ends one dead delivery for good. Under on_dead: hold (the default of a
target with order_by), a dead delivery holds its order key: the later
deliveries of the key wait until it is replayed and succeeds. When the app
refuses it for good (a 410, a status in permanent_statuses, an exit code in
permanent_exit_codes), a replay dies again and the key stays held; skip
releases it, as on_dead: skip would for this one delivery only.

The delivery stays dead and keeps its payload. Its last error becomes
"skipped by an operator …: REASON" with the key it held, and its attempts get
a "skip" row, as "events show" prints them. It gets an order key of its own
in place of the one it held, so a later replay of it runs at once, beside
(not before) the key's other deliveries. Only a dead delivery can be
skipped (of an event with several targets, name the delivery); anything else
is refused (exit 1). Skipping one already skipped changes nothing (exit 0).

--if-attempts N skips the delivery only while its attempts are still N, as
"events show" printed them: if it was replayed and ran since (and died
again), the skip is refused as changed since you looked (exit 1) and nothing
changes, so a skip decided on one death never ends another.`,
		Example: `  hookbox events skip 86 --reason "customer deleted; the app answers 410"
  hookbox events skip 86 --if-attempts 3 --reason "customer deleted"
  hookbox events skip 86 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usagef("event id %q: want a positive whole number", args[0])
			}
			if err := server.CheckSkipReason("--reason", reason); err != nil {
				return asUsage(err)
			}
			p := hookbox.SkipParams{ID: id, Reason: reason, Via: skipVia(), Key: routing.NoValueKey}
			if cmd.Flags().Changed("if-attempts") {
				if ifAttempts < 0 {
					return usagef("--if-attempts takes a whole number from 0 (the attempts events show printed)")
				}
				p.Expect = &ifAttempts
			}
			st, err := openOps(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := st.Skip(cmd.Context(), p)
			if errors.Is(err, hookbox.ErrNotFound) {
				return fmt.Errorf("no event %d", id)
			}
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSONOut(cmd.OutOrStdout(), res)
			}
			printSkip(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept in the delivery's last error and attempts")
	cmd.Flags().BoolVar(&jsonOut, "json", false, `print {"id": N, "released_key": "…", "already": bool}`)
	cmd.Flags().IntVar(&ifAttempts, "if-attempts", 0, "skip only while the delivery's attempts are still N, as you saw them (else refused, exit 1)")
	return cmd
}

// skipVia names a skip from the command line, with the local user when
// known.
func skipVia() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "hookbox events skip, by " + u.Username
	}
	return "hookbox events skip"
}

func printSkip(w io.Writer, res hookbox.SkipResult) {
	switch {
	case res.Already:
		fmt.Fprintf(w, "delivery %d was skipped before; nothing changed\n", res.ID)
	case res.Released != "":
		fmt.Fprintf(w, "skipped delivery %d: it stays dead, and no longer holds order key %s; the deliveries waiting behind it go on\n",
			res.ID, printable(strconv.Quote(res.Released)))
	default:
		fmt.Fprintf(w, "skipped delivery %d: it stays dead (it held no order key)\n", res.ID)
	}
}
