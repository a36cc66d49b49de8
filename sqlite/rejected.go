package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/rejtrim"
	"github.com/hookbox/hookbox/internal/rowscan"
)

var _ hookbox.RejectionStore = (*Store)(nil)

// AddRejections stores rs and trims the log to b in one transaction; see
// hookbox.RejectionStore.
func (s *Store) AddRejections(ctx context.Context, rs []hookbox.Rejection, b hookbox.RejectionBounds) (int, error) {
	var trimmed int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		insert, err := tx.PrepareContext(ctx, `INSERT INTO rejected_deliveries
            (source, unknown_source, received_at, remote_addr, status, reason, headers, body_size, body, body_complete)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		defer insert.Close()
		for _, r := range rs {
			_, err := insert.ExecContext(ctx,
				r.Source, r.UnknownSource, millis(r.ReceivedAt), r.RemoteAddr, r.Status, r.Reason,
				hookbox.EncodeHeader(r.Header), r.BodySize, r.Body, r.BodyComplete)
			if err != nil {
				return fmt.Errorf("insert: %w", err)
			}
		}
		n, err := trimRejections(ctx, tx, b)
		trimmed = n
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: add rejections: %w", err)
	}
	if len(rs) == 0 && trimmed > 0 {
		// A trim alone, as serve's hourly one: leave no copy of the
		// deleted rows in the WAL. Not after every write that trims: a
		// flood of refusals trims at each write, and each emptying holds
		// the writer while it waits for readers; the flood's own writes
		// soon overwrite the part of the WAL they use.
		s.emptyWAL()
	}
	return trimmed, nil
}

// trimRejections deletes the rows beyond b: older than b.Since, then, over
// b.MaxCount, the oldest of the largest groups (rejtrim.Cuts). The groups
// are counted through rejected_deliveries_group, and each group's oldest
// rows found through it: a write under the write lock reads two index
// ranges and deletes from at most every group once.
func trimRejections(ctx context.Context, tx *sql.Tx, b hookbox.RejectionBounds) (int, error) {
	var n int64
	if !b.Since.IsZero() {
		res, err := tx.ExecContext(ctx, `DELETE FROM rejected_deliveries WHERE received_at < ?`, millis(b.Since))
		if err != nil {
			return 0, fmt.Errorf("trim by age: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	if b.MaxCount > 0 {
		d, err := trimGroups(ctx, tx, b.MaxCount)
		if err != nil {
			return 0, fmt.Errorf("trim by count: %w", err)
		}
		n += d
	}
	return int(n), nil
}

// The statements of the trim by count, each through an index
// (TestTrimByCountUsesIndexes): counting the unknown names' rows and each
// configured source's, and deleting a group's oldest rows.
const (
	countUnknown = `SELECT count(*) FROM rejected_deliveries WHERE unknown_source = 1`
	countSources = `SELECT source, count(*) FROM rejected_deliveries WHERE unknown_source = 0 GROUP BY source`
	trimUnknown  = `DELETE FROM rejected_deliveries WHERE id IN
        (SELECT id FROM rejected_deliveries WHERE unknown_source = 1 ORDER BY id LIMIT ?)`
	trimSource = `DELETE FROM rejected_deliveries WHERE id IN
        (SELECT id FROM rejected_deliveries WHERE unknown_source = 0 AND source = ? ORDER BY id LIMIT ?)`
)

// countGroups appends the configured sources' groups to groups.
func countGroups(ctx context.Context, tx *sql.Tx, groups []rejtrim.Group) ([]rejtrim.Group, error) {
	rows, err := tx.QueryContext(ctx, countSources)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var g rejtrim.Group
		if err := rows.Scan(&g.Source, &g.Count); err != nil {
			return nil, err
		}
		groups = append(groups, g)
	}
	return groups, rows.Err()
}

// trimGroups deletes the rows beyond maxCount, the oldest of the largest
// groups first.
func trimGroups(ctx context.Context, tx *sql.Tx, maxCount int) (int64, error) {
	unknown := rejtrim.Group{Unknown: true}
	if err := tx.QueryRowContext(ctx, countUnknown).Scan(&unknown.Count); err != nil {
		return 0, err
	}
	groups := []rejtrim.Group{unknown}
	groups, err := countGroups(ctx, tx, groups)
	if err != nil {
		return 0, err
	}
	var n int64
	for i, cut := range rejtrim.Cuts(groups, maxCount) {
		if cut == 0 {
			continue
		}
		var res sql.Result
		if g := groups[i]; g.Unknown {
			res, err = tx.ExecContext(ctx, trimUnknown, cut)
		} else {
			res, err = tx.ExecContext(ctx, trimSource, g.Source, cut)
		}
		if err != nil {
			return 0, err
		}
		d, _ := res.RowsAffected()
		n += d
	}
	return n, nil
}

const rejectionColumns = `id, source, unknown_source, received_at, remote_addr, status, reason, headers,
    body_size, body_complete, admitted_event_id, body`

func scanRejection(row rowscan.Scanner) (hookbox.Rejection, error) {
	var (
		r        hookbox.Rejection
		received int64
		hdr      []byte
		admitted sql.NullInt64
	)
	err := row.Scan(&r.ID, &r.Source, &r.UnknownSource, &received, &r.RemoteAddr, &r.Status, &r.Reason, &hdr,
		&r.BodySize, &r.BodyComplete, &admitted, &r.Body)
	if err != nil {
		return r, err
	}
	r.ReceivedAt = fromMillis(received)
	r.AdmittedEventID = admitted.Int64
	r.Header, err = rowscan.Header(r.ID, hdr)
	return r, err
}

// Rejection returns one rejection with its body.
func (s *Store) Rejection(ctx context.Context, id int64) (hookbox.Rejection, error) {
	r, err := scanRejection(s.reader.QueryRowContext(ctx, `SELECT `+rejectionColumns+` FROM rejected_deliveries WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("rejection %d: %w", id, hookbox.ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("sqlite: rejection %d: %w", id, err)
	}
	if r.BodyComplete && r.Body == nil {
		r.Body = []byte{} // the driver reads a zero-length blob as nil
	}
	return r, nil
}

// Rejections lists rejections matching f, newest first.
func (s *Store) Rejections(ctx context.Context, f hookbox.RejectionFilter) ([]hookbox.Rejection, error) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		conds = append(conds, cond)
		args = append(args, arg)
	}
	if f.Source != "" {
		add("source = ?", f.Source)
	}
	if f.Status != 0 {
		add("status = ?", f.Status)
	}
	if !f.Since.IsZero() {
		add("received_at >= ?", millis(f.Since))
	}
	if f.BeforeID > 0 {
		add("id < ?", f.BeforeID)
	}
	if f.Unadmitted {
		conds = append(conds, "admitted_event_id IS NULL")
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = hookbox.DefaultListLimit
	}
	cols := rejectionColumns
	if !f.WithBody {
		cols = strings.TrimSuffix(cols, ", body") + ", NULL"
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT `+cols+` FROM rejected_deliveries`+where+` ORDER BY id DESC LIMIT ?`,
		append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list rejections: %w", err)
	}
	defer rows.Close()
	var out []hookbox.Rejection
	for rows.Next() {
		r, err := scanRejection(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list rejections: %w", err)
		}
		if f.WithBody && r.BodyComplete && r.Body == nil {
			r.Body = []byte{}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list rejections: %w", err)
	}
	return out, nil
}

// SetRejectionAdmitted records the event a re-check admitted.
func (s *Store) SetRejectionAdmitted(ctx context.Context, id, eventID int64) error {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE rejected_deliveries SET admitted_event_id = ? WHERE id = ?`, eventID, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: admit rejection %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("rejection %d: %w", id, hookbox.ErrNotFound)
	}
	return nil
}
