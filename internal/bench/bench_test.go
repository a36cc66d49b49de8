package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/loadgen"
	"github.com/hookbox/hookbox/verify"
)

// TestBenchWaitHandler: the wait1s handler prepares outside any
// transaction (a delivery is stored and answered while a Prepare waits),
// then writes one row per event in Apply.
func TestBenchWaitHandler(t *testing.T) {
	ctx := context.Background()
	vc := verify.Config{Scheme: "standard-webhooks", Secrets: []string{benchSecret}}
	f := &Options{Handler: handlerWait1s, Synchronous: "FULL"}
	bt, err := startBenchTarget(ctx, "sqlite", f, vc)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.stop()
	bt.serve()
	body := benchBody(256)
	gen := newDeliveries(vc, body, 0, 0)
	send := func(i int) {
		t.Helper()
		res, err := loadgen.Run(ctx, loadgen.Options{URL: bt.url, Connections: 1, Requests: []loadgen.Request{gen.next(i)}, Body: body})
		if err != nil || res.Status[http.StatusAccepted] != 1 {
			t.Fatalf("delivery %d: %+v %v", i, res, err)
		}
	}
	send(0)
	await(t, "the first Prepare to start", func() bool { return bt.prepared.Load() >= 1 })
	// The Prepare now waits for a second outside any transaction: the
	// store takes a delivery meanwhile.
	send(1)
	if n := bt.handled.Load(); n != 0 {
		t.Errorf("a delivery was answered only after %d Apply ran: Prepare held up ingest", n)
	}
	send(2)
	if err := bt.waitHandled(ctx, 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	var rows, waited int
	err = bt.svc.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*), min(waited) FROM bench_effects`).Scan(&rows, &waited)
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows != 3 || waited < int(benchWait.Milliseconds()) {
		t.Errorf("bench_effects: %d rows, shortest wait %d ms; want 3 rows, each after a %v Prepare", rows, waited, benchWait)
	}
	if n := bt.prepared.Load(); n != 3 {
		t.Errorf("Prepare ran %d times for 3 events", n)
	}
	await(t, "the events to be done", func() bool { return queued(ctx, bt.svc) == 0 })
}

// await polls cond until it holds, failing the test after a minute.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMinimalTarget: the minimal receiver answers every signed delivery
// 202 after storing it, refuses a forged one, and hookbox's result in the
// same run carries its ratios to it.
func TestMinimalTarget(t *testing.T) {
	var out strings.Builder
	err := Run(context.Background(), &Options{Targets: []string{"minimal-sqlite", "sqlite"}, Scheme: "standard-webhooks",
		Connections: 4, Requests: 1500, BodySize: 256, JSON: true, Synchronous: "FULL"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	var rs []Result
	if err := json.Unmarshal([]byte(out.String()), &rs); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Ingest.Status[http.StatusAccepted] != rs[0].Ingest.Requests || rs[0].Ingest.Requests == 0 {
		t.Fatalf("minimal-sqlite: %+v", rs[0].Ingest)
	}
	if rs[1].VsMinimal <= 0 || rs[1].P99VsMinimal <= 0 {
		t.Errorf("sqlite carries no ratio to the minimal receiver: %+v", rs[1])
	}
	if runtime.GOOS == "linux" {
		for _, r := range rs {
			if r.CPU == nil || r.CPU.Process <= 0 || r.CPU.Machine <= 0 {
				t.Errorf("%s: CPU per request %+v, want the machine's and the process's", r.Target, r.CPU)
			}
		}
	}

	st, err := openMinimalStore(context.Background(), "minimal-sqlite", t.TempDir()+"/m.db", "")
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.Config{Scheme: "standard-webhooks", Secrets: []string{benchSecret}})
	if err != nil {
		t.Fatal(err)
	}
	h, stop := newMinimal(v, st)
	defer stop()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhooks/bench", strings.NewReader(`{}`)))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("an unsigned delivery got %d, want 401", rec.Code)
	}
}

// TestPreloadPhases runs the three steps of a --preload run on both
// stores: the empty table, the preloaded one, and ingest while a purge
// deletes every preloaded row (and none of the measured ones).
func TestPreloadPhases(t *testing.T) {
	targets := []string{"sqlite"}
	pg := os.Getenv("HOOKBOX_TEST_POSTGRES")
	if pg != "" {
		targets = append(targets, "postgres")
	}
	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			var out strings.Builder
			err := Run(context.Background(), &Options{Targets: []string{target}, Postgres: pg, Scheme: "standard-webhooks",
				Connections: 4, Requests: 300, Duration: 200 * time.Millisecond, BodySize: 256, JSON: true, Synchronous: "FULL",
				Preload: 2500, CompareEmpty: true, PurgeDuring: true}, &out)
			if err != nil {
				t.Fatal(err)
			}
			var rs []Result
			if err := json.Unmarshal([]byte(out.String()), &rs); err != nil {
				t.Fatal(err)
			}
			if len(rs) != 3 || rs[0].Phase != "empty" || rs[1].Phase != "preloaded" || rs[2].Phase != "purging" {
				t.Fatalf("steps: %+v", rs)
			}
			for _, r := range rs {
				if r.Ingest == nil || r.Ingest.Requests == 0 || r.Ingest.Status[http.StatusAccepted] != r.Ingest.Requests {
					t.Errorf("%s: %+v", r.Phase, r.Ingest)
				}
			}
			if rs[1].VsBefore <= 0 || rs[2].P99VsBefore <= 0 {
				t.Errorf("ratios missing: %+v %+v", rs[1], rs[2])
			}
			if p := rs[2].Purge; p == nil || p.Rows != 2500 {
				t.Errorf("purge: %+v, want the 2500 preloaded rows", p)
			}
		})
	}
}

// TestOrderKeysDrain: with --order-keys the forward drain goes through a
// target with order_by, so every event is claimed by key: all of them
// reach the app, each stored as one event with one keyed delivery. The
// option needs --handler forward.
func TestOrderKeysDrain(t *testing.T) {
	if err := checkHandler(&Options{Handler: handlerNoop, OrderKeys: 4}); err == nil {
		t.Error("--order-keys with the noop handler was accepted")
	}
	var out strings.Builder
	err := Run(context.Background(), &Options{Targets: []string{"sqlite"}, Scheme: "standard-webhooks",
		Connections: 4, BodySize: 256, JSON: true, Synchronous: "FULL", Handler: handlerForward,
		OrderKeys: 7, DrainOnly: 300}, &out)
	if err != nil {
		t.Fatal(err)
	}
	var rs []Result
	if err := json.Unmarshal([]byte(out.String()), &rs); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Drain == nil || rs[0].Drain.Events != 300 {
		t.Fatalf("result %+v", rs)
	}

	vc := verify.Config{Scheme: "standard-webhooks", Secrets: []string{benchSecret}}
	f := &Options{Handler: handlerForward, OrderKeys: 7, Synchronous: "FULL"}
	bt, err := startBenchTarget(context.Background(), "sqlite", f, vc)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.stop()
	gen := newDeliveries(vc, benchBody(256), 0, 7)
	if err := storeEvents(context.Background(), bt.svc, gen, 70); err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	err = bt.svc.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT order_key FROM events WHERE source = $1`, hookbox.QueueName("bench", orderedTarget))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				return err
			}
			keys[k]++
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 7 || keys["k0"] != 10 {
		t.Errorf("deliveries by order key: %v, want 10 for each of 7 keys", keys)
	}
}

