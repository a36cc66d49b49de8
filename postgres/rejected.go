package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/rowscan"
)

var _ hookbox.RejectionStore = (*Store)(nil)

// AddRejections stores rs and trims the log to b in one transaction, sent
// as one batch; see hookbox.RejectionStore.
func (s *Store) AddRejections(ctx context.Context, rs []hookbox.Rejection, b hookbox.RejectionBounds) (int, error) {
	var trimmed int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		for _, r := range rs {
			batch.Queue(`INSERT INTO rejected_deliveries
                (source, unknown_source, received_at, remote_addr, status, reason, headers, body_size, body, body_complete)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
				r.Source, r.UnknownSource, r.ReceivedAt, r.RemoteAddr, r.Status, r.Reason,
				string(hookbox.EncodeHeader(r.Header)), r.BodySize, r.Body, r.BodyComplete)
		}
		if !b.Since.IsZero() {
			batch.Queue(`DELETE FROM rejected_deliveries WHERE received_at < $1`, b.Since).Exec(func(ct pgconn.CommandTag) error {
				trimmed += int(ct.RowsAffected())
				return nil
			})
		}
		if b.MaxCount > 0 {
			batch.Queue(`DELETE FROM rejected_deliveries WHERE id <=
                (SELECT id FROM rejected_deliveries ORDER BY id DESC LIMIT 1 OFFSET $1)`, b.MaxCount).Exec(func(ct pgconn.CommandTag) error {
				trimmed += int(ct.RowsAffected())
				return nil
			})
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return 0, opError(ctx, "add rejections", err)
	}
	return trimmed, nil
}

const rejectionColumns = `id, source, unknown_source, received_at, remote_addr, status, reason, headers::text,
    body_size, body_complete, coalesce(admitted_event_id, 0), body`

func scanRejection(row rowscan.Scanner) (hookbox.Rejection, error) {
	var (
		r   hookbox.Rejection
		hdr string
	)
	err := row.Scan(&r.ID, &r.Source, &r.UnknownSource, &r.ReceivedAt, &r.RemoteAddr, &r.Status, &r.Reason, &hdr,
		&r.BodySize, &r.BodyComplete, &r.AdmittedEventID, &r.Body)
	if err != nil {
		return r, err
	}
	r.ReceivedAt = r.ReceivedAt.UTC()
	r.Header, err = rowscan.Header(r.ID, []byte(hdr))
	return r, err
}

// Rejection returns one rejection with its body.
func (s *Store) Rejection(ctx context.Context, id int64) (hookbox.Rejection, error) {
	r, err := scanRejection(s.pool.QueryRow(ctx, `SELECT `+rejectionColumns+` FROM rejected_deliveries WHERE id = $1`, id))
	if err != nil {
		return hookbox.Rejection{}, queryError(fmt.Sprintf("rejection %d", id), err)
	}
	if r.BodyComplete && r.Body == nil {
		r.Body = []byte{}
	}
	return r, nil
}

// Rejections lists rejections matching f, newest first.
func (s *Store) Rejections(ctx context.Context, f hookbox.RejectionFilter) ([]hookbox.Rejection, error) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, cond+" $"+strconv.Itoa(len(args)))
	}
	if f.Source != "" {
		add("source =", f.Source)
	}
	if f.Status != 0 {
		add("status =", f.Status)
	}
	if !f.Since.IsZero() {
		add("received_at >=", f.Since)
	}
	if f.BeforeID > 0 {
		add("id <", f.BeforeID)
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
	args = append(args, limit)
	cols := rejectionColumns
	if !f.WithBody {
		cols = strings.TrimSuffix(cols, ", body") + ", NULL::bytea"
	}
	rows, err := s.pool.Query(ctx, `SELECT `+cols+` FROM rejected_deliveries`+where+
		` ORDER BY id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, queryError("list rejections", err)
	}
	defer rows.Close()
	var out []hookbox.Rejection
	for rows.Next() {
		r, err := scanRejection(rows)
		if err != nil {
			return nil, queryError("list rejections", err)
		}
		if f.WithBody && r.BodyComplete && r.Body == nil {
			r.Body = []byte{}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, queryError("list rejections", err)
	}
	return out, nil
}

// SetRejectionAdmitted records the event a re-check admitted.
func (s *Store) SetRejectionAdmitted(ctx context.Context, id, eventID int64) error {
	ct, err := s.pool.Exec(ctx, `UPDATE rejected_deliveries SET admitted_event_id = $1 WHERE id = $2`, eventID, id)
	if err != nil {
		return opError(ctx, "admit rejection", err)
	}
	if ct.RowsAffected() == 0 {
		return fmt.Errorf("rejection %d: %w", id, hookbox.ErrNotFound)
	}
	return nil
}
