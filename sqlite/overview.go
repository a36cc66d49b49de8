package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

var _ hookbox.Overviewer = (*Store)(nil)

// Overview sums up events and rejections per source; see
// hookbox.Overviewer. Like Stats it reads no more of the events table
// than it must, whose rows hold the payloads (at ten million events a
// scan reads every page of the file), and nothing that grows with the
// done events: the sources come from a walk of the (source, delivery_id)
// index, one seek per source; the counts from the partial indexes of the
// unfinished (events_due) and the dead (events_dead) events; the chart
// of the last hour from the newest rows (hookbox.OverviewBuilder.WalkStored).
// All in one read transaction.
func (s *Store) Overview(ctx context.Context, now time.Time) ([]hookbox.SourceOverview, error) {
	b := hookbox.NewOverviewBuilder(now)
	since := millis(b.Since())
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: overview: %w", err)
	}
	defer tx.Rollback()
	if err := walkStored(ctx, tx, b); err != nil {
		return nil, fmt.Errorf("sqlite: overview: %w", err)
	}
	queries := []struct {
		q    string
		args []any
		add  func(source string, v, n int64)
	}{
		{overviewSources, nil, func(src string, _, _ int64) { b.Source(src) }},
		{overviewUnfinished, nil, func(src string, st, n int64) {
			status := hookbox.StatusPending
			if st == 1 {
				status = hookbox.StatusProcessing
			}
			b.Count(src, status, int(n))
		}},
		{overviewDead, nil, func(src string, _, n int64) { b.Count(src, hookbox.StatusDead, int(n)) }},
		{`SELECT source, min(next_attempt_at), 0 FROM events WHERE status IN ('pending', 'processing') AND next_attempt_at <= ?
            GROUP BY source`, []any{millis(now)}, func(src string, v, _ int64) {
			at := fromMillis(v)
			b.Due(src, at, hookbox.DueAge(at, now))
		}},
		{`SELECT CASE WHEN unknown_source THEN '' ELSE source END, received_at / 60000, count(*) FROM rejected_deliveries
            WHERE received_at >= ? GROUP BY 1, 2`, []any{since},
			func(src string, v, n int64) { b.Rejected(src, fromMillis(v*60000), int(n)) }},
	}
	for _, qu := range queries {
		rows, err := tx.QueryContext(ctx, qu.q, qu.args...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: overview: %w", err)
		}
		for rows.Next() {
			var src string
			var v, n int64
			if err := rows.Scan(&src, &v, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: overview: %w", err)
			}
			qu.add(src, v, n)
		}
		if err := closeRows(rows); err != nil {
			return nil, fmt.Errorf("sqlite: overview: %w", err)
		}
	}
	return b.Result(), nil
}

// Overview's reads, each with three columns (source, a value, a count):
// the sources that have events, a walk of the (source, delivery_id)
// index with one seek past each source to the next (counting every
// event of each source read the whole index: seconds at ten million);
// the unfinished events by status (1 for processing); the dead ones.
const (
	overviewSources = `WITH RECURSIVE s(source) AS (
            SELECT min(source) FROM events
            UNION ALL
            SELECT (SELECT min(source) FROM events WHERE source > s.source) FROM s WHERE s.source IS NOT NULL)
        SELECT source, 0, 0 FROM s WHERE source IS NOT NULL`
	overviewUnfinished = `SELECT source, status = 'processing', count(*) FROM events INDEXED BY events_due
        WHERE status IN ('pending', 'processing') GROUP BY 1, 2`
	overviewDead = `SELECT source, 0, count(*) FROM events INDEXED BY events_dead WHERE status = 'dead' GROUP BY source`
)

// overviewStored is WalkStored's page: events below an id (argument 1),
// newest first, at most a number (2), along the ids (NOT INDEXED: never
// through an index over every row).
const overviewStored = `SELECT id, source, created_at FROM events NOT INDEXED WHERE id < ? ORDER BY id DESC LIMIT ?`

// walkStored reads the chart's events through b.WalkStored.
func walkStored(ctx context.Context, tx *sql.Tx, b *hookbox.OverviewBuilder) error {
	return b.WalkStored(func(before int64, n int) ([]hookbox.StoredRow, error) {
		rows, err := tx.QueryContext(ctx, overviewStored, before, n)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []hookbox.StoredRow
		for rows.Next() {
			var r hookbox.StoredRow
			var at int64
			if err := rows.Scan(&r.ID, &r.Source, &at); err != nil {
				return nil, err
			}
			r.Created = fromMillis(at)
			out = append(out, r)
		}
		return out, rows.Err()
	})
}
