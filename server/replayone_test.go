package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// claimOne claims the one event due in queue and fails t unless there is
// exactly one.
func claimOne(t *testing.T, st dbtest.Store, queue string) hookbox.Event {
	t.Helper()
	evs, err := st.Claim(context.Background(), hookbox.ClaimParams{Owner: "test-" + queue, Limit: 10, Lease: time.Minute,
		Sources: []string{queue}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("claim %s: %+v, %v; want one event", queue, evs, err)
	}
	return evs[0]
}

// finishDone finishes ev, claimed, as done.
func finishDone(t *testing.T, st dbtest.Store, ev hookbox.Event) {
	t.Helper()
	now := time.Now()
	errs, err := st.Finish(context.Background(), []hookbox.Outcome{{ID: ev.ID, Owner: ev.LeaseOwner, Attempt: ev.Attempts,
		Status: hookbox.StatusDone, StartedAt: now, FinishedAt: now}})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish %d: %v %v", ev.ID, errs, err)
	}
}

// fanOutEvent stores an event of source fanned out to targets a and b and
// returns its id.
func fanOutEvent(t *testing.T, st dbtest.Store, source string) int64 {
	t.Helper()
	rs, err := st.Ingest(context.Background(), []hookbox.Delivery{{
		Source: source, DeliveryID: "1", Header: http.Header{"Content-Type": {"application/json"}},
		Payload: []byte(`{"id":"1"}`), ReceivedAt: time.Now(), FanOut: true,
		Routes: []hookbox.Route{{Target: "a"}, {Target: "b"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return rs[0].ID
}

// TestAdminReplayFanOutSaysWhichDelivery: POST /admin/events/{id}/replay
// of a FanOut event whose delivery to a is in flight and to b is done
// answers 409 naming each delivery, its target and why (without
// include_done); with include_done it replays b and answers 200 with a in
// skipped, and skipped_reasons saying a is being worked. Before, the
// second answered 200 with skipped [], and nothing said that a was left
// out.
func TestAdminReplayFanOutSaysWhichDelivery(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		parent := fanOutEvent(t, h.st, "fo")
		a := claimOne(t, h.st, "fo/a")
		b := claimOne(t, h.st, "fo/b")
		finishDone(t, h.st, b)

		code, body := h.call("POST", fmt.Sprintf("/admin/events/%d/replay", parent))
		for _, want := range []string{
			fmt.Sprintf("delivery %d of event %d (target a) is being worked right now", a.ID, parent),
			fmt.Sprintf("delivery %d of event %d (target b) is done; pass include_done", b.ID, parent),
		} {
			if code != 409 || !strings.Contains(string(body), want) {
				t.Errorf("replay of the event without include_done = %d %s; want 409 saying %q", code, body, want)
			}
		}
		var rep struct {
			Replayed []int64           `json:"replayed"`
			Skipped  []int64           `json:"skipped"`
			Reasons  map[string]string `json:"skipped_reasons"`
		}
		h.json("POST", fmt.Sprintf("/admin/events/%d/replay?include_done=true", parent), 200, &rep)
		why := rep.Reasons[fmt.Sprint(a.ID)]
		if !slices.Equal(rep.Replayed, []int64{b.ID}) || !slices.Equal(rep.Skipped, []int64{a.ID}) ||
			!strings.Contains(why, fmt.Sprintf("delivery %d of event %d (target a) is being worked right now", a.ID, parent)) {
			t.Errorf("replay with include_done = %+v; want b replayed, a skipped as being worked", rep)
		}
		if h.status(a.ID) != hookbox.StatusProcessing || h.status(b.ID) != hookbox.StatusPending {
			t.Errorf("after the replay: a %s, b %s; want processing, pending", h.status(a.ID), h.status(b.ID))
		}
	})
}

// TestAdminReplayIfAttempts: a replay with if_attempts (the attempts the
// caller saw) replays a done event once: the same request again, after
// the first replay's run, answers 409 "changed since you looked" and
// leaves the event done after that one run. A request with the attempts
// it has now replays it; a bad value is a 400. Before, if_attempts was
// ignored and the second request ran the event again.
func TestAdminReplayIfAttempts(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		id := seed(t, h.st, "polar", "order.paid", hookbox.StatusDone, time.Now(), "x1")[0]
		seen, err := h.st.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		path := fmt.Sprintf("/admin/events/%d/replay?include_done=true&if_attempts=%d", id, seen.Attempts)
		var rep struct {
			Replayed []int64 `json:"replayed"`
		}
		h.json("POST", path, 200, &rep)
		if !slices.Equal(rep.Replayed, []int64{id}) {
			t.Fatalf("first replay = %+v", rep)
		}
		finishDone(t, h.st, claimOne(t, h.st, "polar")) // the worker runs it
		code, body := h.call("POST", path)
		if code != 409 || !strings.Contains(string(body), "changed since you looked") {
			t.Errorf("the same replay again = %d %s; want 409 changed since you looked", code, body)
		}
		now, err := h.st.Event(context.Background(), id)
		if err != nil || now.Status != hookbox.StatusDone || now.Attempts != seen.Attempts+1 {
			t.Fatalf("after two replays with if_attempts=%d: %+v, %v; want done, run once more (attempts %d)",
				seen.Attempts, now, err, seen.Attempts+1)
		}
		if code, body := h.call("POST", fmt.Sprintf("/admin/events/%d/replay?include_done=true&if_attempts=x", id)); code != 400 ||
			!strings.Contains(string(body), "if_attempts") {
			t.Errorf("if_attempts=x = %d %s, want 400", code, body)
		}
		h.json("POST", fmt.Sprintf("/admin/events/%d/replay?include_done=true&if_attempts=%d", id, now.Attempts), 200, &rep)
		if !slices.Equal(rep.Replayed, []int64{id}) {
			t.Errorf("replay with the attempts it has = %+v", rep)
		}
	})
}

// TestAdminReplayAttemptsShown: the number if_attempts compares is the one
// GET /admin/events/{id} gives (replay_attempts): for an event with
// targets the sum over its deliveries, where the event's own attempts
// stay 0. A client that passed the attempts it was shown was refused
// every time as "changed since you looked". An empty if_attempts, or one
// on a bulk replay, is a 400, not a replay without the condition.
func TestAdminReplayAttemptsShown(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startAdmin(t, dbURL, adminToken)
		needOps(t, h.st)
		parent := fanOutEvent(t, h.st, "fs")
		finishDone(t, h.st, claimOne(t, h.st, "fs/a"))
		finishDone(t, h.st, claimOne(t, h.st, "fs/b"))
		var d struct {
			Event          hookbox.Event `json:"event"`
			ReplayAttempts *int          `json:"replay_attempts"`
		}
		h.json("GET", fmt.Sprintf("/admin/events/%d", parent), 200, &d)
		if d.ReplayAttempts == nil || *d.ReplayAttempts != 2 {
			t.Fatalf("replay_attempts of an event with two deliveries run once each = %v, want 2", d.ReplayAttempts)
		}
		var rep struct {
			Replayed []int64 `json:"replayed"`
		}
		h.json("POST", fmt.Sprintf("/admin/events/%d/replay?include_done=true&if_attempts=%d", parent, *d.ReplayAttempts), 200, &rep)
		if len(rep.Replayed) != 2 {
			t.Errorf("replay with the replay_attempts shown = %+v, want both deliveries", rep)
		}
		for _, path := range []string{
			fmt.Sprintf("/admin/events/%d/replay?include_done=true&if_attempts=", parent),
			"/admin/replay?status=dead&if_attempts=0",
		} {
			if code, body := h.call("POST", path); code != 400 || !strings.Contains(string(body), "if_attempts") {
				t.Errorf("POST %s = %d %s, want 400 naming if_attempts", path, code, body)
			}
		}
	})
}
