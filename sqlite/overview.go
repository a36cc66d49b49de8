package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/hookbox/hookbox"
)

var _ hookbox.Overviewer = (*Store)(nil)

// Overview sums up events and rejections per source; see
// hookbox.Overviewer.
func (s *Store) Overview(ctx context.Context, now time.Time) ([]hookbox.SourceOverview, error) {
	b := hookbox.NewOverviewBuilder(now)
	since := millis(b.Since())
	queries := []struct {
		q    string
		args []any
		add  func(source string, v, n int64)
	}{
		{`SELECT source, status, count(*) FROM events GROUP BY source, status`, nil, nil},
		{`SELECT source, min(next_attempt_at), 0 FROM events WHERE status IN ('pending', 'processing') AND next_attempt_at <= ?
            GROUP BY source`, []any{millis(now)}, func(src string, v, _ int64) { b.Due(src, fromMillis(v)) }},
		{`SELECT source, created_at / 60000, count(*) FROM events WHERE created_at >= ? GROUP BY 1, 2`, []any{since},
			func(src string, v, n int64) { b.Stored(src, fromMillis(v*60000), int(n)) }},
		{`SELECT CASE WHEN unknown_source THEN '' ELSE source END, received_at / 60000, count(*) FROM rejected_deliveries
            WHERE received_at >= ? GROUP BY 1, 2`, []any{since},
			func(src string, v, n int64) { b.Rejected(src, fromMillis(v*60000), int(n)) }},
	}
	for i, qu := range queries {
		rows, err := s.reader.QueryContext(ctx, qu.q, qu.args...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: overview: %w", err)
		}
		for rows.Next() {
			var src string
			var n int64
			if i == 0 {
				var st string
				if err := rows.Scan(&src, &st, &n); err != nil {
					rows.Close()
					return nil, fmt.Errorf("sqlite: overview: %w", err)
				}
				b.Count(src, hookbox.Status(st), int(n))
				continue
			}
			var v int64
			if err := rows.Scan(&src, &v, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: overview: %w", err)
			}
			qu.add(src, v, n)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("sqlite: overview: %w", err)
		}
	}
	return b.Result(), nil
}
