package postgres

import (
	"context"
	"crypto/sha256"

	"github.com/hookbox/hookbox"
)

var _ hookbox.NonceStore = (*Store)(nil)

// nonceTrim is how many expired nonces each use forgets: more than one, so
// that the table shrinks back after a burst.
const nonceTrim = 4

// useNonce remembers a nonce, or keeps the row it conflicts with: a row
// with the same body keeps the later expiry, a row with another body is
// left as it was. Under READ COMMITTED (hookbox's sessions run nothing
// else), ON CONFLICT DO UPDATE locks and reads the row's latest version,
// committed by any transaction, so a use that waited for another's insert
// of the same value judges against it. The same statement forgets a few
// rows past their margin, of other values (skipping rows another use
// holds), so no row is changed twice.
const useNonce = `WITH used AS (
    INSERT INTO nonces (source, nonce_sha256, body_sha256, expires_at) VALUES ($1, $2, $3, $4)
    ON CONFLICT (source, nonce_sha256) DO UPDATE SET expires_at = CASE
        WHEN nonces.body_sha256 = EXCLUDED.body_sha256 THEN greatest(nonces.expires_at, EXCLUDED.expires_at)
        ELSE nonces.expires_at END
    RETURNING body_sha256 = $3 AS same
), expired AS (
    SELECT source, nonce_sha256 FROM nonces
    WHERE expires_at < $5 AND NOT (source = $1 AND nonce_sha256 = $2)
    LIMIT $6 FOR UPDATE SKIP LOCKED
), forgotten AS (
    DELETE FROM nonces n USING expired e WHERE n.source = e.source AND n.nonce_sha256 = e.nonce_sha256
)
SELECT same FROM used`

// UseNonce remembers n, or judges it against the nonce remembered before;
// see hookbox.NonceStore.
func (s *Store) UseNonce(ctx context.Context, n hookbox.Nonce) (bool, error) {
	var ok bool
	key := sha256.Sum256([]byte(n.Value))
	err := s.pool.QueryRow(ctx, useNonce, n.Source, key[:], n.BodySHA256, n.Expires, n.Now.Add(-hookbox.NonceKeep), nonceTrim).Scan(&ok)
	if err != nil {
		return false, opError(ctx, "use nonce", err)
	}
	return ok, nil
}
