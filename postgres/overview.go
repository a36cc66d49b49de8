package postgres

import (
	"context"
	"time"

	"github.com/hookbox/hookbox"
)

var _ hookbox.Overviewer = (*Store)(nil)

// Overview sums up events and rejections per source; see
// hookbox.Overviewer. Nothing it reads grows with the finished events:
// the sources come from a walk of event_data's (source, delivery_id)
// index, one seek per source (overviewSources); the counts from the
// partial indexes of the unfinished (queue_due) and the dead
// (queue_dead) rows; its chart walks event_data from the newest id
// (hookbox.OverviewBuilder.WalkStored).
func (s *Store) Overview(ctx context.Context, now time.Time) ([]hookbox.SourceOverview, error) {
	b := hookbox.NewOverviewBuilder(now)
	since := b.Since()
	rows, err := s.pool.Query(ctx, overviewSources)
	if err != nil {
		return nil, opError(ctx, "overview", err)
	}
	for rows.Next() {
		var src string
		if err := rows.Scan(&src); err != nil {
			rows.Close()
			return nil, opError(ctx, "overview", err)
		}
		b.Source(src)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, opError(ctx, "overview", err)
	}
	rows, err = s.pool.Query(ctx, overviewCounts)
	if err != nil {
		return nil, opError(ctx, "overview", err)
	}
	for rows.Next() {
		var src, st string
		var n int64
		if err := rows.Scan(&src, &st, &n); err != nil {
			rows.Close()
			return nil, opError(ctx, "overview", err)
		}
		b.Count(src, hookbox.Status(st), int(n))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, opError(ctx, "overview", err)
	}
	rows, err = s.pool.Query(ctx, overviewDue, fromNow(now))
	if err != nil {
		return nil, opError(ctx, "overview", err)
	}
	for rows.Next() {
		var src string
		var oldest, at time.Time
		if err := rows.Scan(&src, &oldest, &at); err != nil {
			rows.Close()
			return nil, opError(ctx, "overview", err)
		}
		due, age := dueSince(&oldest, at)
		b.Due(src, due, age)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, opError(ctx, "overview", err)
	}
	rows, err = s.pool.Query(ctx, `SELECT CASE WHEN unknown_source THEN '' ELSE source END, date_trunc('minute', received_at), count(*)
            FROM rejected_deliveries WHERE received_at >= $1 GROUP BY 1, 2`, since)
	if err != nil {
		return nil, opError(ctx, "overview", err)
	}
	for rows.Next() {
		var src string
		var at time.Time
		var n int64
		if err := rows.Scan(&src, &at, &n); err != nil {
			rows.Close()
			return nil, opError(ctx, "overview", err)
		}
		b.Rejected(src, at, int(n))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, opError(ctx, "overview", err)
	}
	err = b.WalkStored(func(before int64, n int) ([]hookbox.StoredRow, error) {
		rows, err := s.pool.Query(ctx, overviewStored, before, n)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []hookbox.StoredRow
		for rows.Next() {
			var r hookbox.StoredRow
			if err := rows.Scan(&r.ID, &r.Source, &r.Created); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, rows.Err()
	})
	if err != nil {
		return nil, opError(ctx, "overview", err)
	}
	return b.Result(), nil
}

// overviewSources lists the sources (queue names among them) that have
// events: a walk of event_data's (source, delivery_id) index, one seek
// past each source to the next, as migration 00015 walks it.
const overviewSources = `WITH RECURSIVE sources (source) AS (
    (SELECT source FROM event_data ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT e.source FROM event_data e WHERE e.source > s.source ORDER BY e.source LIMIT 1)
    FROM sources s WHERE s.source IS NOT NULL
)
SELECT source FROM sources WHERE source IS NOT NULL`

// overviewCounts counts each source's unfinished events by status,
// through queue_due, and its dead ones, through queue_dead: each read
// is as long as what it counts.
const overviewCounts = `SELECT source, status, count(*) FROM queue WHERE status IN ('pending', 'processing') GROUP BY source, status
UNION ALL
SELECT source, 'dead', count(*) FROM queue WHERE status = 'dead' GROUP BY source`

// overviewDue finds each source's oldest due event, due by $1 (the
// caller's now, as fromNow) on the database's clock, as statsDue does.
var overviewDue = `SELECT source, min(next_attempt_at), ` + dbNow("$1::bigint") + ` FROM queue
    WHERE status IN ('pending', 'processing') AND next_attempt_at <= ` + dbNow("$1::bigint") + `
    GROUP BY source`

// overviewStored is WalkStored's page: events below an id ($1), newest
// first, at most $2, along event_data's primary key (it has no index on
// created_at, and a scan would read every payload).
const overviewStored = `SELECT id, source, created_at FROM event_data WHERE id < $1 ORDER BY id DESC LIMIT $2`
