package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestPostgresBlackHole puts a network that drops every packet between
// hookbox serve and PostgreSQL, under load (issue 12 item 4): nothing is
// refused or reset, the database just never answers. Every request sent
// during the outage must be answered 503 with Retry-After within 2 s
// (never 202, never left hanging until the sender gives up); when the
// network comes back, ingest resumes without a restart and every
// acknowledged delivery reaches the sink.
func TestPostgresBlackHole(t *testing.T) {
	needBinary(t)
	t.Parallel()
	const answerWithin = 2 * time.Second
	dbURL := pgtest.URL(t)
	proxy, viaProxy := faults.URLProxyFor(t, dbURL)

	srv, l, sink, stopLoad := loadedThroughProxy(t, viaProxy)
	defer stopLoad()
	waitFor(t, 30*time.Second, "100 deliveries acknowledged before the outage", func() (bool, string) {
		n := l.accepted()
		return n >= 100, fmt.Sprint(n, " acknowledged")
	})

	proxy.BlackHole()
	holeAt := time.Now()
	outage := 5 * time.Second
	if *fullRun {
		outage = 20 * time.Second
	}
	// The outage lasts until 20 requests sent at least answerWithin before
	// its end have been answered (those are the ones checked below): on
	// busy cores the senders may need longer than the outage's length.
	waitFor(t, 60*time.Second, "20 answers to requests sent during the black hole", func() (bool, string) {
		now := time.Now()
		n := 0
		for _, r := range l.repliesBetween(holeAt, now) {
			if r.sent.Before(now.Add(-answerWithin)) {
				n++
			}
		}
		return n >= 20 && now.Sub(holeAt) >= outage, fmt.Sprint(n, " answers")
	})
	restoreAt := time.Now()
	proxy.Restore()

	waitFor(t, 60*time.Second, "a 202 after the outage, without a restart", func() (bool, string) {
		for _, r := range l.repliesBetween(restoreAt, time.Now()) {
			if r.status == http.StatusAccepted {
				return true, ""
			}
		}
		return false, "none yet"
	})
	before := l.accepted()
	waitFor(t, 30*time.Second, "100 more deliveries acknowledged after the outage", func() (bool, string) {
		n := l.accepted() - before
		return n >= 100, fmt.Sprint(n, " acknowledged")
	})
	stopLoad()
	l.wait()

	// Every request sent during the black hole early enough to be answered
	// before the network came back.
	var during, unavailable, slow int
	var slowest time.Duration
	l.mu.Lock()
	replies := append([]reply(nil), l.replies...)
	l.mu.Unlock()
	for _, r := range replies {
		if r.sent.Before(holeAt) || r.sent.After(restoreAt.Add(-answerWithin)) {
			continue
		}
		during++
		took := r.got.Sub(r.sent)
		slowest = max(slowest, took)
		switch {
		case r.status == http.StatusServiceUnavailable && r.retryAfter != "":
			unavailable++
		case r.status == http.StatusAccepted:
			t.Errorf("%s: 202 during the black hole (sent %s after it began)", r.key, r.sent.Sub(holeAt))
		default:
			t.Errorf("%s: status %d %v %q during the black hole, want 503 with Retry-After", r.key, r.status, r.err, r.body)
		}
		if took > answerWithin {
			slow++
			if slow <= 5 {
				t.Errorf("%s: answered after %v (sent %s into the black hole), want within %v",
					r.key, took.Round(time.Millisecond), r.sent.Sub(holeAt).Round(time.Millisecond), answerWithin)
			}
		}
	}
	if during < 20 {
		t.Errorf("only %d requests sent during the black hole", during)
	}
	f := drainAndCheck(t, fleet{srv}, openStore(t, dbURL), l, sink, 2*time.Minute)
	t.Logf("black hole %s: %d requests sent during it, %d answered 503, %d slower than %v, slowest %v; acknowledged %d, stored %d, sink saw %d, not done %d",
		restoreAt.Sub(holeAt).Round(time.Millisecond), during, unavailable, slow, answerWithin, slowest.Round(time.Millisecond),
		f.Acknowledged, f.Stored, f.SinkSeen, f.NotDone)
}

// loadedThroughProxy starts hookbox serve on the database at dbURL (a
// proxy's), forwarding three signed sources to a sink, and a load of 16
// senders keeping what they sent; stopLoad ends the load.
func loadedThroughProxy(t *testing.T, dbURL string) (srv *server, l *load, sink *faults.Sink, stopLoad context.CancelFunc) {
	t.Helper()
	dir := t.TempDir()
	srcs := []source{polarSrc, stripeSrc, githubSrc}
	ep := newEndpoint("")
	l = newLoad(ep, srcs, 0.1)
	l.keep = true
	sink = faults.NewSink(faults.SinkOptions{Check: l.checkBody})
	t.Cleanup(sink.Close)
	srv = newServer(t, dir, writeConfig(t, dir, serverSpec{db: dbURL, sources: srcs, forward: sink.URL}))
	ep.set(srv.start().URL())
	ctx, stopLoad := context.WithCancel(context.Background())
	l.run(ctx, 16)
	return srv, l, sink, stopLoad
}
