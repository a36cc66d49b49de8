package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/routing"
	"github.com/hookbox/hookbox/server"
)

// skipVia names a skip from the console in the delivery's last error and
// its skip attempt (hookbox.SkipParams.Via).
const skipVia = "console"

// offersSkip reports whether the page of e offers the Skip form: e is a
// dead delivery (not an event of several targets, which Ops.Skip refuses)
// that is the first of its order key (Ops.KeyHead), which it holds: the
// key's deliveries, those waiting now and those yet to come, go on once
// it is skipped (the form is offered whether or not one waits now). A
// delivery with no order key, or with a key of its own (one without
// the value, or one skipped before: routing.NoValueKey), holds nothing up,
// and one behind another dead delivery of its key releases nothing yet:
// neither gets the form. Under on_dead: skip the first dead delivery
// holds nothing either; the console does not know the target's setting,
// and a skip there changes nothing but its key and last error. Any error
// reading the key's head hides the form: the page is shown anyway.
func offersSkip(ctx context.Context, st hookbox.Ops, e hookbox.Event) bool {
	if e.Status != hookbox.StatusDead || e.FanOut || e.OrderKey == "" || e.OrderKey == routing.NoValueKey(e.DeliveryID) {
		return false
	}
	head, status, err := st.KeyHead(ctx, e.Source, e.OrderKey)
	return err == nil && head == e.ID && status == hookbox.StatusDead
}

// skipOne ends one dead delivery for good with the store's Skip, as
// POST /admin/events/{id}/skip and hookbox events skip do (the same rules:
// hookbox.SkipParams.Judge), from the form of the delivery's page. The
// form needs a reason, and carries the attempts the page showed
// (if_attempts), passed to the skip as its condition
// (hookbox.SkipParams.Expect): a delivery whose attempts moved on since
// (replayed and run again) is refused as changed since you looked, and
// nothing is written. The store compares them in the skip's own
// transaction, so a replay that runs and dies again just before the skip
// is seen too; the console reads nothing before it.
func (u *console) skipOne(w http.ResponseWriter, r *http.Request, s session) {
	id, ok := u.pathID(w, r, s)
	if !ok {
		return
	}
	reason := r.PostForm.Get("reason")
	if strings.TrimSpace(reason) == "" {
		u.fail(w, r, s, http.StatusBadRequest, "Give a reason for the skip: it is kept in the delivery's last error and its attempts. Nothing was skipped.")
		return
	}
	if err := server.CheckSkipReason("reason", reason); err != nil {
		u.fail(w, r, s, http.StatusBadRequest, err.Error()+". Nothing was skipped.")
		return
	}
	expect, err := server.SkipExpectFrom(r.PostForm, id)
	if err == nil && expect == nil {
		err = errors.New("if_attempts: the form lacks the attempts the page showed; reload the page")
	}
	if err != nil {
		u.fail(w, r, s, http.StatusBadRequest, err.Error()+". Nothing was skipped.")
		return
	}
	res, err := u.cfg.Store.Skip(r.Context(), hookbox.SkipParams{ID: id, Reason: reason, Via: skipVia, Key: routing.NoValueKey, Expect: expect})
	var ns *hookbox.NotSkippableError
	switch {
	case errors.Is(err, hookbox.ErrNotFound):
		u.fail(w, r, s, http.StatusNotFound, "There is no event "+strconv.FormatInt(id, 10)+".")
		return
	case errors.As(err, &ns) && ns.Changed:
		u.fail(w, r, s, http.StatusConflict, fmt.Sprintf("Delivery %d was not skipped: it changed since you looked (%d attempts, not %d; it is %s now). Look at its page again before you skip it.",
			id, ns.Attempts, ns.Expected, ns.Status))
		return
	case errors.As(err, &ns):
		u.fail(w, r, s, http.StatusConflict, "Not skipped: "+ns.Error()+".")
		return
	case err != nil:
		u.internal(w, r, s, "skip", err)
		return
	}
	done := "skip-already"
	if !res.Already {
		u.log.Info("ui skip", "event_id", id, "released_key", res.Released, "reason", reason)
		u.notify()
		done = "skipped-own"
		if res.Released != "" {
			done = "skipped"
		}
	}
	http.Redirect(w, r, "/ui/events/"+strconv.FormatInt(id, 10)+"?done="+done, http.StatusSeeOther)
}
