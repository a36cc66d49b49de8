package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/routing"
)

// skipOne ends one dead delivery for good (hookbox.Ops.Skip), so that it
// no longer holds its order key: 200 with the hookbox.SkipResult, 404 for
// a missing id, 409 for one that is not a dead delivery, or, with
// if_attempts (ExpectFrom, as a replay takes it), for one whose attempts
// are no longer those the caller saw; 400 for a malformed if_attempts.
func (a *admin) skipOne(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	reason := q.Get("reason")
	if err := errors.Join(givenOnce(q, "reason"), CheckSkipReason("reason", reason)); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	expect, err := SkipExpectFrom(q, id)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := a.cfg.Store.Skip(r.Context(), hookbox.SkipParams{ID: id, Reason: reason, Via: "admin API", Key: routing.NoValueKey, Expect: expect})
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

// SkipExpectFrom reads if_attempts from v (the admin API's query, the
// console's form) for a skip of the delivery id, as ExpectFrom does for a
// replay: the attempts the caller saw, as a hookbox.SkipParams.Expect.
// Nil when it is absent; an error for a value that is not a whole number
// from 0.
func SkipExpectFrom(v url.Values, id int64) (*int, error) {
	expect, err := ExpectFrom(v, id)
	if err != nil || expect == nil {
		return nil, err
	}
	n := expect[id]
	return &n, nil
}

// MaxSkipReason is hookbox.MaxSkipReason, the longest reason of a skip.
const MaxSkipReason = hookbox.MaxSkipReason

// CheckSkipReason checks a skip's reason, given as name: storable text
// (CheckFilterText) of at most MaxSkipReason characters.
func CheckSkipReason(name, reason string) error {
	if err := CheckFilterText(name, reason); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(reason); n > MaxSkipReason {
		return fmt.Errorf("%s: at most %d characters, not %d", name, MaxSkipReason, n)
	}
	return nil
}
