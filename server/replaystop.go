package server

import (
	"fmt"
	"net/http"

	"github.com/hookbox/hookbox"
)

// ReplayStop is what a replay's reply adds when the replay failed: a
// store replays in slices, each its own transaction, so a failure after
// the first slice leaves the slices before it replayed. Replayed (in the
// reply beside it) lists those; ReplayedCount counts them.
type ReplayStop struct {
	// Error says what failed and what that left done, in the words of
	// every error reply.
	Error string `json:"error"`
	// Stopped is always true: a script tells a reply of a replay that
	// stopped from one that finished by it.
	Stopped       bool `json:"stopped"`
	ReplayedCount int  `json:"replayed_count"`
	// ResumeAfterID is where the replay stopped (hookbox.ReplayResult's
	// ResumeAfter): the same replay with after_id (--after-id) set to it
	// goes on from there. Absent when every match was dealt with and
	// only the report of those left alone failed.
	ResumeAfterID *int64 `json:"resume_after_id,omitempty"`
	// ResumePaceAfter is how many events the replay's pace counted before
	// it stopped (hookbox.ReplayResult.PacedCount): the replay that goes
	// on, with pace_after (--pace-after) set to it, paces its events
	// after them (hookbox.ReplayParams.PaceAfter). Absent when zero.
	ResumePaceAfter int `json:"resume_pace_after,omitempty"`
	// Rerun says how to go on, and whether running the same replay again
	// as it was is safe.
	Rerun string `json:"rerun"`
}

// StopReplay describes the failure err of the replay p, which did res
// before it, for a reply. why is the failure in the caller's words (an
// API reply names no internal error), said in brackets; resume is how
// the caller's user sets where a replay starts, with a %d for the id
// ("after_id=%d", "--after-id %d"), and pace how they set where its pace
// starts, with a %d for the count ("&pace_after=%d", " --pace-after %d").
func StopReplay(p hookbox.ReplayParams, res hookbox.ReplayResult, why, resume, pace string) *ReplayStop {
	n := len(res.Replayed)
	st := &ReplayStop{Stopped: true, ReplayedCount: n}
	if n == 0 {
		st.ResumeAfterID = res.ResumeAfter
		st.Error = replayWords.stopError(why, 0)
		st.Rerun = "Run the same replay again."
		return st
	}
	if res.ResumeAfter == nil {
		// Every slice committed; what failed came after.
		st.Error = fmt.Sprintf("replay failed after replaying (%s): each of the %d %s in replayed was replayed and stays replayed, "+
			"but which were left alone (skipped, no_payload) could not all be read", why, n, plural(n, "event", "events"))
		st.Rerun = "Nothing is left to replay: list the events to see where they are."
		return st
	}
	st.ResumeAfterID = res.ResumeAfter
	st.Error = replayWords.stopError(why, n)
	goOn := fmt.Sprintf(resume, *res.ResumeAfter)
	if res.PacedCount > 0 {
		// Its events are then due after those this one paced.
		st.ResumePaceAfter = res.PacedCount
		goOn += fmt.Sprintf(pace, res.PacedCount)
	}
	st.Rerun = "Run the same replay with " + goOn + " to go on where it stopped, judging only the events it did not reach. " + rerunSafety(p, res)
	return st
}

// rerunSafety says whether running the replay p again as it was, after it
// stopped part-way having done res, would run again the work of events it
// already replayed, or fall out of its pace.
func rerunSafety(p hookbox.ReplayParams, res hookbox.ReplayResult) string {
	switch {
	case p.IncludeDone:
		return "Do not run it again as it was: with done events included it would replay again those it replayed that have finished since, " +
			"and run their work a second time."
	case p.Filter.Status == hookbox.StatusDead && len(p.IDs) == 0 && p.ReplayWait(res.PacedCount-1) > 0:
		// Those it replayed are pending, paced into the coming seconds,
		// and a run taking only dead events does not pace them again:
		// its own would be due before them.
		return "Running it again as it was is safe for the work, none of which it would run twice (it takes only events still dead), " +
			"but not for the order, as it starts its pace again: " +
			"the events it did not reach would be due at once, before the last of those it paced, " +
			"so a source worked in id order would take them out of order. Go on as above instead."
	case p.Filter.Status == hookbox.StatusDead && len(p.IDs) == 0:
		return "Running it again as it was is safe too: it takes only events still dead, so those it replayed are left alone " +
			"(unless one ran and died again since: that one is replayed again)."
	default:
		return "Running it again as it was is safe too: a replay moves only dead and pending events, never one being worked or done, " +
			"so one it replayed that is still waiting is only made due again, not run twice, and one worked since is left alone " +
			"(unless it died again: that one is replayed again)."
	}
}

// replayFailed answers a replay p (not a dry run) that returned err after
// doing res: 503 when the database could not be reached, else 500, with
// what was replayed before the failure (StopReplay).
func (a *admin) replayFailed(w http.ResponseWriter, p hookbox.ReplayParams, res hookbox.ReplayResult, err error) {
	a.log.Error("admin: replay", "err", err, "replayed", len(res.Replayed))
	if len(res.Replayed) > 0 {
		a.notify()
	}
	code, why := FailureStatus(w, err)
	reply := NewReplayReply(res, false, nil)
	reply.ReplayStop = StopReplay(p, res, why, "after_id=%d", "&pace_after=%d")
	writeJSON(w, code, reply)
}
