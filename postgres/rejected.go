package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/rejtrim"
	"github.com/hookbox/hookbox/internal/rowscan"
)

var _ hookbox.RejectionStore = (*Store)(nil)

// AddRejections stores rs and trims the log to b in one transaction: the
// rows and the trim by age sent as one batch, then the trim by count
// (trimGroups); see hookbox.RejectionStore. The trim by age is judged on
// the database's clock (trimByAge).
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
			batch.Queue(trimByAge, fromNow(b.Since)).Exec(func(ct pgconn.CommandTag) error {
				trimmed += int(ct.RowsAffected())
				return nil
			})
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		if b.MaxCount > 0 {
			n, err := trimGroups(ctx, tx, b.MaxCount)
			trimmed += n
			return err
		}
		return nil
	})
	if err != nil {
		return 0, opError(ctx, "add rejections", err)
	}
	return trimmed, nil
}

// trimByAge deletes the rows received before $1, the start of the log's
// window on the caller's clock sent as fromNow, judged on the database's
// clock: by the trimming host's own, one whose clock was ahead by more
// than max_age deleted the refusals every other host had just logged.
var trimByAge = `DELETE FROM rejected_deliveries WHERE received_at < ` + dbNow("$1::bigint")

// trimLock serializes the trims of the rejected log of one schema until
// the end of the transaction (see trimGroups).
const trimLock = `SELECT pg_advisory_xact_lock(hashtext('hookbox-rejected-trim:' || current_schema()))`

// trimGroups deletes the rows beyond maxCount: the oldest of the largest
// groups first (rejtrim.Cuts), each configured source's rows a group and
// every unknown name's one more. The groups are counted through
// rejected_deliveries_group and each one's oldest rows found through it
// or rejected_deliveries_unknown: a round trip to count, one to delete
// from at most every group once.
//
// One trim at a time per schema (trimLock, held until the transaction
// ends): two writers counting at once (two processes, or the recorder
// and the hourly Trim) each missed the other's new rows, deleted the same
// oldest ones, and left the log above maxCount. Under READ COMMITTED the
// count, a statement after the lock, sees the rows of the trims before.
func trimGroups(ctx context.Context, tx pgx.Tx, maxCount int) (int, error) {
	if _, err := tx.Exec(ctx, trimLock); err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, `SELECT unknown_source, CASE WHEN unknown_source THEN '' ELSE source END, count(*)
        FROM rejected_deliveries GROUP BY 1, 2`)
	if err != nil {
		return 0, err
	}
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rejtrim.Group, error) {
		var g rejtrim.Group
		err := row.Scan(&g.Unknown, &g.Source, &g.Count)
		return g, err
	})
	if err != nil {
		return 0, err
	}
	trimmed := 0
	count := func(ct pgconn.CommandTag) error {
		trimmed += int(ct.RowsAffected())
		return nil
	}
	batch := &pgx.Batch{}
	for i, cut := range rejtrim.Cuts(groups, maxCount) {
		switch g := groups[i]; {
		case cut == 0:
		case g.Unknown:
			batch.Queue(`DELETE FROM rejected_deliveries WHERE id IN
                (SELECT id FROM rejected_deliveries WHERE unknown_source = true ORDER BY id LIMIT $1)`, cut).Exec(count)
		default:
			batch.Queue(`DELETE FROM rejected_deliveries WHERE id IN
                (SELECT id FROM rejected_deliveries WHERE unknown_source = false AND source = $1 ORDER BY id LIMIT $2)`,
				g.Source, cut).Exec(count)
		}
	}
	if batch.Len() == 0 {
		return 0, nil
	}
	err = tx.SendBatch(ctx, batch).Close()
	return trimmed, err
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
