package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestChargedDeadEventIsCounted: an event whose pool's process died while
// its handler ran is charged that attempt when the next process starts,
// and on its last attempt goes dead. That is how a poison event (one that
// kills each process that runs it) ends, and the dead-event alert
// (HookboxDeadEventsGrowing) reads hookbox_dead_total: the charge is
// counted there and in hookbox_attempts_total, and logged "event dead",
// as any other dead event. It was in none of them.
func TestChargedDeadEventIsCounted(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startOps(t, dbURL, `
admin_token: "`+opsAdminToken+`"
sources:
  - name: poison
    scheme: none
    max_attempts: 1
`, func(s *Service) {
			ctx := context.Background()
			if _, err := s.Store.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("poison", "kills-1")}); err != nil {
				t.Fatal(err)
			}
			// A pool of another process picks it, marks it, runs its
			// handler and dies: no commit, and no record of that pool.
			wt, err := s.Store.BeginWork(ctx)
			if err != nil {
				t.Fatal(err)
			}
			evs, _, err := wt.Pick(ctx, hookbox.ClaimParams{Owner: "gone-1", Limit: 1, Lease: time.Minute, Sources: []string{"poison"}})
			if err != nil || len(evs) != 1 {
				t.Fatalf("Pick = %d events, %v; want 1", len(evs), err)
			}
			if err := wt.Mark(ctx, hookbox.Mark{Key: "gone/0", Worker: "gone", Events: evs}); err != nil {
				t.Fatal(err)
			}
			if err := wt.Rollback(); err != nil {
				t.Fatal(err)
			}
			s.Pool.Handle("poison", "", func(context.Context, *hookbox.Tx, *hookbox.Event) error { return nil })
		})
		id := h.idOf("poison", "kills-1")
		h.waitStatus(id, hookbox.StatusDead)
		const dead = `hookbox_dead_total{source="poison"}`
		deadline := time.Now().Add(20 * time.Second)
		got := scrapeMetrics(t, h.url)
		for got[dead] == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s = 0 20 s after the event went dead (%q)", dead, h.event(id).LastError)
			}
			time.Sleep(10 * time.Millisecond)
			got = scrapeMetrics(t, h.url)
		}
		if got[dead] != 1 {
			t.Errorf("%s = %v, want 1", dead, got[dead])
		}
		if n := got[`hookbox_attempts_total{outcome="dead",source="poison"}`]; n != 1 {
			t.Errorf(`hookbox_attempts_total{outcome="dead",source="poison"} = %v, want 1`, n)
		}
		if !strings.Contains(h.logs.String(), `"msg":"event dead"`) {
			t.Errorf("no \"event dead\" line for the event charged dead; log:\n%s", h.logs.String())
		}
	})
}
