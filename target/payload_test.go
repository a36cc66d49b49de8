//go:build unix

package target_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/worker"
)

// TestEmptyBodyDelivered: on both stores, an event whose body is empty is
// delivered, as a 0-byte POST and a 0-byte stdin; it is not taken for a
// cleared payload.
func TestEmptyBodyDelivered(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		app := newSink(t, status(http.StatusOK, ""))
		dir := t.TempDir()
		sh := script(t, dir, "save.sh", `cat > "$OUT/stdin.$HOOKBOX_DELIVERY_ID"`+"\n")
		rg := newRigAt(t, dbURL, map[string]worker.Target{
			"fwd": newForward(t, target.ForwardOptions{URL: app.srv.URL}),
			"run": newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"OUT=" + dir}}),
		}, quick)
		ids := rg.ingest(
			hookbox.Delivery{Source: "fwd", DeliveryID: "empty", Payload: []byte{}},
			hookbox.Delivery{Source: "run", DeliveryID: "empty", Payload: []byte{}},
		)
		for _, id := range ids {
			rg.wait(id)
			rg.want(id, hookbox.StatusDone, 1)
		}
		if reqs := app.requests(); len(reqs) != 1 || len(reqs[0].body) != 0 {
			t.Fatalf("app got %d requests (want 1 with an empty body)", len(reqs))
		}
		if b, err := os.ReadFile(filepath.Join(dir, "stdin.empty")); err != nil || len(b) != 0 {
			t.Fatalf("exec stdin: %q, %v; want empty", b, err)
		}
	})
}

// TestClearedPayloadNotDelivered: on both stores, a replayed event whose
// payload retention cleared is dead after one attempt with a clear error,
// and neither the app nor the command is called for it.
func TestClearedPayloadNotDelivered(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		app := newSink(t, status(http.StatusOK, ""))
		dir := t.TempDir()
		sh := script(t, dir, "save.sh", `cat > "$OUT/stdin.$HOOKBOX_DELIVERY_ID.$HOOKBOX_ATTEMPT"`+"\n")
		rg := newRigAt(t, dbURL, map[string]worker.Target{
			"fwd": newForward(t, target.ForwardOptions{URL: app.srv.URL}),
			"run": newExec(t, target.ExecOptions{Argv: []string{sh}, Env: []string{"OUT=" + dir}}),
		}, quick)
		ctx := context.Background()
		ids := rg.ingest(
			hookbox.Delivery{Source: "fwd", DeliveryID: "full", Payload: []byte(`{"a":1}`)},
			hookbox.Delivery{Source: "run", DeliveryID: "full", Payload: []byte(`{"a":1}`)},
		)
		for _, id := range ids {
			rg.want(id, hookbox.StatusDone, 1)
		}
		// The cut-off must be later than the finish, which SQLite keeps
		// to the millisecond: let the clock pass the next one.
		for next := time.Now().Truncate(time.Millisecond).Add(time.Millisecond); time.Now().Before(next); {
			time.Sleep(100 * time.Microsecond)
		}
		if n, err := rg.s.ClearPayloads(ctx, time.Now()); err != nil || n != 2 {
			t.Fatalf("ClearPayloads = %d, %v; want 2", n, err)
		}
		// The store refuses the replay; were one to slip through, the
		// targets would refuse it (TestClearedPayloadIsPermanent).
		res, err := rg.s.Replay(ctx, hookbox.ReplayParams{IDs: ids, IncludeDone: true})
		if err != nil || len(res.Replayed) != 0 || len(res.NoPayload) != 2 {
			t.Fatalf("replay: %+v, %v; want both refused for their cleared payload", res, err)
		}
		rg.pool.Notify()
		for _, id := range ids {
			rg.want(id, hookbox.StatusDone, 1)
		}
		if n := len(app.requests()); n != 1 {
			t.Errorf("app got %d requests, want 1 (none for the cleared replay)", n)
		}
		if _, err := os.Stat(filepath.Join(dir, "stdin.full.1")); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 2 { // save.sh, stdin.full.1
			t.Errorf("exec ran for the cleared replay: %d files in its dir", len(entries))
		}
	})
}

// TestClearedPayloadIsPermanent: a cleared payload is a permanent error from
// both targets, without calling the app or the command.
func TestClearedPayloadIsPermanent(t *testing.T) {
	app := newSink(t, status(http.StatusOK, ""))
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	sh := script(t, dir, "mark.sh", "touch "+marker+"\n")
	for _, tg := range []worker.Target{
		newForward(t, target.ForwardOptions{URL: app.srv.URL}),
		newExec(t, target.ExecOptions{Argv: []string{sh}}),
	} {
		err := tg.Deliver(context.Background(), &hookbox.Event{ID: 9, Source: "s", DeliveryID: "d", Attempts: 1, PayloadCleared: true})
		if !worker.IsPermanent(err) || !strings.Contains(err.Error(), "event 9: payload was cleared") {
			t.Errorf("%T: err = %v, want a permanent 'event 9: payload was cleared' error", tg, err)
		}
	}
	if n := len(app.requests()); n != 0 {
		t.Errorf("app got %d requests", n)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
}
