package server

import (
	"net/http"

	"github.com/hookbox/hookbox/rejected"
)

// RecheckReply is the body of a re-check's answer: what it admitted and
// refused, and, when it failed, what RecheckStop adds.
type RecheckReply struct {
	rejected.RecheckResult
	// RecheckStop is set when the re-check failed: Admitted and Refused
	// are then what it did before it stopped.
	*RecheckStop
}

// RecheckStop is what a re-check's reply adds when the re-check failed: a
// re-check stores what passes a page at a time, each page committed on
// its own, so a failure after the first page leaves the pages before it
// stored. Admitted (in the reply beside it) lists them.
type RecheckStop struct {
	// Error says what failed and what that left done, in the words of
	// every error reply.
	Error string `json:"error"`
	// Stopped is always true: a script tells a reply of a re-check that
	// stopped from one that finished by it.
	Stopped bool `json:"stopped"`
	// AdmittedCount counts Admitted: the deliveries now stored as events
	// (or found stored already).
	AdmittedCount int `json:"admitted_count"`
	// Rerun says how to go on: running the same re-check again is safe.
	Rerun string `json:"rerun"`
}

// recheckRerun is how to go on after a re-check that stopped: what it
// admitted is either marked admitted (a re-check of all skips it; one by
// id reports it already admitted) or, if the failure came before its mark,
// found already stored and marked, never stored twice.
const recheckRerun = "Run the same re-check again: it is safe, as a delivery it admitted is marked admitted and left alone, " +
	"and one stored before its mark failed is found already stored (a duplicate) and marked, never stored twice."

// StopRecheck describes the failure of a re-check that did res before it,
// for a reply. why is the failure in the caller's words (an API reply
// names no internal error), said in brackets.
func StopRecheck(res rejected.RecheckResult, why string) *RecheckStop {
	n := len(res.Admitted)
	st := &RecheckStop{Stopped: true, AdmittedCount: n, Rerun: recheckRerun}
	st.Error = recheckWords.stopError(why, n)
	return st
}

// recheckFailed answers a re-check (not a dry run) that returned err after
// doing res: 503 with Retry-After when the database could not be reached,
// else 500, with what was admitted before the failure (StopRecheck).
func (a *admin) recheckFailed(w http.ResponseWriter, res rejected.RecheckResult, err error) {
	a.log.Error("admin: re-check", "err", err, "admitted", len(res.Admitted), "refused", len(res.Refused))
	if len(res.Admitted) > 0 {
		a.notify()
	}
	code, why := FailureStatus(w, err)
	writeJSON(w, code, RecheckReply{RecheckResult: res, RecheckStop: StopRecheck(res, why)})
}
