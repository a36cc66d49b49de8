package faults_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestPostgresStrandedConnections: under load, every connection hookbox
// serve has open to PostgreSQL goes silent for good (a firewall or NAT
// that forgot them and drops their packets; nothing is refused or reset),
// while new connections work. Whatever was waiting on a stranded
// connection (an ingest commit, a claim, a finish, a lease extension) must
// give up on it within its own bound and go on with a new connection: new
// deliveries are acknowledged again, and every acknowledged delivery
// reaches the sink, without a restart, long before TCP would notice
// (minutes: the kernel keeps retransmitting).
func TestPostgresStrandedConnections(t *testing.T) {
	needBinary(t)
	t.Parallel()
	dbURL := pgtest.URL(t)
	proxy, viaProxy := faults.URLProxyFor(t, dbURL)

	srv, l, sink, stopLoad := loadedThroughProxy(t, viaProxy)
	defer stopLoad()
	waitFor(t, 30*time.Second, "200 deliveries acknowledged and some forwarded", func() (bool, string) {
		n, seen := l.accepted(), sink.Stats().Distinct
		return n >= 200 && seen >= 50, fmt.Sprint(n, " acknowledged, ", seen, " at the sink")
	})

	stranded := proxy.Strand()
	strandAt := time.Now()
	t.Logf("stranded %d connections", stranded)
	waitFor(t, 90*time.Second, "a 202 to a request sent after the strand", func() (bool, string) {
		for _, r := range l.repliesBetween(strandAt.Add(time.Millisecond), time.Now()) {
			if r.status == http.StatusAccepted {
				return true, ""
			}
		}
		return false, "none yet"
	})
	ingestBack := time.Since(strandAt)
	before := l.accepted()
	waitFor(t, 60*time.Second, "200 more deliveries acknowledged after the strand", func() (bool, string) {
		n := l.accepted() - before
		return n >= 200, fmt.Sprint(n, " acknowledged")
	})
	stopLoad()
	l.wait()
	f := drainAndCheck(t, fleet{srv}, openStore(t, dbURL), l, sink, 2*time.Minute)
	t.Logf("stranded %d connections: ingest answered 202 again after %v; acknowledged %d, stored %d, sink saw %d, not done %d, drained %v after the load",
		stranded, ingestBack.Round(time.Millisecond), f.Acknowledged, f.Stored, f.SinkSeen, f.NotDone, f.Drain.Round(time.Millisecond))
}
