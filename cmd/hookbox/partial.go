package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hookbox/hookbox"
)

// partialNote follows, in text output, what a batched operation reports
// having done before it failed.
const partialNote = "stopped part-way by the error below: the above was done and stays done; the rest was not"

// stopWhy says in a few words why a batched operation stopped with err,
// for the error of its --json reply (server.StopReplay and the like).
func stopWhy(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "interrupted"
	case errors.Is(err, hookbox.ErrUnavailable):
		return "the database was unavailable"
	}
	return "a database error"
}

// stoppedRun reports a batched operation that failed with err after its
// committed batches did something, and returns err: with jsonOut, the
// reply json (a finished run's, with what the run's Stop adds: stopped,
// the count and rerun); in text, when did, what show prints for a
// finished run, the part-way note and rerun, how to go on.
func stoppedRun(w io.Writer, err error, did, jsonOut bool, json any, show func() error, rerun string) error {
	if jsonOut {
		return errors.Join(err, writeJSONOut(w, json))
	}
	if !did {
		return err
	}
	if serr := show(); serr != nil {
		return errors.Join(err, serr)
	}
	fmt.Fprintln(w, partialNote)
	fmt.Fprintln(w, rerun)
	return err
}
