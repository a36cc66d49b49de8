package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/routing"
	"github.com/hookbox/hookbox/storetest"
)

// TestHeldKeysLooksBehindHeadsOnly: HeldKeys looks behind a dead
// delivery for one waiting only when it heads its key, whatever plan the
// server picks. A key with many dead deliveries (its target on on_dead:
// skip, then set to hold) and one waiting behind them made the look
// behind walk the key's later dead entries for each of them, when the
// server ran it before the look in front (as it did at 2 million rows):
// quadratic, 0.87 s a scrape for 3,000 of one key. Here nested loops are
// forced on the server (and index scans, so that the dead-keys index is
// read however small the table), which then runs the looks in that
// order; the look behind must run once, for the key's head.
func TestHeldKeysLooksBehindHeadsOnly(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	ctx := context.Background()
	const dead = 50
	ds := make([]hookbox.Delivery, dead+1)
	for i := range ds {
		ds[i] = storetest.Delivery("s", fmt.Sprint("d", i))
		ds[i].FanOut = true
		ds[i].Routes = []hookbox.Route{{Target: "a", OrderKey: "hot"}}
	}
	if _, err := s.Ingest(ctx, ds); err != nil {
		t.Fatal(err)
	}
	// Every delivery of the key dead but the last, which waits.
	if _, err := conn.Exec(ctx, `UPDATE queue SET status = 'dead' WHERE source = 's/a'
		AND id < (SELECT max(id) FROM queue WHERE source = 's/a')`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE queue`); err != nil {
		t.Fatal(err)
	}
	got, err := s.HeldKeys(ctx, []string{"s/a"})
	if err != nil || got["s/a"] != 1 {
		t.Fatalf("HeldKeys = %v, %v, want s/a: 1", got, err)
	}
	if _, err := conn.Exec(ctx, `SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_bitmapscan = off; SET enable_material = off; SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	var plan []map[string]any
	if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+postgres.HeldKeysSQL, []string{"s/a"}).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	loops := map[string]float64{}
	indexes := map[string]bool{}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if alias, ok := n["Alias"].(string); ok {
			loops[alias] += n["Actual Loops"].(float64)
		}
		if name, ok := n["Index Name"].(string); ok {
			indexes[name] = true
		}
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
	}
	walk(plan[0]["Plan"].(map[string]any))
	// The statement repeats the dead-keys index's predicate, with
	// routing's prefix of a key of a delivery's own, so that the index
	// serves it.
	if !strings.Contains(postgres.HeldKeysSQL, "NOT LIKE '"+routing.NoKeyPrefix+"%'") || !indexes["queue_dead_keys"] {
		out, _ := json.MarshalIndent(plan, "", " ")
		t.Errorf("the count does not read queue_dead_keys, or not by routing's prefix %q:\n%s", routing.NoKeyPrefix, out)
	}
	if loops["b"] > 1 {
		out, _ := json.MarshalIndent(plan, "", " ")
		t.Errorf("the look behind ran %v times for one key with %d dead deliveries, want once:\n%s", loops["b"], dead, out)
	}
}