// TestEveryDeliveryStored: with every scheme, each generated delivery is a
// new one to hookbox: N deliveries sent to the sqlite target store N
// events, none taken for a duplicate of another by its body or its id.
func TestEveryDeliveryStored(t *testing.T) {
	ctx := context.Background()
	const n = 200
	for _, scheme := range []string{"standard-webhooks", "stripe", "github", "hmac", "none"} {
		t.Run(scheme, func(t *testing.T) {
			vc := benchSource(scheme)
			bt, err := startBenchTarget(ctx, "sqlite", &Options{Synchronous: "FULL"}, vc)
			if err != nil {
				t.Fatal(err)
			}
			defer bt.stop()
			bt.serve()
			body := benchBody(256)
			gen := newDeliveries(vc, body, 0, 0)
			if b := gen.next(0).Body; len(b) != len(body) {
				t.Errorf("a delivery of %d bytes, want the %d asked for", len(b), len(body))
			}
			res, err := loadgen.Run(ctx, loadgen.Options{URL: bt.url, Connections: 4, Count: n, Next: gen.next, Body: body})
			if err != nil || res.Status[http.StatusAccepted] != n {
				t.Fatalf("answers %+v, err %v; want %d answered 202", res, err, n)
			}
			st, err := bt.svc.Store.Stats(ctx, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			stored := 0
			for _, k := range st.ByStatus {
				stored += k
			}
			if stored != n {
				t.Errorf("%d deliveries stored %d events, want %d", n, stored, n)
			}
		})
	}
}

// TestDuplicateShare: --duplicates is the share of deliveries that repeat
// the one before, exactly as asked (the banner prints it), not the
// inverse of a whole number of deliveries.
func TestDuplicateShare(t *testing.T) {
	vc := benchSource("standard-webhooks")
	const n = 10000
	for _, share := range []float64{0, 0.05, 0.3, 0.4, 0.5} {
		gen := newDeliveries(vc, benchBody(64), share, 0)
		repeats, prev := 0, ""
		for i := range n {
			id := deliveryID(gen.next(i).Header)
			if id == prev {
				repeats++
			}
			prev = id
		}
		if want := int(share * n); repeats != want {
			t.Errorf("--duplicates %v: %d of %d deliveries repeat the one before, want %d", share, repeats, n, want)
		}
	}
}

// TestRefusedDeliveriesFail: a run whose deliveries are refused (here
// every one, 401) prints its figures, with no rate, and the counts of
// what was refused, then fails.
func TestRefusedDeliveriesFail(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	for _, asJSON := range []bool{false, true} {
		var out strings.Builder
		err := Run(context.Background(), &Options{URL: srv.URL + "/webhooks/bench", Secret: "wrong", Scheme: "github",
			Connections: 2, Requests: 300, BodySize: 64, JSON: asJSON}, &out)
		if err == nil || !strings.Contains(err.Error(), "url: 300 of 300 deliveries not accepted") {
			t.Errorf("json %v: err = %v, want the 300 refusals named", asJSON, err)
		}
		if asJSON {
			var rs []Result
			if err := json.Unmarshal([]byte(out.String()), &rs); err != nil {
				t.Fatalf("--json output %q: %v", out.String(), err)
			}
			if len(rs) != 1 || rs[0].Ingest.RPS != 0 || rs[0].Ingest.Accepted != 0 || rs[0].Ingest.Status[http.StatusUnauthorized] != 300 {
				t.Errorf("result %+v, want no rate and 300 answers 401", rs[0].Ingest)
			}
		} else if !strings.Contains(out.String(), "300 of 300 not accepted") {
			t.Errorf("output %q does not say the deliveries were refused", out.String())
		}
	}
}

// TestDrainOnlyOutput: a --drain-only line names its target (two targets'
// lines could not be told apart) and leaves out the lag and the tail, which
// a drain of stored events does not have; the memory line says the peak is
// the process's so far, not the target's.
func TestDrainOnlyOutput(t *testing.T) {
	var out strings.Builder
	for _, target := range []string{"sqlite", "postgres"} {
		printBench(&out, Result{Target: target, Handler: handlerNoop, MaxRSS: 64 << 20,
			Drain: &DrainResult{Events: 1000, Duration: 50 * time.Millisecond, Rate: 20000}})
	}
	var drains []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "drain") {
			drains = append(drains, line)
		}
		if strings.Contains(line, "RSS") && !strings.Contains(line, "so far") {
			t.Errorf("memory line %q reads as the target's own", line)
		}
	}
	if len(drains) != 2 || !strings.HasPrefix(drains[0], "sqlite ") || !strings.HasPrefix(drains[1], "postgres ") {
		t.Fatalf("drain lines %q, want one per target, each naming it", drains)
	}
	for _, line := range drains {
		if strings.Contains(line, "lag") || strings.Contains(line, "emptied") {
			t.Errorf("drain-only line %q has the lag and tail of a drain while sending", line)
		}
	}
}
