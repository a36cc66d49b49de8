package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/worker"
)

// TestReplayPaceLetsLiveThrough: `hookbox replay` of a backlog larger
// than its pace says it is paced, and a delivery stored right after it is
// worked by a real worker pool before the replay has drained (before its
// last event), not after all of it; every replayed event is worked to
// done. `--rate 0` makes every event due at once, as before the pace, and
// says nothing of a pace; a negative --rate is a usage error.
func TestReplayPaceLetsLiveThrough(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		const n = 600 // the last due about 5 s after the first at 100 a second
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprint("down-", i)
		}
		dead := cliSeed(t, st, "gh", "push", hookbox.StatusDead, time.Now().Add(-time.Hour), names...)
		slices.Sort(dead)

		if _, _, err := runCLI(t, "replay", "--status", "dead", "--source", "gh", "--rate", "-5", "--db", dbURL); err == nil ||
			!strings.Contains(err.Error(), "--rate") {
			t.Fatalf("--rate -5: %v, want a usage error naming --rate", err)
		}
		out := mustCLI(t, "replay", "--status", "dead", "--source", "gh", "--db", dbURL)
		if !strings.Contains(out, fmt.Sprintf("replayed %d events", n)) ||
			!strings.Contains(out, "paced: the first 100 due now, the rest 100 a second after them") {
			t.Fatalf("replay output:\n%s\nwant it to say %d were replayed and how they are paced", out, n)
		}
		rs, err := st.Ingest(context.Background(), []hookbox.Delivery{{Source: "gh", DeliveryID: "live", EventType: "push",
			Header: http.Header{"Content-Type": {"application/json"}}, Payload: cliPayload("live"), ReceivedAt: time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		live := rs[0].ID

		var mu sync.Mutex
		var order []int64
		pool := worker.New(st, worker.Options{PollInterval: 20 * time.Millisecond})
		pool.Handle("gh", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
			mu.Lock()
			order = append(order, ev.ID)
			mu.Unlock()
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		if err := pool.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); pool.Stop(context.Background()) })
		for _, id := range append(slices.Clone(dead), live) {
			waitEventStatusWithin(t, st, id, hookbox.StatusDone, time.Minute)
		}
		mu.Lock()
		pos, last := slices.Index(order, live), slices.Index(order, dead[n-1])
		mu.Unlock()
		if pos < 0 || pos > last {
			t.Fatalf("the live delivery ran %dth, after the replay's last event (%dth): it waited behind the whole replay", pos+1, last+1)
		}

		again := cliSeed(t, st, "gh2", "push", hookbox.StatusDead, time.Now(), names[:150]...)
		out = mustCLI(t, "replay", "--status", "dead", "--source", "gh2", "--rate", "0", "--db", dbURL)
		if strings.Contains(out, "paced") {
			t.Errorf("--rate 0 output:\n%s\nwant no pace", out)
		}
		first, err := st.Event(context.Background(), again[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range again {
			e, err := st.Event(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if d := e.NextAttemptAt.Sub(first.NextAttemptAt); d < -time.Millisecond || d > time.Millisecond {
				t.Fatalf("--rate 0: event %d is due %v after the first, want all due at once", id, d)
			}
		}

		// Going on from a replay that stopped after pacing 1000 events:
		// the rest are paced after them, and the output says so, not
		// that the first are due now.
		cliSeed(t, st, "gh3", "push", hookbox.StatusDead, time.Now(), names[:50]...)
		out = mustCLI(t, "replay", "--status", "dead", "--source", "gh3", "--pace-after", "1000", "--db", dbURL)
		if !strings.Contains(out, "paced after the 1000 events of the replay it goes on from, 100 a second") || strings.Contains(out, "due now") {
			t.Errorf("--pace-after 1000 output:\n%s\nwant it paced after the 1000", out)
		}
		if _, _, err := runCLI(t, "replay", "--status", "dead", "--source", "gh3", "--pace-after", "-1", "--db", dbURL); err == nil ||
			!strings.Contains(err.Error(), "--pace-after") {
			t.Errorf("--pace-after -1: %v, want a usage error naming --pace-after", err)
		}
	})
}

// waitEventStatusWithin awaits event id's status want, for at most limit.
func waitEventStatusWithin(t *testing.T, st hookbox.Store, id int64, want hookbox.Status, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for eventStatus(t, st, id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("event %d is %s after %v, want %s", id, eventStatus(t, st, id), limit, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
