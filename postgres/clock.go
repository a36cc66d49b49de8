package postgres

import (
	"context"
	"time"
)

// ClockOffset measures how far the database server's clock reads from this
// host's: positive when the server's is ahead. It compares the server's
// clock_timestamp() with the middle of the round trip that read it, the
// shortest of three, so it is off by at most half that round trip.
//
// Queue times (lease ends, due times, updated_at), what is due and for
// how long (Stats, Overview, TargetBacklog), the retention windows (Purge,
// ClearPayloads, the rejected log's max_age), the session and nonce
// sweeps are on the server's clock whatever this host's reads: a time the
// host passes is taken as a distance from its own now (fromNow). What is
// still stamped by the host (received_at, attempt times, a session's
// expiry) and judged by it (signed timestamps against a source's
// tolerance, a session cookie's expiry) is off by the difference.
func (s *Store) ClockOffset(ctx context.Context) (time.Duration, error) {
	var best, offset time.Duration
	for i := range 3 {
		sent := time.Now()
		var db time.Time
		if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
			return 0, queryError("clock offset", err)
		}
		got := time.Now()
		rtt := got.Sub(sent)
		if i == 0 || rtt < best {
			// rtt is read on the monotonic clock; the midpoint is on the
			// wall clock, the one compared.
			best, offset = rtt, db.Sub(sent.Add(rtt/2).Round(0))
		}
	}
	return offset, nil
}
