package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/hookbox/hookbox"
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
	return trimmed, nil
}

// trimRejections deletes the rows beyond b: older than b.Since, and all but
// the newest b.MaxCount.
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
		res, err := tx.ExecContext(ctx, `DELETE FROM rejected_deliveries WHERE id <=
            (SELECT id FROM rejected_deliveries ORDER BY id DESC LIMIT 1 OFFSET ?)`, b.MaxCount)
		if err != nil {
			return 0, fmt.Errorf("trim by count: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	return int(n), nil
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
