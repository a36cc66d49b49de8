package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/hookbox/hookbox"
)

var _ hookbox.NonceStore = (*Store)(nil)

// useNonce remembers a nonce, or keeps the row it conflicts with: a row
// with the same body keeps the later expiry, a row with another body is
// left as it was. It returns the body the nonce is remembered with.
const useNonce = `INSERT INTO nonces (source, nonce_sha256, body_sha256, expires_at) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (source, nonce_sha256) DO UPDATE SET expires_at = CASE
        WHEN nonces.body_sha256 = excluded.body_sha256 THEN max(nonces.expires_at, excluded.expires_at)
        ELSE nonces.expires_at END
    RETURNING body_sha256`

// UseNonces judges ns in one transaction on the writer connection; see
// hookbox.NonceStore.
func (s *Store) UseNonces(ctx context.Context, ns []hookbox.Nonce) ([]bool, error) {
	ok, err := hookbox.JudgeNonces(ns, func(first []int, keys []hookbox.NonceKey) ([][]byte, error) {
		kept := make([][]byte, len(first))
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			for j, i := range first {
				n := &ns[i]
				if err := tx.QueryRowContext(ctx, useNonce, n.Source, keys[j].Sum[:], n.BodySHA256, millis(n.Expires)).Scan(&kept[j]); err != nil {
					return err
				}
			}
			before, most := hookbox.NonceSweep(ns)
			_, err := tx.ExecContext(ctx, `DELETE FROM nonces WHERE rowid IN
                (SELECT rowid FROM nonces WHERE expires_at < ? LIMIT ?)`, millis(before), most)
			return err
		})
		return kept, err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: use nonces: %w", err)
	}
	return ok, nil
}
