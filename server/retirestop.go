package server

import (
	"net/http"

	"github.com/hookbox/hookbox"
)

// RetireStop is what a retire's reply adds when the retire failed: a
// store ends a target's deliveries in slices, each its own transaction,
// so a failure after the first slice leaves the slices before it ended.
// The ended count in the reply beside it is those.
type RetireStop struct {
	// Error says what failed and what that left done, in the words of
	// every error reply.
	Error string `json:"error"`
	// Stopped is always true: a script tells a reply of a retire that
	// stopped from one that finished by it.
	Stopped bool `json:"stopped"`
	// EndedCount is how many deliveries the committed slices ended as
	// dead (ended, beside it).
	EndedCount int `json:"ended_count"`
	// Rerun says how to go on: running the same retire again is safe.
	Rerun string `json:"rerun"`
}

// retireRerun is how to go on after a retire that stopped: a retire ends
// only the deliveries of the name still unfinished and not in flight, so
// the same retire run again ends what the first one did not reach.
const retireRerun = "Run the same retire again: it is safe, as it ends only the deliveries still unfinished, " +
	"so it takes what this one did not reach and leaves those it ended as they are."

var retireWords = stopWords{op: "retire", one: "delivery", many: "deliveries", where: "counted in ended", done: "ended as dead", rest: "ended", nothing: "ended"}

// StopRetire describes the failure of a retire that ended res before it,
// for a reply. why is the failure in the caller's words (an API reply
// names no internal error), said in brackets.
func StopRetire(res hookbox.RetireResult, why string) *RetireStop {
	return &RetireStop{Error: retireWords.stopError(why, res.Ended), Stopped: true, EndedCount: res.Ended, Rerun: retireRerun}
}

// retireFailed answers a retire (not a dry run) of name that returned err
// after ending res: 503 with Retry-After when the database could not be
// reached, else 500, with what was ended before the failure
// (StopRetire).
func (a *admin) retireFailed(w http.ResponseWriter, name string, res hookbox.RetireResult, err error) {
	a.log.Error("admin: retire", "target", name, "err", err, "ended", res.Ended)
	code, why := FailureStatus(w, err)
	writeJSON(w, code, RetireReply{Name: name, RetireResult: res, RetireStop: StopRetire(res, why)})
}
