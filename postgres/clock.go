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
// Queue times (lease ends, due times) and the nonce sweep are on the
// server's clock whatever this host's reads; what is still stamped by the
// host (received_at, attempt times) and judged by it (signed timestamps
// against a source's tolerance) is off by the difference.
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
