package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hookbox/hookbox"
)

// TargetStatus is one target as GET /admin/targets shows it: what the
// configuration says, whether it is paused (kept in the database, for
// every process), and what this process's workers know of it.
type TargetStatus struct {
	Name        string    `json:"name"` // source, or source/target
	Kind        string    `json:"kind,omitempty"`
	Paused      bool      `json:"paused"`
	PausedAt    time.Time `json:"paused_at,omitzero"`
	Reason      string    `json:"reason,omitempty"`
	InFlight    int       `json:"in_flight"`
	Failures    int       `json:"failures_in_a_row"`
	CircuitOpen bool      `json:"circuit_open"`
	OpenUntil   time.Time `json:"open_until,omitzero"`
}

// registerTargets adds the target routes of the admin API:
//
//	GET  /admin/targets                           every target, paused or not
//	POST /admin/targets/{source}/pause            a source's own forward or exec
//	POST /admin/targets/{source}/{target}/pause   a named target
//	POST /admin/targets/{source}/resume, …/{target}/resume
//	POST /admin/targets/{source}[/{target}]/retire  ?dry_run=true
func (a *admin) registerTargets(s Mux) {
	s.Handle("GET /admin/targets", a.guard(takes(a.targets)))
	for _, p := range []string{"/admin/targets/{source}", "/admin/targets/{source}/{target}"} {
		s.Handle("POST "+p+"/pause", a.guard(takes(a.pause(true), "reason")))
		s.Handle("POST "+p+"/resume", a.guard(takes(a.pause(false))))
		s.Handle("POST "+p+"/retire", a.guard(takes(a.retire, "dry_run")))
	}
}

// RetireReply is the body of a retire answer, and what `hookbox targets
// retire --json` prints.
type RetireReply struct {
	Name string `json:"name"`
	hookbox.RetireResult
	DryRun bool `json:"dry_run"`
	// RetireStop is set when the retire failed: ended is then what it
	// ended before it stopped.
	*RetireStop
}

// retire ends the unfinished deliveries of a queue name this process does
// not work (hookbox.Ops.RetireTarget). A name it works is refused: its
// deliveries are being worked, and would be ended under the workers.
func (a *admin) retire(w http.ResponseWriter, r *http.Request) {
	name := hookbox.QueueName(r.PathValue("source"), r.PathValue("target"))
	if err := CheckFilterText("target", name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	dry, err := boolParam(r.URL.Query(), "dry_run")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if a.cfg.Works != nil && a.cfg.Works(name) {
		writeError(w, http.StatusConflict, name+" is worked by this process (or, a go_handler target or a source with no forward, exec or targets, by the Go program that registers its handlers): retire ends the deliveries of a target no process has any more; "+
			"remove it from the config and restart every process first, or pause it")
		return
	}
	res, err := a.cfg.Store.RetireTarget(r.Context(), hookbox.RetireParams{Name: name, Reason: hookbox.RetireReason(name), DryRun: dry})
	if err != nil && dry {
		a.internal(w, "retire (dry run, nothing was changed)", err)
		return
	}
	if err != nil {
		// The slices before the failure have committed: say how many.
		a.retireFailed(w, name, res, err)
		return
	}
	if !dry {
		a.log.Info("admin retire: deliveries ended as dead", "target", name, "ended", res.Ended, "in_flight", res.InFlight)
	}
	writeJSON(w, http.StatusOK, RetireReply{Name: name, RetireResult: res, DryRun: dry})
}

func (a *admin) targets(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Targets == nil {
		writeJSON(w, http.StatusOK, []TargetStatus{})
		return
	}
	ts, err := a.cfg.Targets(r.Context())
	if err != nil {
		a.internal(w, "list targets", err)
		return
	}
	if ts == nil {
		ts = []TargetStatus{}
	}
	writeJSON(w, http.StatusOK, ts)
}

func (a *admin) pause(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := hookbox.QueueName(r.PathValue("source"), r.PathValue("target"))
		if !hookbox.ValidQueueName(name) {
			writeError(w, http.StatusBadRequest, "not a target name: write /admin/targets/SOURCE[/TARGET]/pause")
			return
		}
		if a.cfg.KnownTarget != nil && !a.cfg.KnownTarget(name) {
			writeError(w, http.StatusNotFound, "no target "+name+" is configured: a source with targets is paused target by target (SOURCE/TARGET, as GET /admin/targets lists them)")
			return
		}
		ops := a.cfg.Store
		if pause {
			// Given once, and what the store keeps (hookbox.CheckPause):
			// its refusal is the client's mistake, not a failing store.
			q := r.URL.Query()
			reason := q.Get("reason")
			if err := errors.Join(givenOnce(q, "reason"), CheckFilterText("reason", reason)); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			if err := hookbox.CheckPause(name, reason); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			if err := ops.PauseTarget(r.Context(), name, reason); err != nil {
				a.internal(w, "pause", err)
				return
			}
			a.log.Info("target paused", "target", name)
			writeJSON(w, http.StatusOK, map[string]any{"name": name, "paused": true})
			return
		}
		ok, err := ops.ResumeTarget(r.Context(), name)
		if err != nil {
			a.internal(w, "resume", err)
			return
		}
		if !ok {
			writeError(w, http.StatusConflict, name+" was not paused")
			return
		}
		a.log.Info("target resumed", "target", name)
		if a.cfg.Notify != nil {
			a.cfg.Notify()
		}
		writeJSON(w, http.StatusOK, map[string]any{"name": name, "paused": false})
	}
}

// TargetsFunc lists the targets for GET /admin/targets.
type TargetsFunc func(ctx context.Context) ([]TargetStatus, error)
