package metrics_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/metrics"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

// TestKeysHeldGauge: hookbox_target_keys_held counts, from a real store
// at scrape time, the keys of each target named that a dead delivery
// holds, 0 for a target with none; the label is the target's name, never
// the key.
func TestKeysHeldGauge(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hookbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	storetest.SeedHeldKey(t, st, "shop", "app", "cust-secretish-1", "forward: 500", "a1", "a2")
	storetest.SeedHeldKey(t, st, "shop", "app", "cust-secretish-2", "forward: 500", "b1", "b2", "b3")

	m := metrics.NewQueues([]string{"shop"}, []string{"shop/app", "shop/calm"})
	m.WatchHeldKeys(st.HeldKeys, []string{"shop/app", "shop/calm"}, 0, nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	got := scrape(t, srv.URL)
	for series, want := range map[string]float64{
		`hookbox_target_keys_held{target="shop/app"}`:  2,
		`hookbox_target_keys_held{target="shop/calm"}`: 0,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present: %v), want %v", series, v, ok, want)
		}
	}
	for series := range got {
		if strings.Contains(series, "secretish") {
			t.Errorf("an order key in a series: %s", series)
		}
	}
}

// TestKeysHeldFailureAlone: a failing count of held keys leaves its gauge
// out of the scrape, and the queue's other figures in it.
func TestKeysHeldFailureAlone(t *testing.T) {
	m := metrics.New(nil)
	m.WatchStats(func(ctx context.Context, now time.Time) (hookbox.Stats, error) {
		return hookbox.Stats{ByStatus: map[hookbox.Status]int{hookbox.StatusPending: 3}}, nil
	}, 0, nil)
	m.WatchHeldKeys(func(ctx context.Context, names []string) (map[string]int, error) {
		return nil, errors.New("db down")
	}, []string{"shop/app"}, 0, nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	got := scrape(t, srv.URL)
	if _, ok := got[`hookbox_target_keys_held{target="shop/app"}`]; ok {
		t.Errorf("a failed count was reported: %v", got)
	}
	if got[`hookbox_events{status="pending"}`] != 3 {
		t.Errorf("the other figures went with it: %v", got)
	}
}
