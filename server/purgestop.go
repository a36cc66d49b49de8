package server

import (
	"net/http"

	"github.com/hookbox/hookbox"
)

// PurgeStop is what a purge's reply adds when the purge failed: a store
// deletes in batches, each its own transaction, so a failure after the
// first batch leaves the batches before it deleted. The counts in the
// reply beside it (done, dead, stored) are those deletions.
type PurgeStop struct {
	// Error says what failed and what that left done, in the words of
	// every error reply.
	Error string `json:"error"`
	// Stopped is always true: a script tells a reply of a purge that
	// stopped from one that finished by it.
	Stopped bool `json:"stopped"`
	// DeletedCount is how many events the committed batches deleted (the
	// sum of done, dead and stored).
	DeletedCount int `json:"deleted_count"`
	// Rerun says how to go on: running the same purge again is safe.
	Rerun string `json:"rerun"`
}

// purgeRerun is how to go on after a purge that stopped: a purge deletes
// only what is finished and older than its cut-off at the time, so the
// same purge run again deletes what the first one did not reach and
// nothing else.
const purgeRerun = "Run the same purge again: it is safe, as it deletes only events still finished and older than the cut-off, " +
	"so it takes what this one did not reach and nothing it already deleted is touched."

// StopPurge describes the failure of a purge that deleted res before it,
// for a reply. why is the failure in the caller's words (an API reply
// names no internal error), said in brackets.
func StopPurge(res hookbox.PurgeResult, why string) *PurgeStop {
	n := res.Total()
	st := &PurgeStop{Stopped: true, DeletedCount: n, Rerun: purgeRerun}
	st.Error = purgeWords.stopError(why, n)
	return st
}

// purgeFailed answers a purge (not a dry run) that returned err after
// deleting res: 503 with Retry-After when the database could not be
// reached, else 500, with what was deleted before the failure
// (StopPurge).
func (a *admin) purgeFailed(w http.ResponseWriter, reply PurgeReply, err error) {
	res := reply.PurgeResult
	a.log.Error("admin: purge", "err", err, "done", res.Done, "stored", res.Stored, "dead", res.Dead, "before", reply.Before)
	code, why := FailureStatus(w, err)
	reply.PurgeStop = StopPurge(res, why)
	writeJSON(w, code, reply)
}
