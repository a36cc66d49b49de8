package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/routing"
)

// skipOne ends one dead delivery for good (hookbox.Ops.Skip), so that it
// no longer holds its order key: 200 with the hookbox.SkipResult, 404 for
// a missing id, 409 for one that is not a dead delivery.
func (a *admin) skipOne(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	reason := r.URL.Query().Get("reason")
	if err := CheckSkipReason("reason", reason); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := a.cfg.Store.Skip(r.Context(), hookbox.SkipParams{ID: id, Reason: reason, Via: "admin API", Key: routing.NoValueKey})
	var ns *hookbox.NotSkippableError
	switch {
	case errors.Is(err, hookbox.ErrNotFound):
		writeError(w, http.StatusNotFound, "no event "+strconv.FormatInt(id, 10))
		return
	case errors.As(err, &ns):
		writeError(w, http.StatusConflict, ns.Error())
		return
	case err != nil:
		a.internal(w, "skip", err)
		return
	}
	if !res.Already {
		a.log.Info("admin skip", "event_id", id, "released_key", res.Released, "reason", reason)
		a.notify()
	}
	writeJSON(w, http.StatusOK, res)
}

// MaxSkipReason is hookbox.MaxSkipReason, the longest reason of a skip.
const MaxSkipReason = hookbox.MaxSkipReason

// CheckSkipReason checks a skip's reason, given as name: storable text
// (CheckFilterText) of at most MaxSkipReason bytes.
func CheckSkipReason(name, reason string) error {
	if err := CheckFilterText(name, reason); err != nil {
		return err
	}
	if len(reason) > MaxSkipReason {
		return fmt.Errorf("%s: at most %d bytes, not %d", name, MaxSkipReason, len(reason))
	}
	return nil
}
