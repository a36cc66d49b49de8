package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
)

var _ hookbox.NonceStore = (*Store)(nil)

// useNonces remembers nonces, or keeps the rows they conflict with: a row
// with the same body keeps the later expiry, a row with another body is
// left as it was; it returns the body each is remembered with. The input
// comes sorted by key, so concurrent uses lock rows in one order. Under
// READ COMMITTED (hookbox's sessions run nothing else), ON CONFLICT DO
// UPDATE locks and reads a row's latest version, committed by any
// transaction, so a use that waited for another's insert of the same
// nonce judges against it. The same statement forgets a few rows past
// their margin that are not among its own (skipping rows another use
// holds), so no row is changed twice.
const useNonces = `WITH input AS (
    SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::timestamptz[])
        WITH ORDINALITY AS i(source, nonce_sha256, body_sha256, expires_at, n)
), used AS (
    INSERT INTO nonces (source, nonce_sha256, body_sha256, expires_at)
    SELECT source, nonce_sha256, body_sha256, expires_at FROM input ORDER BY n
    ON CONFLICT (source, nonce_sha256) DO UPDATE SET expires_at = CASE
        WHEN nonces.body_sha256 = EXCLUDED.body_sha256 THEN greatest(nonces.expires_at, EXCLUDED.expires_at)
        ELSE nonces.expires_at END
    RETURNING source, nonce_sha256, body_sha256
), expired AS (
    SELECT o.source, o.nonce_sha256 FROM nonces o
    WHERE o.expires_at < $5
      AND NOT EXISTS (SELECT 1 FROM input i WHERE i.source = o.source AND i.nonce_sha256 = o.nonce_sha256)
    LIMIT $6 FOR UPDATE SKIP LOCKED
), forgotten AS (
    DELETE FROM nonces o USING expired e WHERE o.source = e.source AND o.nonce_sha256 = e.nonce_sha256
)
SELECT source, nonce_sha256, body_sha256 FROM used`

// UseNonces judges ns in one statement; see hookbox.NonceStore. It
// commits without waiting for the WAL flush: the ingest commit of each
// delivery, which waits for it, comes after and flushes this one too, so a
// nonce is durable before its delivery is acknowledged.
func (s *Store) UseNonces(ctx context.Context, ns []hookbox.Nonce) ([]bool, error) {
	ok, err := hookbox.JudgeNonces(ns, func(first []int, keys []hookbox.NonceKey) ([][]byte, error) {
		sources, sums, bodies, expires := make([]string, len(first)), make([][]byte, len(first)), make([][]byte, len(first)), make([]time.Time, len(first))
		for j, i := range first {
			sources[j], sums[j], bodies[j], expires[j] = keys[j].Source, keys[j].Sum[:], ns[i].BodySHA256, ns[i].Expires
		}
		before, most := hookbox.NonceSweep(ns)
		kept := map[hookbox.NonceKey][]byte{}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`SET LOCAL synchronous_commit = off`)
			b.Queue(useNonces, sources, sums, bodies, expires, before, most).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var k hookbox.NonceKey
					var sum, body []byte
					if err := rows.Scan(&k.Source, &sum, &body); err != nil {
						return err
					}
					copy(k.Sum[:], sum)
					kept[k] = body
				}
				return rows.Err()
			})
			return tx.SendBatch(ctx, b).Close()
		})
		out := make([][]byte, len(first))
		for j := range first {
			out[j] = kept[keys[j]]
		}
		return out, err
	})
	if err != nil {
		return nil, opError(ctx, "use nonces", err)
	}
	return ok, nil
}
