package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"

	"github.com/hookbox/hookbox"
)

var _ hookbox.NonceStore = (*Store)(nil)

// nonceTrim is how many expired nonces each use forgets: more than one, so
// that the table shrinks back after a burst.
const nonceTrim = 4

// useNonce remembers a nonce, or keeps the row it conflicts with: a row
// with the same body keeps the later expiry, a row with another body is
// left as it was. The body it returns tells which happened.
const useNonce = `INSERT INTO nonces (source, nonce_sha256, body_sha256, expires_at) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (source, nonce_sha256) DO UPDATE SET expires_at = CASE
        WHEN nonces.body_sha256 = excluded.body_sha256 THEN max(nonces.expires_at, excluded.expires_at)
        ELSE nonces.expires_at END
    RETURNING body_sha256`

// UseNonce remembers n, or judges it against the nonce remembered before;
// see hookbox.NonceStore. It writes on the writer connection, like every
// write here, so uses of one value are judged one after the other.
func (s *Store) UseNonce(ctx context.Context, n hookbox.Nonce) (bool, error) {
	var ok bool
	key := sha256.Sum256([]byte(n.Value))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var kept []byte
		err := tx.QueryRowContext(ctx, useNonce, n.Source, key[:], n.BodySHA256, millis(n.Expires)).Scan(&kept)
		if err != nil {
			return err
		}
		ok = bytes.Equal(kept, n.BodySHA256)
		_, err = tx.ExecContext(ctx, `DELETE FROM nonces WHERE rowid IN
            (SELECT rowid FROM nonces WHERE expires_at < ? LIMIT ?)`, millis(n.Now.Add(-hookbox.NonceKeep)), nonceTrim)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: use nonce: %w", err)
	}
	return ok, nil
}
