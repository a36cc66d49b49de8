package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/worker"
)

// TestDeadLogSaysItHoldsItsKey: the "event dead" line of a delivery of an
// ordered target names its order key and whether it now holds it (on_dead:
// hold) or not (on_dead: skip). It named neither, so a held key, and the
// deliveries waiting behind it, did not show in the log.
func TestDeadLogSaysItHoldsItsKey(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		ctx := context.Background()
		if _, err := s.Ingest(ctx, []hookbox.Delivery{storetest.Keyed("h", "app", "1", "cust-1"),
			storetest.Keyed("k", "app", "1", "cust-2")}); err != nil {
			t.Fatal(err)
		}
		evs, err := s.Events(ctx, hookbox.Filter{Status: hookbox.StatusPending})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int64{}
		for _, e := range evs {
			ids[e.Source] = e.ID
		}
		var logs syncbuf.Buffer
		var seen reports
		p := worker.New(s, worker.Options{PollInterval: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnAttempt: seen.onAttempt})
		gone := worker.TargetFunc(func(context.Context, *hookbox.Event) error {
			return worker.Permanent(errors.New("410 Gone"))
		})
		for _, q := range []string{"h/app", "k/app"} {
			p.Route(q, gone)
			p.SetPolicy(q, worker.Policy{MaxAttempts: 3, Timeout: 10 * time.Second})
		}
		p.SetControls("h/app", worker.Controls{ByKey: true})
		p.SetControls("k/app", worker.Controls{ByKey: true, SkipDead: true})
		start(t, p)
		seen.await(t, p, ids["h/app"], 1)
		seen.await(t, p, ids["k/app"], 1)
		out := logs.String()
		for q, want := range map[string]string{
			"h/app": `order_key=cust-1 holds_key=true`,
			"k/app": `order_key=cust-2 holds_key=false`,
		} {
			line := fmt.Sprintf(`msg="event dead" event_id=%d source=%s`, ids[q], q)
			i := strings.Index(out, line)
			if i < 0 {
				t.Fatalf("no %s in the log:\n%s", line, out)
			}
			if l, _, _ := strings.Cut(out[i:], "\n"); !strings.Contains(l, want) {
				t.Errorf("the dead line of %s does not say %s: %s", q, want, l)
			}
		}
	})
}
