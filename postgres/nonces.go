package postgres

import (
	"context"

	"github.com/hookbox/hookbox"
)

var _ hookbox.NonceStore = (*Store)(nil)

// nonceTrim is how many expired nonces each use forgets: more than one, so
// that the table shrinks back after a burst.
const nonceTrim = 4

// useNonce remembers a nonce, or keeps the row it conflicts with: an
// expired row is taken over, a row with the same body keeps the later
// expiry, a row with another body is left as it was. ON CONFLICT DO UPDATE
// locks and reads the row's latest version, committed by any transaction,
// so a use that waited for another's insert of the same value judges
// against it. The same statement forgets a few expired rows of other
// values (skipping rows another use holds), so no row is changed twice.
const useNonce = `WITH used AS (
    INSERT INTO nonces (source, nonce, body_sha256, expires_at) VALUES ($1, $2, $3, $4)
    ON CONFLICT (source, nonce) DO UPDATE SET
        body_sha256 = CASE WHEN nonces.expires_at <= $5 THEN EXCLUDED.body_sha256 ELSE nonces.body_sha256 END,
        expires_at = CASE
            WHEN nonces.expires_at <= $5 THEN EXCLUDED.expires_at
            WHEN nonces.body_sha256 = EXCLUDED.body_sha256 THEN greatest(nonces.expires_at, EXCLUDED.expires_at)
            ELSE nonces.expires_at END
    RETURNING body_sha256 = $3 AS same
), expired AS (
    SELECT source, nonce FROM nonces
    WHERE expires_at <= $5 AND NOT (source = $1 AND nonce = $2)
    LIMIT $6 FOR UPDATE SKIP LOCKED
), forgotten AS (
    DELETE FROM nonces n USING expired e WHERE n.source = e.source AND n.nonce = e.nonce
)
SELECT same FROM used`

// UseNonce remembers n, or judges it against the nonce remembered before;
// see hookbox.NonceStore.
func (s *Store) UseNonce(ctx context.Context, n hookbox.Nonce) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, useNonce, n.Source, n.Value, n.BodySHA256, n.Expires, n.Now, nonceTrim).Scan(&ok); err != nil {
		return false, opError(ctx, "use nonce", err)
	}
	return ok, nil
}
