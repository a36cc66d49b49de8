package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// poisonDeliveries makes the server refuse, with a data error, the
// delivery row (a FanOut event's child, inserted by insertDeliveries)
// of a target named "poison", and records the plan_cache_mode in force
// for every row stored.
const poisonDeliveries = `
CREATE TABLE plan_modes (source text, mode text);
CREATE FUNCTION poison_delivery() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.parent_id IS NOT NULL AND NEW.source LIKE '%/poison' THEN
        RAISE EXCEPTION 'invalid byte sequence' USING ERRCODE = '22021';
    END IF;
    INSERT INTO plan_modes VALUES (NEW.source, current_setting('plan_cache_mode'));
    RETURN NEW;
END $$;
CREATE TRIGGER poison_delivery BEFORE INSERT ON event_data FOR EACH ROW EXECUTE FUNCTION poison_delivery();`

// TestDataErrorInDeliveriesFailsOnlyItsDelivery: a data error in the
// statement that inserts a FanOut event's deliveries, which goes to the
// server in a batch between two SET LOCALs (ingestTx.query), is seen as
// one (isolate runs), so the one delivery is refused alone, in a single
// Ingest and in the second Add of an ingest transaction; and the
// transaction's INSERTs keep their generic plans after the failure.
func TestDataErrorInDeliveriesFailsOnlyItsDelivery(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	conn := connect(t, url)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, poisonDeliveries); err != nil {
		t.Fatal(err)
	}
	fan := func(source, id, target string) hookbox.Delivery {
		d := storetest.Delivery(source, id)
		d.FanOut = true
		d.Routes = []hookbox.Route{{Target: target}}
		return d
	}
	var ds []hookbox.Delivery
	for i := range 20 {
		ds = append(ds, fan("p", fmt.Sprint("good-", i), "ok"))
	}
	ds[7] = fan("p", "bad-1", "poison")
	rs, err := s.Ingest(ctx, ds)
	wantBad(t, err, rs, 7)
	if n := count(t, conn, `SELECT count(*) FROM event_data WHERE source = 'p'`); n != 19 {
		t.Errorf("%d events, want the 19 good ones", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM event_data WHERE source = 'p/ok'`); n != 19 {
		t.Errorf("%d deliveries, want the 19 good ones", n)
	}

	tx, err := s.BeginIngest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	first, err := tx.Add(ctx, []hookbox.Delivery{fan("q", "a", "ok")})
	if err != nil {
		t.Fatal(err)
	}
	second, err := tx.Add(ctx, []hookbox.Delivery{fan("q", "b", "ok"), fan("q", "c", "poison"), fan("q", "d", "ok")})
	wantBad(t, err, second, 1)
	third, err := tx.Add(ctx, []hookbox.Delivery{fan("q", "e", "ok")})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if first[0].ID == 0 || third[0].ID == 0 {
		t.Errorf("receipts: %+v %+v %+v", first, second, third)
	}
	if n := count(t, conn, `SELECT count(*) FROM event_data WHERE source = 'q/ok'`); n != 4 {
		t.Errorf("%d deliveries of q, want a, b, d and e", n)
	}
	// The events' INSERT plans generically, the deliveries' for their
	// arguments, on every path: the first try, the redo, the isolation
	// under savepoints, and the Add after it.
	for _, c := range []struct{ source, mode string }{{"q", "force_generic_plan"}, {"q/ok", "force_custom_plan"}} {
		if n := count(t, conn, `SELECT count(*) FROM plan_modes WHERE source = $1 AND mode <> $2`, c.source, c.mode); n != 0 {
			t.Errorf("%d rows of %s stored under a plan_cache_mode other than %s", n, c.source, c.mode)
		}
	}
}
