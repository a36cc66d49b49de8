package server

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/rejected"
)

// RejectionView is a rejected delivery as the admin API, the CLI and the
// UI show it: headers fit to show (signature and credential values
// masked), the kept body only on the page of one rejection.
type RejectionView struct {
	hookbox.Rejection
	// Body is the kept body (base64 in JSON); null when it was not read.
	Body []byte `json:"body,omitempty"`
}

// ViewRejection returns rj fit to show: the headers that carry a source's
// secret masked by the row's own list (rejected.DisplayHeader), then show
// masks its headers.
func ViewRejection(rj hookbox.Rejection, show func(http.Header) http.Header, withBody bool) RejectionView {
	rj.Header = show(rejected.DisplayHeader(rj.Header))
	v := RejectionView{Rejection: rj}
	if withBody {
		v.Body = rj.Body
	}
	return v
}

// RejectionFilterFromQuery reads a rejections filter from query
// parameters: source, status, since (see ParseTime), limit and before_id.
func RejectionFilterFromQuery(q url.Values, now time.Time) (hookbox.RejectionFilter, error) {
	if err := givenOnce(q, "source", "status", "since", "limit", "before_id"); err != nil {
		return hookbox.RejectionFilter{}, err
	}
	f := hookbox.RejectionFilter{Source: q.Get("source")}
	if err := CheckFilterText("source", f.Source); err != nil {
		return f, err
	}
	if v := q.Get("status"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 || n > 599 {
			return f, errors.New("status: want an HTTP status such as 401")
		}
		f.Status = n
	}
	var err error
	if f.Since, err = ParseTime(q.Get("since"), now); err != nil {
		return f, errors.New("since: " + err.Error())
	}
	f.Limit, f.BeforeID, err = pageFromQuery(q)
	return f, err
}

func (a *admin) listRejected(w http.ResponseWriter, r *http.Request) {
	f, err := RejectionFilterFromQuery(r.URL.Query(), a.cfg.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rs, err := a.cfg.Store.Rejections(r.Context(), f)
	if err != nil {
		a.internal(w, "list rejected deliveries", err)
		return
	}
	out := make([]RejectionView, 0, len(rs))
	for _, rj := range rs {
		out = append(out, ViewRejection(rj, a.cfg.ShowHeader, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *admin) showRejected(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	rj, err := a.cfg.Store.Rejection(r.Context(), id)
	if errors.Is(err, hookbox.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no rejected delivery "+strconv.FormatInt(id, 10))
		return
	}
	if err != nil {
		a.internal(w, "show rejected delivery", err)
		return
	}
	writeJSON(w, http.StatusOK, ViewRejection(rj, a.cfg.ShowHeader, true))
}

// recheck verifies kept rejected deliveries again: all of them, or those
// named by id=… (repeatable); dry_run reports without storing.
func (a *admin) recheck(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Recheck == nil {
		writeError(w, http.StatusNotImplemented, "re-check is not available: this server has no source configuration")
		return
	}
	q := r.URL.Query()
	dry, err := boolParam(q, "dry_run")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	p := rejected.RecheckParams{DryRun: dry}
	for _, v := range q["id"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			writeError(w, http.StatusBadRequest, "id: want a positive whole number")
			return
		}
		p.IDs = append(p.IDs, id)
	}
	res, err := a.cfg.Recheck(r.Context(), p)
	switch {
	case err != nil && dry:
		a.internal(w, "re-check", err) // a dry run stores nothing
		return
	case err != nil:
		// The pages before the failure are stored.
		a.recheckFailed(w, res, err)
		return
	}
	if !dry && len(res.Admitted) > 0 {
		a.log.Info("admin re-check admitted rejected deliveries", "admitted", len(res.Admitted), "refused", len(res.Refused))
		a.notify()
	}
	writeJSON(w, http.StatusOK, res)
}
